from draftgen_contracts.prompt_classes import DEFAULT_PROMPT_CLASSES, PromptClass, has_one_catch_all


def test_a_class_reads_the_specs_spelling_and_the_configs_and_a_row_of_a_table():
    spec = PromptClass.model_validate({"name": "short", "maxPromptTokens": 2048, "concurrency": 150,
                                       "maxNewTokens": 10_240})
    config = PromptClass.model_validate({"name": "short", "max_prompt_tokens": 2048, "concurrency": 150,
                                         "max_new_tokens": 10_240})
    assert spec == config == PromptClass(name="short", max_prompt_tokens=2048, concurrency=150, max_new_tokens=10_240) == DEFAULT_PROMPT_CLASSES[0]
    assert spec.model_dump(by_alias=True)["maxPromptTokens"] == 2048 and "max_prompt_tokens" in config.model_dump()


def test_exactly_one_class_takes_the_rest():
    short, long = DEFAULT_PROMPT_CLASSES
    assert has_one_catch_all([short, long]) and not has_one_catch_all([short]) and not has_one_catch_all([long, long])
