"""Prompt datasets: streamed JSONL and Parquet rows in the common chat shapes.

Row shapes, recognised per row:

- OpenAI `messages` (roles system/developer/user/assistant/tool, assistant `tool_calls`, `tools`
  beside them), optionally as a JSON string;
- ShareGPT `conversations` with `from`/`value` (human/gpt/system/tool and their usual aliases);
- a plain `prompt` with an optional `system`;
- pre-tokenized `input_ids`, used exactly as they are.

A dataset of existing traces (kind `traces`) holds the responses too: token ids with the response
span (`input_ids` with `prompt_len` or a `loss_mask`, or `prompt_ids` and `output_ids`), or messages
whose last turn is the assistant's (`Trace`, parse_trace).

A multi-turn row regenerates its final assistant turn: everything after the last user or tool turn
is dropped, so the prompt ends where the model must answer. Rows carry their source row index (the
line number in JSONL, the position in Parquet), which is what makes sample ids stable for resume and
what sharding uses: replica k of R takes the rows whose index % R == k.

A malformed row is never fatal: it comes out as a `SkippedRow` with one of the reasons in
`SKIP_REASONS`, to be recorded once and counted. A file that cannot be read safely as a whole (not
Parquet, no column of a known shape, a row group too large to hold) is a `DatasetRefused` naming it.

Memory stays bounded whatever the file holds (docs/security.md#hostile-inputs): a JSONL line is held
only up to MAX_ROW_BYTES (a longer one is skipped, read past in chunks); a Parquet row group is read
only when its metadata says it holds at most MAX_ROW_GROUP_BYTES, in batches of about BATCH_BYTES;
a row nested deeper than MAX_DEPTH is skipped before anything recurses into it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

DatasetFormat = Literal["auto", "jsonl", "parquet"]

SKIP_REASONS = (
    "bad_json", "invalid_utf8", "not_an_object", "unknown_shape", "unknown_role", "no_user_turn",
    "empty", "non_text_content", "bad_input_ids", "bad_response_span", "no_response", "too_large", "too_deep",
)

# The longest row held: 16x the text a 256K-token context holds (about 1 MB at ~4 bytes a token).
MAX_ROW_BYTES = 16 << 20
# Chat rows nest 4-6 deep and tool schemas a few more; anything deeper is not a prompt, and Python's
# json, the chat template and the writer would each recurse into it.
MAX_DEPTH = 64
# Arrow decodes a whole row group to read any row of it (measured: one 300 MB group read in batches
# of 64 rows peaked at 380 MB); `datasets` writes groups of ~1,000 rows, pandas up to 1Mi rows.
MAX_ROW_GROUP_BYTES = 256 << 20
BATCH_BYTES = 16 << 20
READ_CHUNK = 1 << 20
# A row of these top-level columns has a shape parse_row or parse_trace knows.
KNOWN_COLUMNS = ("messages", "conversations", "prompt", "input_ids", "prompt_ids")

SHAREGPT_ROLES = {
    "human": "user", "user": "user",
    "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant", "model": "assistant",
    "bard": "assistant", "bing": "assistant", "function_call": "assistant",
    "system": "system",
    "tool": "tool", "function_response": "tool", "observation": "tool", "ipython": "tool",
}
OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
                "tool": "tool", "function": "tool"}
PROMPT_ENDING_ROLES = ("user", "tool")


@dataclass(frozen=True)
class Conversation:
    """A chat to be rendered with the model's chat template (it ends at a user or tool turn)."""

    row: int
    messages: list[dict]
    tools: list[dict] | None = None


@dataclass(frozen=True)
class Pretokenized:
    row: int
    input_ids: list[int]


@dataclass(frozen=True)
class Trace:
    """A conversation that already holds the target model's response (a dataset of kind `traces`):
    token ids with the response span, or messages whose last turn is the assistant's, rendered with
    the chat template. It goes into the corpus as it is, never to the server."""

    row: int
    prompt_ids: list[int] | None = None  # token-id traces: prompt and response as given
    response_ids: list[int] | None = None
    messages: list[dict] | None = None  # message traces: the prompt turns, then the response turn
    tools: list[dict] | None = None
    finish_reason: str = "stop"


@dataclass(frozen=True)
class SkippedRow:
    row: int
    reason: str
    detail: str = ""


DatasetRow = Conversation | Pretokenized | Trace | SkippedRow


class DatasetRefused(ValueError):
    """A dataset file refused as a whole: the file, and why (with what to change)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class RowError(ValueError):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def _check_values(value: Any) -> None:
    """Reject what nests deeper than MAX_DEPTH, text longer than MAX_ROW_BYTES (a Parquet row is
    only seen decoded), and strings that cannot be encoded (lone surrogates from `\\ud800` escapes),
    walking without recursion (the depth is what is being checked)."""
    stack, characters = [(value, 1)], 0
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            characters += len(value)
            if characters > MAX_ROW_BYTES:
                raise RowError("too_large", f"more than {MAX_ROW_BYTES} characters of text")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise RowError("invalid_utf8", str(e)) from None
        elif isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise RowError("too_deep", f"nested deeper than {MAX_DEPTH}")
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items if isinstance(v, (str, dict, list)))


def _loads(text: str | bytes) -> Any:
    """JSON text as a value; too deep for Python's json (RecursionError) is `too_deep`. The value's
    depth and strings are checked by parse_row and parse_trace, once per row."""
    try:
        return json.loads(text)
    except RecursionError:
        raise RowError("too_deep", f"nested deeper than {MAX_DEPTH}") from None
    except ValueError as e:
        raise RowError("bad_json", str(e)[:200]) from None


def _maybe_json(value: Any) -> Any:
    """Parquet datasets often store nested columns as JSON strings (checked here: the row's check
    saw them as strings)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            parsed = _loads(value)
        except RowError as e:
            if e.reason == "bad_json":
                raise RowError("bad_json", "nested JSON string does not parse") from None
            raise
        _check_values(parsed)
        return parsed
    return value


def _text_content(content: Any) -> str | None:
    """Content as text: a string, or a list of text parts joined; anything else is not for a text model."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise RowError("non_text_content", f"content part {str(part)[:80]}")
        return "".join(texts)
    raise RowError("non_text_content", f"content of type {type(content).__name__}")


def _without_nones(d: dict) -> dict:
    # Parquet structs carry every field of the schema, absent ones as None.
    return {k: v for k, v in d.items() if v is not None}


def prompt_messages(messages: list[dict]) -> list[dict]:
    """The turns that make the prompt: up to and including the last user or tool turn."""
    last = max((i for i, m in enumerate(messages) if m["role"] in PROMPT_ENDING_ROLES), default=-1)
    if not any(m["role"] == "user" for m in messages[: last + 1]):
        raise RowError("no_user_turn")
    return messages[: last + 1]


def _openai_messages(raw: Any) -> list[dict]:
    raw = _maybe_json(raw)
    if not isinstance(raw, list) or not raw:
        raise RowError("empty", "no messages")
    messages = []
    for m in raw:
        if not isinstance(m, dict):
            raise RowError("unknown_shape", "a message is not an object")
        m = _without_nones(m)
        role = OPENAI_ROLES.get(m.get("role"))
        if role is None:
            raise RowError("unknown_role", repr(m.get("role"))[:80])
        message = {**m, "role": role, "content": _text_content(m.get("content"))}
        if "tool_calls" in message:
            message["tool_calls"] = [_without_nones(c) if isinstance(c, dict) else c for c in _maybe_json(message["tool_calls"])]
        messages.append(message)
    return messages


def _sharegpt_messages(raw: Any) -> list[dict]:
    raw = _maybe_json(raw)
    if not isinstance(raw, list) or not raw:
        raise RowError("empty", "no conversation turns")
    messages = []
    for turn in raw:
        if not isinstance(turn, dict):
            raise RowError("unknown_shape", "a turn is not an object")
        role = SHAREGPT_ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise RowError("unknown_role", repr(turn.get("from"))[:80])
        messages.append({"role": role, "content": _text_content(turn.get("value"))})
    return messages


def parse_row(row: int, obj: Any, pretokenized: bool = False) -> DatasetRow:
    """One source row as a Conversation, a Pretokenized prompt, or a SkippedRow with its reason."""
    try:
        if not isinstance(obj, dict):
            raise RowError("not_an_object", type(obj).__name__)
        if pretokenized or "input_ids" in obj and obj["input_ids"] is not None:
            ids = obj.get("input_ids")
            if not isinstance(ids, list) or not ids or not all(type(t) is int and t >= 0 for t in ids):
                raise RowError("bad_input_ids", "input_ids must be a non-empty list of non-negative ints")
            return Pretokenized(row, ids)
        _check_values(obj)  # what goes on to the chat template and the writer (token ids are checked above)
        tools = _maybe_json(obj.get("tools")) or None
        if tools is not None and not isinstance(tools, list):
            raise RowError("unknown_shape", "tools is not a list")
        if obj.get("messages") is not None:
            messages = _openai_messages(obj["messages"])
        elif obj.get("conversations") is not None:
            messages = _sharegpt_messages(obj["conversations"])
        elif obj.get("prompt") is not None:
            if not isinstance(obj["prompt"], str):
                raise RowError("unknown_shape", "prompt is not a string")
            messages = ([{"role": "system", "content": obj["system"]}] if obj.get("system") else []) + [
                {"role": "user", "content": obj["prompt"]}
            ]
        else:
            raise RowError("unknown_shape", f"keys {sorted(obj)[:8]}")
        messages = prompt_messages(messages)
        if not any((m.get("content") or "").strip() for m in messages if m["role"] in PROMPT_ENDING_ROLES):
            raise RowError("empty", "every user/tool turn is empty")
        return Conversation(row, messages, tools)
    except RowError as e:
        return SkippedRow(row, e.reason, e.detail)


def _ids(value: Any, field: str) -> list[int]:
    value = _maybe_json(value)
    if not isinstance(value, list) or not value or not all(type(t) is int and t >= 0 for t in value):
        raise RowError("bad_input_ids", f"{field} must be a non-empty list of non-negative ints")
    return value


def _response_span(ids: list[int], obj: dict) -> int:
    """Where the response starts in a token-id trace: its prompt_len, or its loss mask's first 1
    (the mask must be 0s then 1s: one response, at the end)."""
    if obj.get("prompt_len") is not None:
        start = obj["prompt_len"]
        if type(start) is not int or not 0 < start < len(ids):
            raise RowError("bad_response_span", f"prompt_len {start!r} for {len(ids)} ids")
        return start
    mask = _maybe_json(obj.get("loss_mask"))
    if not isinstance(mask, list) or len(mask) != len(ids):
        raise RowError("bad_response_span", "a token-id trace needs prompt_len, or a loss_mask as long as its ids")
    start = next((i for i, m in enumerate(mask) if m), len(mask))
    if start == 0 or start == len(mask) or any(m != 1 for m in mask[start:]) or any(mask[:start]):
        raise RowError("bad_response_span", "loss_mask must be 0 on the prompt, then 1 on the response to the end")
    return start


def parse_trace(row: int, obj: Any) -> Trace | SkippedRow:
    """One row of a traces dataset: {"input_ids", "prompt_len" | "loss_mask"}, {"prompt_ids",
    "output_ids"}, or messages (OpenAI `messages` or ShareGPT `conversations`) ending with the
    assistant's turn; `finish_reason` "length" marks a response cut at its limit."""
    try:
        if not isinstance(obj, dict):
            raise RowError("not_an_object", type(obj).__name__)
        finish = obj.get("finish_reason") or "stop"
        if finish not in ("stop", "length"):
            raise RowError("unknown_shape", f"finish_reason {finish!r}: expected stop or length")
        if obj.get("prompt_ids") is not None:
            return Trace(row, _ids(obj["prompt_ids"], "prompt_ids"), _ids(obj.get("output_ids"), "output_ids"),
                         finish_reason=finish)
        if obj.get("input_ids") is not None:
            ids = _ids(obj["input_ids"], "input_ids")
            start = _response_span(ids, obj)
            return Trace(row, ids[:start], ids[start:], finish_reason=finish)
        _check_values(obj)
        tools = _maybe_json(obj.get("tools")) or None
        if obj.get("messages") is not None:
            messages = _openai_messages(obj["messages"])
        elif obj.get("conversations") is not None:
            messages = _sharegpt_messages(obj["conversations"])
        else:
            raise RowError("unknown_shape", f"keys {sorted(obj)[:8]}")
        if messages[-1]["role"] != "assistant" or not (messages[-1].get("content") or messages[-1].get("tool_calls")):
            raise RowError("no_response", "the last turn of a trace must be the assistant's response")
        if prompt_messages(messages[:-1]) != messages[:-1]:
            raise RowError("no_response", "the turns before the response must end with a user or tool turn")
        return Trace(row, messages=messages, tools=tools, finish_reason=finish)
    except RowError as e:
        return SkippedRow(row, e.reason, e.detail)


def detect_format(path: str | os.PathLike, declared: DatasetFormat = "auto") -> Literal["jsonl", "parquet"]:
    if declared != "auto":
        return declared
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise ValueError(f"{path}: cannot tell the format from the extension; set format: jsonl or parquet")


def _lines(f, limit: int) -> Iterator[bytes | int]:
    """Each line of a binary file; for a line longer than `limit`, its length instead: it is read past
    in chunks, never held whole."""
    while line := f.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n") and len(line) == limit + 1:
            yield line
            continue
        length = len(line)
        while not line.endswith(b"\n") and (line := f.readline(READ_CHUNK)):
            length += len(line)
        yield length


def _jsonl_objects(path: Path, replica: int, replicas: int) -> Iterator[tuple[int, Any]]:
    with open(path, "rb") as f:
        for index, line in enumerate(_lines(f, MAX_ROW_BYTES)):
            if index % replicas != replica:
                continue
            if isinstance(line, int):
                yield index, RowError("too_large", f"a line of {line} bytes (at most {MAX_ROW_BYTES})")
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                yield index, RowError("invalid_utf8", str(e))
                continue
            if not text.strip():
                yield index, RowError("empty", "blank line")
                continue
            try:
                yield index, _loads(text)
            except RowError as e:
                yield index, e


def _open_parquet(path: Path):
    """The file, once its schema and row groups say it can be read in bounded memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise DatasetRefused(path, f"not a readable Parquet file ({str(e)[:200]})") from None
    if (reason := _unsafe_to_read(pf)) is not None:
        pf.close()
        raise DatasetRefused(path, reason)
    return pf


def _unsafe_to_read(pf) -> str | None:
    """Why a Parquet file is not read: no column of a known shape, or a row group too large to hold."""
    columns = pf.schema_arrow.names
    if not set(columns) & set(KNOWN_COLUMNS):
        return f"its columns {columns[:12]} hold none of {list(KNOWN_COLUMNS)}"
    for group in range(pf.metadata.num_row_groups):
        size = pf.metadata.row_group(group).total_byte_size
        if size > MAX_ROW_GROUP_BYTES:
            return (f"row group {group} holds {size} bytes (at most {MAX_ROW_GROUP_BYTES} are read at once); "
                    "write it with smaller row groups (pyarrow.parquet.write_table(..., row_group_size=1000))")
    return None


def _batch_rows(pf) -> int:
    """Rows per batch: about BATCH_BYTES of the file's average row, at most 1,024."""
    meta = pf.metadata
    rows = max(meta.num_rows, 1)
    average = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) / rows
    return max(1, min(1024, int(BATCH_BYTES // max(average, 1))))


def _parquet_objects(path: Path, replica: int, replicas: int, batch_rows: int | None) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa

    index = 0
    with _open_parquet(path) as pf:
        for batch in pf.iter_batches(batch_size=batch_rows or _batch_rows(pf)):
            # Convert only this replica's rows of the batch to Python objects.
            positions = range((replica - index) % replicas, batch.num_rows, replicas)
            mine = batch if replicas == 1 else batch.take(pa.array(positions, type=pa.int64()))
            for i, obj in zip(positions, mine.to_pylist()):
                yield index + i, obj
            index += batch.num_rows


def resolves_outside(path: str | os.PathLike, roots: list[str]) -> str | None:
    """Where `path` really is (symlinks followed) when that is under none of `roots`; None when it is
    under one, or when no roots are given."""
    if not roots:
        return None
    real = Path(os.path.realpath(path))
    inside = any(real.is_relative_to(os.path.realpath(root)) for root in roots)
    return None if inside else str(real)


def read_rows(
    path: str | os.PathLike,
    fmt: DatasetFormat = "auto",
    *,
    pretokenized: bool = False,
    traces: bool = False,
    replica: int = 0,
    replicas: int = 1,
    batch_rows: int | None = None,
) -> Iterator[DatasetRow]:
    """Stream this replica's share of a dataset, in row order, as parsed or skipped rows (Trace rows
    for a dataset of existing traces); DatasetRefused for a file that cannot be read safely.
    `batch_rows`: Parquet rows per batch (default: about BATCH_BYTES of the file's average row)."""
    if not 0 <= replica < replicas:
        raise ValueError(f"replica {replica} is not in [0, {replicas})")
    path = Path(path)
    objects = (
        _parquet_objects(path, replica, replicas, batch_rows)
        if detect_format(path, fmt) == "parquet"
        else _jsonl_objects(path, replica, replicas)
    )
    for index, obj in objects:
        if isinstance(obj, RowError):
            yield SkippedRow(index, obj.reason, obj.detail)
        else:
            yield parse_trace(index, obj) if traces else parse_row(index, obj, pretokenized)
