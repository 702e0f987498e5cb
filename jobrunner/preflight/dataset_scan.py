"""One pass over a dataset with the tokenizer, as generation will read it: its files, rows, rows
skipped by reason, the request fields its rows ask for that are not honoured, usable rows, prompt
tokens, the prompt-length distribution per class, rows whose prompt leaves too little room in the
context, and whether the budget is reachable with the usable rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from pydantic import Field, computed_field

from draftgen_contracts.length_stats import LengthStats, length_stats
from draftgen_contracts.preflight_report import PRIOR_RESPONSE_FRACTION, DatasetReport
from draftgen_contracts.sglang_protocol import ids_outside_vocabulary
from draftgen_contracts.generate_config import DatasetFields
from jobrunner.shared.dataset_files import dataset_files
from jobrunner.shared.datasets import (Conversation, DatasetRefused, DatasetRow, Pretokenized, SkippedRow, Trace,
                                read_rows)
from jobrunner.shared.prompts import Prompt, PromptPreparer

from .problem import PreflightProblem


def shape_of(row: Conversation) -> str:
    """The chat-template paths a conversation takes: tools offered, tool calls and tool results in it."""
    calls = any(m.get("tool_calls") for m in row.messages)
    results = any(m.get("role") == "tool" for m in row.messages)
    parts = [p for p, present in (("tools", bool(row.tools)), ("tool calls", calls), ("tool results", results))
             if present]
    return " + ".join(parts) or "plain chat"


class DatasetFindings(DatasetReport):
    """The findings' dataset report, and for people what else the scan saw."""

    path: str
    clamped_rows: int = 0  # usable, but the context leaves less than the class's max new tokens
    classes: dict[str, LengthStats] = Field(default_factory=dict)  # prompt lengths per prompt class
    shapes: dict[str, int] = Field(default_factory=dict)  # template shape -> rows
    budget_tokens: int = 0

    @computed_field
    @property
    def budget_reachable(self) -> bool:
        return self.expected_response_tokens >= self.budget_tokens


def ids_field(row, pretokenized: bool) -> str:
    """The field of a row its token ids come from."""
    if pretokenized or isinstance(row, Pretokenized) or (isinstance(row, Trace) and row.messages is None):
        return "input_ids"
    return "messages (as the chat template renders them)"


def rows_of(path: str, fmt: str, **kwargs) -> Iterator[DatasetRow]:
    """The dataset's rows; a file refused as a whole is the run's problem."""
    try:
        yield from read_rows(path, fmt, **kwargs)
    except DatasetRefused as e:
        raise PreflightProblem(e.path, e.reason) from None


def count_files(path: str) -> int:
    try:
        return len(dataset_files(path))
    except DatasetRefused as e:
        raise PreflightProblem(e.path, e.reason) from None


def scan_dataset(name: str, path: str, preparer: PromptPreparer, budget_tokens: int, vocab_size: int, *,
                 fmt: str = "auto", pretokenized: bool = False, traces: bool = False, end_ids: frozenset = frozenset(),
                 wanted_max_new: dict[str, int] | None = None, fields: DatasetFields | None = None) -> DatasetFindings:
    """Scan every row; a PreflightProblem when the template fails on a whole shape of row (its first
    row of that shape), a prompt holds a token the model does not have, or no row is usable. A
    traces dataset's responses count as they are, and must end with this model's end tokens
    (`end_ids`) where they ended by stop: traces of another tokenizer fail here."""
    found = DatasetFindings(name=name, path=path, budget_tokens=budget_tokens, files=count_files(path))
    skipped: Counter = Counter()
    ignored: Counter = Counter()
    lengths: dict[str, Counter] = {}
    expected = 0.0
    first_of_shape: dict[str, int] = {}
    stopped = ended = 0
    for row in rows_of(path, fmt, pretokenized=pretokenized, traces=traces, fields=fields):
        found.rows += 1
        ignored.update(getattr(row, "ignored_fields", ()))
        shape = shape_of(row) if isinstance(row, Conversation) or (isinstance(row, Trace) and row.messages) else None
        if shape is not None and shape not in first_of_shape:
            first_of_shape[shape] = row.row
        prepared = preparer.prepare(row)
        if isinstance(prepared, SkippedRow):
            if prepared.reason == "template_error" and first_of_shape.get(shape) == row.row:
                raise PreflightProblem(f"{path}: row {row.row}: messages",
                                       f"the chat template fails on a conversation with {shape}: {prepared.detail}")
            if prepared.reason == "token_outside_vocabulary":  # the tokens are not this model's: not one odd row
                raise PreflightProblem(f"{path}: row {row.row}: {ids_field(row, pretokenized)}",
                                       f"token {prepared.detail}: were these traces made with another tokenizer?")
            skipped[prepared.reason] += 1
            continue
        assert isinstance(prepared, Prompt)
        ids = [*prepared.input_ids, *(prepared.response_ids or [])]
        if outside := ids_outside_vocabulary(ids, vocab_size):  # the rule the client refuses by, too
            raise PreflightProblem(f"{path}: row {row.row}: {ids_field(row, pretokenized)}",
                                   f"token id {outside[0]} is outside the model's vocabulary of {vocab_size}")
        if prepared.response_ids is not None and prepared.finish_reason == "stop":
            stopped += 1
            ended += prepared.response_ids[-1] in end_ids
        found.usable_rows += 1
        found.prompt_tokens += len(prepared.input_ids)
        if shape is not None:
            found.shapes[shape] = found.shapes.get(shape, 0) + 1
        lengths.setdefault(prepared.prompt_class, Counter())[len(prepared.input_ids)] += 1
        if wanted_max_new and prepared.max_new_tokens < wanted_max_new.get(prepared.prompt_class, 0):
            found.clamped_rows += 1
        expected += (len(prepared.response_ids) if prepared.response_ids is not None
                     else PRIOR_RESPONSE_FRACTION * prepared.max_new_tokens)
    found.skipped_by_reason = dict(sorted(skipped.items()))
    found.ignored_fields = dict(sorted(ignored.items()))
    found.expected_response_tokens = int(expected)
    found.classes = {cls: length_stats(counts) for cls, counts in sorted(lengths.items())}
    if not found.usable_rows:
        reasons = ", ".join(f"{r} {n}" for r, n in found.skipped_by_reason.items()) or "the file has no rows"
        raise PreflightProblem(path, f"no usable row in {found.rows} ({reasons})")
    if stopped and not ended and end_ids:
        raise PreflightProblem(path, f"none of its {stopped} traces ended by stop ends with one of this model's end "
                                     f"tokens {sorted(end_ids)}: were they made with another tokenizer?")
    return found
