"""OpenAI batch request rows: the body's messages and tools, custom_id as the source id, what else the
body asks for counted as not honoured, other endpoints skipped."""

from jobrunner.shared.datasets import Conversation, parse_row

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def request(body: dict, **row) -> dict:
    return {"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions", "body": body, **row}


def test_a_chat_completions_request_is_its_messages_with_custom_id_as_the_source_id():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "developer", "content": "Be brief."},
                                                 {"role": "user", "content": "Weather in Oslo?"}],
            "tools": TOOLS, "temperature": 0.2, "max_tokens": 256, "seed": 7, "n": 1, "stream": None}
    row = parse_row(3, request(body))
    assert isinstance(row, Conversation) and row.source_id == "request-1" and row.tools == TOOLS
    assert row.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}]
    # Sampling is the dataset's: what the body asks beyond its conversation is named, not honoured.
    assert row.ignored_fields == ("body.max_tokens", "body.model", "body.n", "body.seed", "body.temperature")


def test_a_request_ending_with_the_assistant_regenerates_that_turn():
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    row = parse_row(0, request(body))
    assert row.messages == [{"role": "user", "content": "hi"}] and row.ignored_fields == ()


def test_other_endpoints_are_skipped_with_their_reason():
    for url in ("/v1/completions", "/v1/embeddings", "/v1/responses"):
        skipped = parse_row(0, request({"model": "m", "input": "x"}, url=url))
        assert skipped.reason == "unsupported_request" and url in skipped.detail
    assert parse_row(0, request({"messages": [{"role": "user", "content": "x"}]}, method="GET")).reason == \
        "unsupported_request"
    assert parse_row(0, request({"messages": [{"role": "user", "content": "x"}]}, custom_id=["a"])).reason == "bad_id"
    assert parse_row(0, request({"model": "m"})).reason == "empty"
