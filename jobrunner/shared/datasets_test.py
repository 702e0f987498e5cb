"""Dataset parsing: every supported shape, the final-turn rule, malformed rows, sharding, Parquet."""

import json

import pytest

import pyarrow as pa
import pyarrow.parquet as pq

from jobrunner.shared.datasets import Conversation, Pretokenized, SkippedRow, parse_row, read_rows

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_openai_messages_drop_the_final_assistant_turn_and_keep_tools():
    row = {
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
        ],
    }
    parsed = parse_row(7, row)
    assert isinstance(parsed, Conversation) and parsed.row == 7 and parsed.tools == TOOLS
    assert [m["role"] for m in parsed.messages] == ["system", "user", "assistant", "tool"]
    assert parsed.messages[2]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_sharegpt_roles_are_mapped():
    row = {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "hi"},
                             {"from": "gpt", "value": "hello"}, {"from": "human", "value": "more"},
                             {"from": "gpt", "value": "sure"}]}
    parsed = parse_row(0, row)
    assert [(m["role"], m["content"]) for m in parsed.messages] == [
        ("system", "s"), ("user", "hi"), ("assistant", "hello"), ("user", "more")]


def test_plain_prompt_with_system_and_text_parts():
    assert parse_row(0, {"prompt": "p", "system": "s"}).messages == [
        {"role": "system", "content": "s"}, {"role": "user", "content": "p"}]
    parts = parse_row(0, {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})
    assert parts.messages[0]["content"] == "ab"


def test_pretokenized_rows_are_used_as_they_are():
    assert parse_row(3, {"input_ids": [5, 6, 7]}) == Pretokenized(3, [5, 6, 7])
    assert parse_row(3, {"input_ids": [5, "6"]}).reason == "bad_input_ids"
    assert parse_row(3, {"prompt": "x"}, pretokenized=True).reason == "bad_input_ids"


def test_malformed_rows_are_skipped_with_their_reason():
    cases = {
        "not_an_object": [1, 2],
        "unknown_shape": {"text": "x"},
        "unknown_role": {"messages": [{"role": "narrator", "content": "x"}]},
        "no_user_turn": {"messages": [{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}]},
        "empty": {"messages": [{"role": "user", "content": "  "}]},
        "invalid_utf8": {"prompt": "bad \ud800 surrogate"},
        "non_text_content": {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}]},
    }
    for reason, obj in cases.items():
        parsed = parse_row(0, obj)
        assert isinstance(parsed, SkippedRow) and parsed.reason == reason, (reason, parsed)


def test_jsonl_stream_counts_bad_lines_and_keeps_row_indices(tmp_path):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps({"prompt": "a"}).encode(), b"{not json", b"\xff\xfe bad utf8", b"",
             json.dumps({"prompt": "b"}).encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows = list(read_rows(path))
    assert [(r.row, getattr(r, "reason", "ok")) for r in rows] == [
        (0, "ok"), (1, "bad_json"), (2, "invalid_utf8"), (3, "empty"), (4, "ok")]


def test_sharding_partitions_rows_by_index(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": str(i)}) + "\n" for i in range(10)))
    shards = [[r.row for r in read_rows(path, replica=k, replicas=3)] for k in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_parquet_is_streamed_by_batch_with_global_row_indices(tmp_path):
    path = tmp_path / "d.parquet"
    table = pa.table({
        "messages": [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a"}] for i in range(10)],
        "tools": [json.dumps(TOOLS) if i % 2 else None for i in range(10)],
    })
    pq.write_table(table, path, row_group_size=3)
    rows = list(read_rows(path, replica=1, replicas=2, batch_rows=3))
    assert [r.row for r in rows] == [1, 3, 5, 7, 9]
    assert rows[2].messages == [{"role": "user", "content": "q5"}] and rows[2].tools == TOOLS
    assert [r.row for r in read_rows(path, batch_rows=4)] == list(range(10))


def test_trace_rows_of_every_shape_and_their_faults():
    from jobrunner.shared.datasets import Trace, parse_trace

    assert parse_trace(0, {"input_ids": [5, 6, 7, 8], "prompt_len": 2}) == Trace(0, [5, 6], [7, 8])
    assert parse_trace(1, {"input_ids": [5, 6, 7], "loss_mask": [0, 1, 1]}) == Trace(1, [5], [6, 7])
    assert parse_trace(2, {"prompt_ids": [5], "output_ids": [9, 2], "finish_reason": "length"}) == Trace(
        2, [5], [9, 2], finish_reason="length")
    chat = parse_trace(3, {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    assert chat.messages[-1] == {"role": "assistant", "content": "hello"} and chat.prompt_ids is None
    faults = {
        "bad_response_span": {"input_ids": [5, 6, 7], "loss_mask": [0, 1, 0]},
        "no_response": {"messages": [{"role": "user", "content": "hi"}]},
        "bad_input_ids": {"prompt_ids": [5], "output_ids": []},
        "unknown_shape": {"input_ids": [5, 6], "prompt_len": 1, "finish_reason": "abort"},
    }
    for reason, row in faults.items():
        assert parse_trace(9, row).reason == reason, row
    assert parse_trace(9, {"input_ids": [5, 6, 7], "prompt_len": 3}).reason == "bad_response_span"


def test_hostile_jsonl_rows_are_skipped_with_their_reason_and_the_rows_after_them_still_read(tmp_path, monkeypatch):
    import jobrunner.shared.datasets as datasets

    monkeypatch.setattr(datasets, "READ_CHUNK", 7)  # a long line is read past in many chunks
    at_limit = json.dumps({"prompt": "x" * 86}).encode()
    assert len(at_limit) == 100
    lines = [json.dumps({"prompt": "x" * 5000}).encode(), at_limit, b"[" * 100_000 + b"]" * 100_000,
             json.dumps({"prompt": "deep", "meta": json.loads("[" * 65 + "]" * 65)}).encode(),
             json.dumps({"prompt": "\ud800"}).encode(), b"\xc3\x28", json.dumps({"prompt": "ok"}).encode()]
    path = tmp_path / "d.jsonl"
    monkeypatch.setattr(datasets, "MAX_ROW_BYTES", 300_000)  # the deep line is long too: only the depth counts
    path.write_bytes(b"\n".join(lines))  # no newline at the end
    rows = [(r.row, getattr(r, "reason", "ok")) for r in read_rows(path)]
    assert rows == [(0, "ok"), (1, "ok"), (2, "too_deep"), (3, "too_deep"), (4, "invalid_utf8"), (5, "invalid_utf8"),
                    (6, "ok")]
    # Depth 64 is a row; 65 is not (a dict's keys count as one level below it, as its values do).
    assert isinstance(parse_row(0, {"prompt": "p", "meta": json.loads("[" * 63 + "]" * 63)}), Conversation)
    # A nested JSON string is held to the same rules.
    assert parse_row(0, {"messages": "[" * 100_000 + "]" * 100_000}).reason == "too_deep"
    assert parse_row(0, {"messages": json.dumps([{"role": "user", "content": "\ud800"}])}).reason == "invalid_utf8"
    monkeypatch.setattr(datasets, "MAX_ROW_BYTES", 100)
    rows = [(r.row, getattr(r, "reason", "ok")) for r in read_rows(path)]
    assert rows[:2] == [(0, "too_large"), (1, "ok")] and rows[2] == (2, "too_large") and rows[-1] == (6, "ok")


def test_a_parquet_row_of_too_much_text_is_skipped(tmp_path, monkeypatch):
    import jobrunner.shared.datasets as datasets

    monkeypatch.setattr(datasets, "MAX_ROW_BYTES", 1000)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b" * 2000, "c"]}), path)
    assert [(r.row, getattr(r, "reason", "ok")) for r in read_rows(path)] == [(0, "ok"), (1, "too_large"), (2, "ok")]


def test_parquet_files_that_cannot_be_read_safely_are_refused_naming_the_file(tmp_path, monkeypatch):
    import pytest

    import jobrunner.shared.datasets as datasets
    from jobrunner.shared.datasets import DatasetRefused

    not_parquet = tmp_path / "junk.parquet"
    not_parquet.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DatasetRefused, match="junk.parquet: not a readable Parquet file"):
        list(read_rows(not_parquet))
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"text": ["a"], "label": [1]}), wrong)
    with pytest.raises(DatasetRefused, match=r"wrong.parquet: its columns \['text', 'label'\] hold none of"):
        list(read_rows(wrong))
    big = tmp_path / "big.parquet"
    pq.write_table(pa.table({"prompt": [f"row {i} " + "x" * 500 for i in range(100)]}), big, row_group_size=40)
    monkeypatch.setattr(datasets, "MAX_ROW_GROUP_BYTES", 15_000)
    with pytest.raises(DatasetRefused, match="big.parquet: row group 0 holds .* bytes .*smaller row groups"):
        next(read_rows(big))


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def outcome(rows):
    return [(r.row, getattr(r, "reason", "ok")) for r in rows]


def test_a_shard_set_reads_its_files_in_name_order_with_indexes_counted_on(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"prompt": ["p0", "p1", "p2"]}), data / "train-00000-of-00003.parquet")
    (data / "train-00001-of-00003.json").write_text(json.dumps([{"prompt": "a0"}, {"prompt": "a1"}]))
    write_jsonl(data / "train-00002-of-00003.jsonl", [{"prompt": "j0"}, {"prompt": "j1"}])
    (data / "README.md").write_text("# not rows")
    rows = list(read_rows(data))
    assert [(r.row, r.messages[0]["content"]) for r in rows] == [
        (0, "p0"), (1, "p1"), (2, "p2"), (3, "a0"), (4, "a1"), (5, "j0"), (6, "j1")]
    assert list(read_rows(f"{data}/train-*")) == rows
    shards = [[r.row for r in read_rows(data, replica=k, replicas=3, batch_rows=2)] for k in range(3)]
    assert shards == [[0, 3, 6], [1, 4], [2, 5]]


def test_a_json_array_is_streamed_with_the_jsonl_bounds(tmp_path, monkeypatch):
    import jobrunner.shared.datasets as datasets

    monkeypatch.setattr(datasets, "MAX_ROW_BYTES", 200)
    monkeypatch.setattr(datasets, "READ_CHUNK", 16)
    rows = [{"prompt": "a"}, {"prompt": "x" * 500}, {"prompt": "deep", "m": json.loads("[" * 70 + "]" * 70)}, 7,
            {"prompt": "\ud800"}, {"prompt": "b"}]
    path = tmp_path / "rows.jsonl"  # the extension lies: the first byte says a JSON array
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    assert outcome(read_rows(path)) == [(0, "ok"), (1, "too_large"), (2, "too_deep"), (3, "not_an_object"),
                                        (4, "invalid_utf8"), (5, "ok")]
    path.write_text('[{"prompt": "a"}, {"prompt": ')
    assert outcome(read_rows(path)) == [(0, "ok"), (1, "bad_json")]
    path.write_text('{"prompt": "a"}\n')
    with pytest.raises(datasets.DatasetRefused, match="rows.jsonl: not a JSON array"):
        list(read_rows(path, "json"))


def test_fields_name_the_columns_of_other_names():
    from draftgen_contracts.generate_config import DatasetFields

    fields = DatasetFields(prompt="problem", system="instruction", id="uuid")
    row = parse_row(0, {"problem": "2+2?", "instruction": "Think.", "uuid": "a-1", "messages": [{"role": "user"}]},
                    fields=fields)
    assert row.messages == [{"role": "system", "content": "Think."}, {"role": "user", "content": "2+2?"}]
    assert row.source_id == "a-1"
    assert parse_row(0, {"question": "q", "uuid": "a"}, fields=fields).reason == "unknown_shape"
    assert parse_row(0, {"problem": "q", "uuid": ["a"]}, fields=fields).reason == "bad_id"
    chats = DatasetFields(messages="dialog", tools="functions", id="n")
    turns = [{"role": "user", "content": "hi"}, {"from": "gpt", "value": "hello"}, {"role": "human", "content": "more"}]
    row = parse_row(0, {"dialog": turns, "functions": json.dumps(TOOLS), "n": 17}, fields=chats)
    assert [(m["role"], m["content"]) for m in row.messages] == [("user", "hi"), ("assistant", "hello"), ("user", "more")]
    assert row.tools == TOOLS and row.source_id == "17"
    # ShareGPT's column with role/content turns, without fields: told apart per turn.
    row = parse_row(0, {"conversations": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})
    assert row.messages == [{"role": "user", "content": "a"}]
    assert parse_row(2, {"input_ids": [1, 2], "n": 5}, fields=DatasetFields(id="n")) == Pretokenized(2, [1, 2], "5")


def test_a_repeated_id_is_skipped_the_same_way_by_every_replica(tmp_path):
    from draftgen_contracts.generate_config import DatasetFields

    ids = ["a", "b", "a", "c", "b", "d"]
    path = write_jsonl(tmp_path / "d.jsonl", [{"q": f"q{i}", "key": k} for i, k in enumerate(ids)])
    fields = DatasetFields(prompt="q", id="key")
    whole = outcome(read_rows(path, fields=fields))
    assert whole == [(0, "ok"), (1, "ok"), (2, "duplicate_id"), (3, "ok"), (4, "duplicate_id"), (5, "ok")]
    shared = sorted(r for k in range(3) for r in outcome(read_rows(path, fields=fields, replica=k, replicas=3)))
    assert shared == whole
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.table({"q": [f"q{i}" for i in range(6)], "key": ids}), parquet)
    shared = sorted(r for k in range(2) for r in outcome(read_rows(parquet, fields=fields, replica=k, replicas=2)))
    assert shared == whole
    batch = [{"custom_id": k, "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": k}]}}
             for k in ids]
    path = write_jsonl(tmp_path / "batch.jsonl", batch)
    assert sorted(r for k in range(2) for r in outcome(read_rows(path, replica=k, replicas=2))) == whole


def test_a_parquet_file_whose_columns_fields_name_is_read():
    import tempfile

    from draftgen_contracts.generate_config import DatasetFields
    from jobrunner.shared.datasets import DatasetRefused

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/math.parquet"
        pq.write_table(pa.table({"problem": ["1+1?"], "answer": ["2"]}), path)
        with pytest.raises(DatasetRefused, match="hold none of"):
            list(read_rows(path))
        assert [r.messages for r in read_rows(path, fields=DatasetFields(prompt="problem"))] == [
            [{"role": "user", "content": "1+1?"}]]
