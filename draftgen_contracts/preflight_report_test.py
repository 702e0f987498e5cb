from draftgen_contracts.preflight_report import parse_preflight


def test_findings_parse_from_the_writers_json_and_bad_ones_are_none():
    found = parse_preflight('{"model": {"hidden_size": 64, "text_config_key": null}, "problem": '
                            '{"where": "f.jsonl: row 3: messages", "message": "boom"}, "datasets": [{"name": "a"}]}')
    assert found.model.hidden_size == 64 and found.problem.says() == "f.jsonl: row 3: messages: boom"
    assert parse_preflight("{not json") is None and parse_preflight('{"datasets": 3}') is None and parse_preflight(None) is None
