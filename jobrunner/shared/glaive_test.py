"""Glaive function-calling v2 rows as OpenAI messages and tools, with the dataset's quirks."""

import json

from jobrunner.shared.datasets import Conversation, parse_row

NEWS = {"name": "get_news_headlines", "description": "Get the latest news headlines",
        "parameters": {"type": "object", "properties": {"country": {"type": "string",
                                                                    "description": "The country for news"}},
                       "required": ["country"]}}
CONVERT = {"name": "convert_currency", "description": "Convert currency from one to another",
           "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "from": {"type": "string"},
                                                           "to": {"type": "string"}}}}


def system_with(*functions) -> str:
    # The dataset pretty-prints each function with 4 spaces and puts them one after another.
    listed = "\n".join(json.dumps(f, indent=4) for f in functions)
    return f"SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -\n{listed}"


TWO_CALLS = {
    "system": system_with(NEWS, CONVERT),
    "chat": "USER: Can you get me the latest news headlines for the United States?\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"get_news_headlines\", \"arguments\": '{\"country\": \"United States\"}'}"
            " <|endoftext|>\n\n\n"
            "FUNCTION RESPONSE: {\"headlines\": [\"Biden announces new vaccine mandates\", \"NASA's Perseverance rover "
            "collects first Mars rock sample\"]}\n\n\n"
            "ASSISTANT: Here are the latest news headlines for the United States:\n1. Biden announces new vaccine "
            "mandates\n2. NASA's Perseverance rover collects first Mars rock sample <|endoftext|>\n\n\n"
            "USER: And how much is 1000 US dollars in euros?\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"convert_currency\", \"arguments\": '{\"amount\": 1000, \"from\": "
            "\"USD\", \"to\": \"EUR\"}'} <|endoftext|>\n\n\n"
            "FUNCTION RESPONSE: {\"converted_amount\": 850.0, \"from\": \"USD\", \"to\": \"EUR\"}\n\n\n"
            "ASSISTANT: 1000 US dollars is about 850 euros. <|endoftext|>\n\n\n",
}


def test_functions_become_tools_and_the_prompt_ends_at_the_last_function_response():
    row = parse_row(4, TWO_CALLS)
    assert isinstance(row, Conversation)
    assert row.tools == [{"type": "function", "function": NEWS}, {"type": "function", "function": CONVERT}]
    assert [m["role"] for m in row.messages] == ["system", "user", "assistant", "tool", "assistant", "user",
                                                 "assistant", "tool"]
    assert row.messages[0]["content"] == ("You are a helpful assistant with access to the following functions. "
                                          "Use them if required -")
    call = row.messages[2]
    assert call["content"] is None and call["tool_calls"] == [
        {"type": "function", "function": {"name": "get_news_headlines", "arguments": {"country": "United States"}}}]
    assert row.messages[6]["tool_calls"][0]["function"]["arguments"] == {"amount": 1000, "from": "USD", "to": "EUR"}
    assert row.messages[4]["content"].endswith("collects first Mars rock sample")  # <|endoftext|> gone
    assert row.messages[-1] == {"role": "tool", "content": '{"converted_amount": 850.0, "from": "USD", "to": "EUR"}'}


def test_a_row_with_no_functions_is_plain_chat_ending_at_the_last_user_turn():
    row = parse_row(0, {
        "system": "SYSTEM: You are a helpful assistant, with no access to external functions.",
        "chat": "USER: What is the capital of France?\n\n\nASSISTANT: The capital of France is Paris. <|endoftext|>"
                "\n\n\nUSER: And of Italy?\n\n\nASSISTANT: Rome. <|endoftext|>\n\n\n"})
    assert row.tools is None and row.messages == [
        {"role": "system", "content": "You are a helpful assistant, with no access to external functions."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
        {"role": "user", "content": "And of Italy?"}]


def test_a_call_declined_in_words_and_arguments_as_an_object_or_json_string_convert_too():
    chat = ("USER: Convert 5 EUR to USD\n\n\nASSISTANT: <functioncall> {\"name\": \"convert_currency\", "
            "\"arguments\": {\"amount\": 5, \"from\": \"EUR\", \"to\": \"USD\"}} <|endoftext|>\n\n\n"
            "FUNCTION RESPONSE: {\"converted_amount\": 5.4}\n\n\nASSISTANT: 5 EUR is 5.40 USD. <|endoftext|>\n\n\n"
            "USER: Thanks! Also \"Rock'n'roll\"?\n\n\nASSISTANT: <functioncall> {\"name\": \"get_news_headlines\", "
            "\"arguments\": \"{\\\"country\\\": \\\"UK\\\"}\"} <|endoftext|>")
    row = parse_row(0, {"system": system_with(CONVERT, NEWS), "chat": chat})
    assert [m["role"] for m in row.messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert row.messages[2]["tool_calls"][0]["function"]["arguments"] == {"amount": 5, "from": "EUR", "to": "USD"}


def test_rows_that_cannot_be_converted_faithfully_are_skipped():
    broken_function = {"system": "SYSTEM: You have these functions -\n{\"name\": \"f\", \"parameters\": {", "chat": "USER: hi"}
    broken_call = {"system": system_with(NEWS), "chat": "USER: news?\n\n\nASSISTANT: <functioncall> {\"name\": "
                   "\"get_news_headlines\", \"arguments\": '{country: US}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {}"}
    preamble = {"system": "SYSTEM: hi", "chat": "Hello there\n\n\nUSER: hi"}
    for row in (broken_function, broken_call, preamble):
        skipped = parse_row(0, row)
        assert skipped.reason == "unconvertible", (row, skipped)
    assert parse_row(0, {"system": "SYSTEM: s", "chat": ""}).reason == "empty"
