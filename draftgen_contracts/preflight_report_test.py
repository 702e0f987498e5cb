from draftgen_contracts.preflight_report import DatasetReport, ModelReport, PreflightReport, parse_preflight


def test_findings_parse_from_the_writers_json_and_bad_ones_are_none():
    found = parse_preflight('{"model": {"hidden_size": 64, "text_config_key": null}, "problem": '
                            '{"where": "f.jsonl: row 3: messages", "message": "boom"}, "datasets": [{"name": "a"}]}')
    assert found.model.hidden_size == 64 and found.problem.says() == "f.jsonl: row 3: messages: boom"
    assert parse_preflight("{not json") is None and parse_preflight('{"datasets": 3}') is None and parse_preflight(None) is None


def test_the_document_and_the_status_spell_the_same_findings_their_own_way():
    written = PreflightReport(model=ModelReport(architecture="LlamaForCausalLM", hidden_size=64, num_layers=8),
                              datasets=[DatasetReport(name="a", usable_rows=9, skipped_by_reason={"bad_json": 1})])
    document, status = written.model_dump_json(), written.model_dump(by_alias=True)
    assert '"usable_rows":9' in document and status["datasets"][0]["usableRows"] == 9
    assert parse_preflight(document) == written == PreflightReport.model_validate(status)
