import json

from draftgen_dev.builders import generate_config
from jobrunner.shared.recommended_sampling import recommended_sampling, with_recommended_sampling


def write_generation_config(folder, **document):
    folder.mkdir(exist_ok=True)
    (folder / "generation_config.json").write_text(json.dumps(document))
    return folder


def test_the_five_sampling_keys_sglang_reads_are_taken_and_nothing_else(tmp_path):
    model = write_generation_config(tmp_path / "m", temperature=0.6, top_p=0.95, top_k=20, min_p=0,
                                    repetition_penalty=1.05, do_sample=True, max_new_tokens=4096, eos_token_id=[2])
    assert recommended_sampling(model) == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0,
                                           "repetition_penalty": 1.05}


def test_no_file_a_broken_file_and_a_value_sglang_refuses_recommend_nothing(tmp_path):
    assert recommended_sampling(tmp_path) == {} and recommended_sampling(None) == {}
    (tmp_path / "generation_config.json").write_text("{not json")
    assert recommended_sampling(tmp_path) == {}
    assert recommended_sampling(write_generation_config(tmp_path / "b", temperature="hot", top_p=0.9)) == {"top_p": 0.9}


def test_each_dataset_keeps_its_own_keys_over_the_recommendation(tmp_path):
    model = write_generation_config(tmp_path / "m", temperature=0.6, top_p=0.95)
    config = generate_config("http://127.0.0.1:1", tmp_path / "out", None, [
        {"name": "mine", "path": "a.jsonl", "budget_tokens": 10, "pretokenized": True,
         "sampling_params": {"temperature": 1.0, "sampling_seed": 3}},
        {"name": "theirs", "path": "b.jsonl", "budget_tokens": 10, "pretokenized": True}], model_path=str(model))
    mine, theirs = with_recommended_sampling(config).datasets
    assert mine.sampling_params == {"temperature": 1.0, "top_p": 0.95, "sampling_seed": 3}
    assert theirs.sampling_params == {"temperature": 0.6, "top_p": 0.95}
    assert with_recommended_sampling(config.model_copy(update={"model_path": None})) == config.model_copy(
        update={"model_path": None})
