"""Prompt datasets: streamed JSONL, JSON array and Parquet rows in the common chat shapes, from one
file or a set of them (jobrunner.shared.dataset_files: folders, globs, shard sets, read in name order).

Row shapes, recognised per row (docs/inputs.md):

- OpenAI `messages` (roles system/developer/user/assistant/tool, assistant `tool_calls`, `tools`
  beside them), optionally as a JSON string;
- ShareGPT `conversations` with `from`/`value` (human/gpt/system/tool and their usual aliases); a
  list of turns may mix `role`/`content` and `from`/`value`, told apart per turn;
- a plain `prompt` with an optional `system`;
- an OpenAI batch request (`custom_id`, `url`, `body`: jobrunner.shared.openai_batch);
- a Glaive function-calling row (`system`, `chat`: jobrunner.shared.glaive);
- pre-tokenized `input_ids`, used exactly as they are.

A dataset's `fields` name the columns that hold the prompt, the system prompt, the messages, the
tools and the row's own id when they have other names.

A dataset of existing traces (kind `traces`) holds the responses too: token ids with the response
span (`input_ids` with `prompt_len` or a `loss_mask`, or `prompt_ids` and `output_ids`), or messages
whose last turn is the assistant's (`Trace`, parse_trace).

A multi-turn row regenerates its final assistant turn: everything after the last user or tool turn
is dropped, so the prompt ends where the model must answer. Rows carry their source row index (the
line number in JSONL, the position in a JSON array or in Parquet, counted on across the files of a
set), which is what makes sample ids stable for resume and what sharding uses: replica k of R takes
the rows whose index % R == k. A row's own id (its `fields.id` column, a batch request's
`custom_id`) is carried beside it as its `source_id`; a row whose id an earlier row has is skipped as
`duplicate_id` (every replica sees every row's id, so all agree which is first).

A malformed row is never fatal: it comes out as a `SkippedRow` with one of the reasons in
`SKIP_REASONS`, to be recorded once and counted. A file that cannot be read safely as a whole (not
Parquet, no column of a known shape, a row group too large to hold) is a `DatasetRefused` naming it.

Memory stays bounded whatever the file holds (docs/security.md#hostile-inputs): a JSONL line or an
element of a JSON array is held only up to MAX_ROW_BYTES (a longer one is skipped, read past in
chunks; an array is never parsed whole, jobrunner.shared.json_array); a Parquet row group is read
only when its metadata says it holds at most MAX_ROW_GROUP_BYTES, in batches of about BATCH_BYTES;
a row nested deeper than MAX_DEPTH is skipped before anything recurses into it. The ids seen, for
`duplicate_id`, are held as 8-byte hashes: about 70 bytes a row of a dataset with ids.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from draftgen_contracts.generate_config import DatasetFields, DatasetFormat
from jobrunner.shared.dataset_files import DatasetRefused, dataset_files, sniff_format
from jobrunner.shared.glaive import glaive_conversation, is_glaive
from jobrunner.shared.json_array import ArrayRefused, array_elements
from jobrunner.shared.openai_batch import batch_request, is_batch_request
from jobrunner.shared.row_error import RowError


SKIP_REASONS = (
    "bad_json", "invalid_utf8", "not_an_object", "unknown_shape", "unknown_role", "no_user_turn",
    "empty", "non_text_content", "bad_input_ids", "bad_response_span", "no_response", "too_large", "too_deep",
    "unconvertible", "unsupported_request", "bad_id", "duplicate_id",
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
KNOWN_COLUMNS = ("messages", "conversations", "prompt", "input_ids", "prompt_ids", "chat", "body")
FIELD_KEYS = ("prompt", "system", "messages", "tools")

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
    source_id: str | None = None  # the row's own id: its fields.id column, a batch request's custom_id
    ignored_fields: tuple[str, ...] = ()  # what the row asked for that is not honoured (a batch request's)


@dataclass(frozen=True)
class Pretokenized:
    row: int
    input_ids: list[int]
    source_id: str | None = None


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
    source_id: str | None = None


@dataclass(frozen=True)
class SkippedRow:
    row: int
    reason: str
    detail: str = ""


DatasetRow = Conversation | Pretokenized | Trace | SkippedRow


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


def _turn(m: Any) -> dict:
    """One turn, OpenAI's (`role`, `content`, `tool_calls`) or ShareGPT's (`from`, `value`), told apart
    by its keys: datasets write either under either column name."""
    if not isinstance(m, dict):
        raise RowError("unknown_shape", "a turn is not an object")
    m = _without_nones(m)
    if "role" not in m and "from" in m:
        role = SHAREGPT_ROLES.get(str(m["from"]).lower())
        if role is None:
            raise RowError("unknown_role", repr(m["from"])[:80])
        return {"role": role, "content": _text_content(m.get("value"))}
    role = OPENAI_ROLES.get(m.get("role")) or SHAREGPT_ROLES.get(str(m.get("role")).lower())
    if role is None:
        raise RowError("unknown_role", repr(m.get("role"))[:80])
    message = {**m, "role": role, "content": _text_content(m.get("content"))}
    if "tool_calls" in message:
        message["tool_calls"] = [_without_nones(c) if isinstance(c, dict) else c for c in _maybe_json(message["tool_calls"])]
    return message


def _messages(raw: Any) -> list[dict]:
    raw = _maybe_json(raw)
    if not isinstance(raw, list) or not raw:
        raise RowError("empty", "no messages")
    return [_turn(m) for m in raw]


def _tools(raw: Any) -> list[dict] | None:
    tools = _maybe_json(raw) or None
    if tools is not None and not isinstance(tools, list):
        raise RowError("unknown_shape", "tools is not a list")
    return tools


def _mapped(obj: dict, fields: DatasetFields | None) -> dict:
    """The row with the columns `fields` names under the keys the shapes know. A named prompt or
    messages column is the row's shape: the row's own `messages`, `prompt`... are not looked at."""
    if fields is None:
        return obj
    view = dict(obj)
    if fields.prompt or fields.messages:
        for key in ("messages", "conversations", "prompt", "chat", "body"):
            view.pop(key, None)
    for key in FIELD_KEYS:
        column = getattr(fields, key)
        if column is None:
            continue
        if obj.get(column) is None and key in ("prompt", "messages"):
            raise RowError("unknown_shape", f"no {column!r} in the row (fields.{key}); keys {sorted(obj)[:8]}")
        view[key] = obj.get(column)
    return view


def _converted(convert, obj: dict) -> tuple[list[dict], Any]:
    """A conversion that parses text found in the row (a glaive row's functions), held to the row's rules."""
    try:
        messages, tools = convert(obj)
    except RecursionError:
        raise RowError("too_deep", f"nested deeper than {MAX_DEPTH}") from None
    _check_values([messages, tools])
    return messages, tools


def _chat(obj: dict) -> tuple[list[dict], list[dict] | None, tuple[str, ...]]:
    """A chat row's (messages, tools, fields not honoured), whatever its shape."""
    if obj.get("messages") is not None:
        return _messages(obj["messages"]), _tools(obj.get("tools")), ()
    if obj.get("conversations") is not None:
        return _messages(obj["conversations"]), _tools(obj.get("tools")), ()
    if obj.get("prompt") is not None:
        if not isinstance(obj["prompt"], str):
            raise RowError("unknown_shape", "prompt is not a string")
        system = [{"role": "system", "content": obj["system"]}] if obj.get("system") else []
        return system + [{"role": "user", "content": obj["prompt"]}], _tools(obj.get("tools")), ()
    if is_batch_request(obj):
        messages, tools, _, ignored = batch_request(obj)
        return _messages(messages), _tools(tools), ignored
    if is_glaive(obj):
        messages, tools = _converted(glaive_conversation, obj)
        return _messages(messages), tools, ()
    raise RowError("unknown_shape", f"keys {sorted(obj)[:8]}")


def row_id(obj: Any, fields: DatasetFields | None) -> str | None:
    """The row's own id: its `fields.id` column, or a batch request's custom_id; None when it has none."""
    if not isinstance(obj, dict):
        return None
    if fields is not None and fields.id is not None:
        value, where = obj.get(fields.id), f"fields.id {fields.id!r}"
    elif is_batch_request(obj) and obj.get("custom_id") is not None:
        value, where = obj["custom_id"], "custom_id"
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise RowError("bad_id", f"{where}: {value!r}"[:120])
    return str(value)


def parse_row(row: int, obj: Any, pretokenized: bool = False, fields: DatasetFields | None = None) -> DatasetRow:
    """One source row as a Conversation, a Pretokenized prompt, or a SkippedRow with its reason."""
    try:
        if not isinstance(obj, dict):
            raise RowError("not_an_object", type(obj).__name__)
        source_id = row_id(obj, fields)
        if pretokenized or "input_ids" in obj and obj["input_ids"] is not None:
            ids = obj.get("input_ids")
            if not isinstance(ids, list) or not ids or not all(type(t) is int and t >= 0 for t in ids):
                raise RowError("bad_input_ids", "input_ids must be a non-empty list of non-negative ints")
            return Pretokenized(row, ids, source_id)
        _check_values(obj)  # what goes on to the chat template and the writer (token ids are checked above)
        messages, tools, ignored = _chat(_mapped(obj, fields))
        messages = prompt_messages(messages)
        if not any((m.get("content") or "").strip() for m in messages if m["role"] in PROMPT_ENDING_ROLES):
            raise RowError("empty", "every user/tool turn is empty")
        return Conversation(row, messages, tools, source_id, ignored)
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


def _message_trace(row: int, obj: dict, finish: str, source_id: str | None) -> Trace:
    if obj.get("prompt") is not None or is_batch_request(obj):
        raise RowError("unknown_shape", "a trace holds its response: messages, conversations or a glaive chat")
    messages, tools, _ = _chat(obj)
    if messages[-1]["role"] != "assistant" or not (messages[-1].get("content") or messages[-1].get("tool_calls")):
        raise RowError("no_response", "the last turn of a trace must be the assistant's response")
    if prompt_messages(messages[:-1]) != messages[:-1]:
        raise RowError("no_response", "the turns before the response must end with a user or tool turn")
    return Trace(row, messages=messages, tools=tools, finish_reason=finish, source_id=source_id)


def parse_trace(row: int, obj: Any, fields: DatasetFields | None = None) -> Trace | SkippedRow:
    """One row of a traces dataset: {"input_ids", "prompt_len" | "loss_mask"}, {"prompt_ids",
    "output_ids"}, or messages (OpenAI `messages`, ShareGPT `conversations`, a glaive chat) ending
    with the assistant's turn; `finish_reason` "length" marks a response cut at its limit."""
    try:
        if not isinstance(obj, dict):
            raise RowError("not_an_object", type(obj).__name__)
        finish = obj.get("finish_reason") or "stop"
        if finish not in ("stop", "length"):
            raise RowError("unknown_shape", f"finish_reason {finish!r}: expected stop or length")
        source_id = row_id(obj, fields)
        if obj.get("prompt_ids") is not None:
            return Trace(row, _ids(obj["prompt_ids"], "prompt_ids"), _ids(obj.get("output_ids"), "output_ids"),
                         finish_reason=finish, source_id=source_id)
        if obj.get("input_ids") is not None:
            ids = _ids(obj["input_ids"], "input_ids")
            start = _response_span(ids, obj)
            return Trace(row, ids[:start], ids[start:], finish_reason=finish, source_id=source_id)
        _check_values(obj)
        return _message_trace(row, _mapped(obj, fields), finish, source_id)
    except RowError as e:
        return SkippedRow(row, e.reason, e.detail)


@dataclass(frozen=True)
class _Reading:
    """Which rows this replica parses, and whether every row's id is needed (`fields.id` named)."""

    replica: int
    replicas: int
    ids: bool
    batch_rows: int | None

    def mine(self, index: int) -> bool:
        return index % self.replicas == self.replica


# (row index, the row's object or why it has none, whether it is this replica's); the next file's
# first index is what a file's reader returns. Rows of other replicas come only when they may hold an
# id (for `duplicate_id`).
Objects = Generator[tuple[int, Any, bool], None, int]


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


def _decoded(data: bytes | int) -> Any:
    """A line's (or an array element's) value, or the RowError it is skipped for."""
    if isinstance(data, int):
        return RowError("too_large", f"a row of {data} bytes (at most {MAX_ROW_BYTES})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return RowError("invalid_utf8", str(e))
    if not text.strip():
        return RowError("empty", "blank line")
    try:
        return _loads(text)
    except RowError as e:
        return e


def _text_objects(texts: Iterator[bytes | int], start: int, reading: _Reading) -> Objects:
    """Rows of JSON text (lines or array elements), decoded when this replica's or when they may
    hold an id (a cheap look for custom_id spares the other replicas' rows the JSON decoding)."""
    count = 0
    for count, data in enumerate(texts, 1):
        index, mine = start + count - 1, reading.mine(start + count - 1)
        if mine or isinstance(data, bytes) and (reading.ids or b'"custom_id"' in data):
            yield index, _decoded(data), mine
    return start + count


def _jsonl_objects(path: Path, start: int, reading: _Reading) -> Objects:
    with open(path, "rb") as f:
        return (yield from _text_objects(_lines(f, MAX_ROW_BYTES), start, reading))


def _json_array_objects(path: Path, start: int, reading: _Reading) -> Objects:
    with open(path, "rb") as f:
        try:
            return (yield from _text_objects(array_elements(f, MAX_ROW_BYTES, READ_CHUNK), start, reading))
        except ArrayRefused as e:
            raise DatasetRefused(path, f"{e}; set format: jsonl for JSON Lines") from None


def _open_parquet(path: Path, known: tuple[str, ...]):
    """The file, once its schema and row groups say it can be read in bounded memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise DatasetRefused(path, f"not a readable Parquet file ({str(e)[:200]})") from None
    if (reason := _unsafe_to_read(pf, known)) is not None:
        pf.close()
        raise DatasetRefused(path, reason)
    return pf


def _unsafe_to_read(pf, known: tuple[str, ...]) -> str | None:
    """Why a Parquet file is not read: no column of a known shape, or a row group too large to hold."""
    columns = pf.schema_arrow.names
    if not set(columns) & set(known):
        return f"its columns {columns[:12]} hold none of {list(known)}"
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


def _parquet_objects(path: Path, start: int, reading: _Reading, known: tuple[str, ...]) -> Objects:
    import pyarrow as pa

    index = start
    with _open_parquet(path, known) as pf:
        every_row = reading.replicas == 1 or reading.ids or "custom_id" in pf.schema_arrow.names
        for batch in pf.iter_batches(batch_size=reading.batch_rows or _batch_rows(pf)):
            if every_row:
                for i, obj in enumerate(batch.to_pylist()):
                    yield index + i, obj, reading.mine(index + i)
            else:  # convert only this replica's rows of the batch to Python objects
                positions = range((reading.replica - index) % reading.replicas, batch.num_rows, reading.replicas)
                mine = batch.take(pa.array(positions, type=pa.int64()))
                for i, obj in zip(positions, mine.to_pylist()):
                    yield index + i, obj, True
            index += batch.num_rows
    return index


def _objects(files: list[Path], fmt: DatasetFormat, reading: _Reading, known: tuple[str, ...]) -> Objects:
    """The rows of every file in turn, each file's indexes counting on from the files before it."""
    start = 0
    for path in files:
        kind = sniff_format(path, fmt)
        if kind == "parquet":
            start = yield from _parquet_objects(path, start, reading, known)
        elif kind == "json":
            start = yield from _json_array_objects(path, start, reading)
        else:
            start = yield from _jsonl_objects(path, start, reading)
    return start


class _SeenIds:
    """The source ids seen so far, as 8-byte hashes (a set of ids of any length would not be bounded)."""

    def __init__(self) -> None:
        self._hashes: set[int] = set()

    def first(self, source_id: str) -> bool:
        """Whether no earlier row had this id (it is then taken)."""
        digest = hashlib.blake2b(source_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = int.from_bytes(digest, "little")
        if h in self._hashes:
            return False
        self._hashes.add(h)
        return True


def _repeated_id(obj: Any, fields: DatasetFields | None, seen: _SeenIds) -> str | None:
    """The row's id when an earlier row had it: the first row with an id takes it, whatever becomes
    of that row, so every replica and every resume agree."""
    try:
        source_id = None if isinstance(obj, RowError) else row_id(obj, fields)
    except RowError:
        return None
    return source_id if source_id is not None and not seen.first(source_id) else None


def _known_columns(fields: DatasetFields | None) -> tuple[str, ...]:
    named = [c for c in (fields.model_dump().values() if fields else ()) if c is not None]
    return (*KNOWN_COLUMNS, *named)


def read_rows(
    path: str | os.PathLike,
    fmt: DatasetFormat = "auto",
    *,
    pretokenized: bool = False,
    traces: bool = False,
    replica: int = 0,
    replicas: int = 1,
    batch_rows: int | None = None,
    fields: DatasetFields | None = None,
) -> Iterator[DatasetRow]:
    """Stream this replica's share of a dataset (a file, a folder or a glob: jobrunner.shared.dataset_files),
    in row order, as parsed or skipped rows (Trace rows for a dataset of existing traces);
    DatasetRefused for a file that cannot be read safely. `batch_rows`: Parquet rows per batch
    (default: about BATCH_BYTES of the file's average row)."""
    if not 0 <= replica < replicas:
        raise ValueError(f"replica {replica} is not in [0, {replicas})")
    reading = _Reading(replica, replicas, fields is not None and fields.id is not None, batch_rows)
    seen = _SeenIds()
    for index, obj, mine in _objects(dataset_files(path), fmt, reading, _known_columns(fields)):
        repeated = _repeated_id(obj, fields, seen)
        if not mine:
            continue
        if isinstance(obj, RowError):
            yield SkippedRow(index, obj.reason, obj.detail)
        elif repeated is not None:
            yield SkippedRow(index, "duplicate_id", f"id {repeated!r} is an earlier row's"[:200])
        else:
            yield parse_trace(index, obj, fields) if traces else parse_row(index, obj, pretokenized, fields)
