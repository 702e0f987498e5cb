"""Datasets as they come, written for the tests that generate from them: a Hugging Face shard set
whose columns have other names, OpenAI batch requests and Glaive function-calling chats (a JSON
array file, as that dataset ships). Each says which of its rows are to be skipped, and why."""

from __future__ import annotations

import json
from pathlib import Path

FUNCTIONS = [
    {"name": "calculate_bmi", "description": "Calculate the Body Mass Index",
     "parameters": {"type": "object", "properties": {"weight": {"type": "number", "description": "in kilograms"},
                                                     "height": {"type": "number", "description": "in meters"}},
                    "required": ["weight", "height"]}},
    {"name": "get_stock_price", "description": "Get the current stock price",
     "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}},
]
WITH_FUNCTIONS = ("SYSTEM: You are a helpful assistant with access to the following functions. Use them if "
                  "required -\n" + "\n".join(json.dumps(f, indent=4) for f in FUNCTIONS))
NO_FUNCTIONS = "SYSTEM: You are a helpful assistant, with no access to external functions."


def shard_set(folder: Path, rows_per_file: int = 8) -> dict:
    """Three shards (Parquet, a JSON array, JSON Lines) of {problem, uuid} rows and a README; one
    uuid repeats and one row has no problem. Returns the dataset's config fields."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    rows = [{"problem": f"What is {i} times {i + 1}?", "uuid": f"q-{i:04d}"} for i in range(3 * rows_per_file)]
    rows[5]["uuid"] = rows[2]["uuid"]  # duplicate_id
    rows[rows_per_file + 1] = {"question": "no problem column", "uuid": "q-x"}  # unknown_shape
    first, second, third = (rows[k * rows_per_file:(k + 1) * rows_per_file] for k in range(3))
    pq.write_table(pa.Table.from_pylist(first), folder / "train-00000-of-00003.parquet", row_group_size=3)
    (folder / "train-00001-of-00003.json").write_text(json.dumps(second, indent=2))
    (folder / "train-00002-of-00003.jsonl").write_text("".join(json.dumps(r) + "\n" for r in third))
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# math\n")
    return {"path": str(folder), "fields": {"prompt": "problem", "id": "uuid"},
            "usable": 3 * rows_per_file - 2, "skipped": {"duplicate_id": 1, "unknown_shape": 1}}


def openai_batch(path: Path, rows: int = 12) -> dict:
    """Chat completions requests with sampling fields of their own; one embeddings request."""
    lines = [{"custom_id": f"request-{i}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "gpt-4o-mini", "temperature": 0.3, "max_tokens": 200,
                       "messages": [{"role": "system", "content": "Answer in one line."},
                                    {"role": "user", "content": f"Name a prime above {i * 10}."}]}}
             for i in range(rows)]
    lines[3] = {"custom_id": "request-3", "method": "POST", "url": "/v1/embeddings",
                "body": {"model": "text-embedding-3-small", "input": "a sentence"}}
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return {"path": str(path), "usable": rows - 1, "skipped": {"unsupported_request": 1},
            "ignored": {"body.max_tokens": rows - 1, "body.model": rows - 1, "body.temperature": rows - 1}}


def glaive(path: Path, rows: int = 12) -> dict:
    """glaive-function-calling-v2 rows (single-quoted arguments, <|endoftext|>, rows with no
    functions), as one JSON array; one row whose call does not parse."""
    def with_call(i: int) -> dict:
        return {"system": WITH_FUNCTIONS, "chat": (
            f"USER: Hi, I weigh {60 + i} kilograms and I am 1.75 meters tall. What is my BMI?\n\n\n"
            "ASSISTANT: <functioncall> {\"name\": \"calculate_bmi\", \"arguments\": "
            f"'{{\"weight\": {60 + i}, \"height\": 1.75}}'}} <|endoftext|>\n\n\n"
            f"FUNCTION RESPONSE: {{\"bmi\": {round((60 + i) / 1.75 ** 2, 2)}}}\n\n\n"
            f"ASSISTANT: Your BMI is {round((60 + i) / 1.75 ** 2, 2)}. <|endoftext|>\n\n\n")}

    def plain(i: int) -> dict:
        return {"system": NO_FUNCTIONS, "chat": f"USER: Tell me a fact about the number {i}.\n\n\n"
                                                f"ASSISTANT: {i} is a number. <|endoftext|>\n\n\n"}
    items = [with_call(i) if i % 2 else plain(i) for i in range(rows)]
    items[4] = {"system": WITH_FUNCTIONS, "chat": "USER: Price of AAPL?\n\n\nASSISTANT: <functioncall> "
                "{\"name\": \"get_stock_price\", \"arguments\": '{symbol: AAPL}'} <|endoftext|>"}
    path.write_text(json.dumps(items, indent=2))
    return {"path": str(path), "usable": rows - 1, "skipped": {"unconvertible": 1}}
