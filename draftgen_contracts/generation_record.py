"""The generation record, the product's output: one kept response, as `jobrunner generate` writes it
(one JSON line of `<output root>/generate/<dataset>/part-rNNN.jsonl`) and the writer's totals, the
merge and the tests read it; and the skip entry, one source row left out (`part-rNNN.skipped.jsonl`).

Built once (in generate), checked once when written (`problem`), read as attributes. The JSON line
keeps the field names it always had (docs/contracts.md#generation-output), so output written before
this type exists reads as it did. Plain frozen dataclasses: a record's ids are thousands of ints, and
nothing here walks them (the writer checks one length per record, no per-token validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .names import sample_id

FINISH_REASONS = ("stop", "length")  # a kept response ended by its end token or its max_new_tokens (or a cut)


@dataclass(frozen=True, slots=True)
class Timings:
    queued_s: float  # waiting for a slot of its class before it was sent
    e2e_s: float  # sent to answered
    finished_at: float  # Unix time of the answer

    def to_json(self) -> dict[str, float]:
        return {"queued_s": self.queued_s, "e2e_s": self.e2e_s, "finished_at": self.finished_at}


@dataclass(frozen=True, slots=True)
class CutAtBudget:
    """A response cut at the budget (docs/budgets.md): `generated` tokens the server had made when it
    was stopped, `estimated` what the decode clock said it had made when the cut was decided (None: the
    server stopped it, or it ended, before any cut)."""

    generated: int
    estimated: int | None = None


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    sample_id: str  # "<dataset>/<row, 9 digits>": unique over the run
    dataset: str
    row: int  # the row's index in its dataset's source
    input_ids: list[int]  # the prompt, as sent (the chat template applied)
    output_ids: list[int]  # the response, the server's own ids
    finish_reason: str  # one of FINISH_REASONS
    prompt_tokens: int
    completion_tokens: int  # len(output_ids)
    prompt_class: str | None
    sampling_params: dict[str, Any]
    rid: str  # the request id the server answered under
    timings: Timings | None = None  # None: an existing trace, not generated here
    trace: bool = False  # an existing response joined as it is (datasets[].kind: traces)
    source_id: str | None = None  # the row's own id in its source, where it has one
    cut: CutAtBudget | None = None

    @property
    def cut_at_budget(self) -> bool:
        return self.cut is not None

    def problem(self) -> str | None:
        """What makes it no record (the writer refuses it), else None."""
        if self.completion_tokens != len(self.output_ids):
            return f"completion_tokens ({self.completion_tokens}) != len(output_ids) ({len(self.output_ids)})"
        if self.finish_reason not in FINISH_REASONS:
            return f"finish_reason {self.finish_reason!r}: a kept response ends by {' or '.join(FINISH_REASONS)}"
        if self.sample_id != sample_id(self.dataset, self.row):
            return f"sample_id {self.sample_id!r} is not {sample_id(self.dataset, self.row)!r}"
        return None

    def to_json(self) -> dict[str, Any]:
        """The record's JSON object, with the field names of the part files."""
        out: dict[str, Any] = {
            "sample_id": self.sample_id, "dataset": self.dataset, "row": self.row, "input_ids": self.input_ids,
            "output_ids": self.output_ids, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "prompt_class": self.prompt_class,
            "sampling_params": self.sampling_params, "rid": self.rid}
        if self.timings is not None:
            out["timings"] = self.timings.to_json()
        if self.trace:
            out["source"] = "trace"
        if self.source_id is not None:
            out["source_id"] = self.source_id
        if self.cut is not None:
            out["cut_at_budget"] = True
            out["cut"] = {"generated": self.cut.generated, "estimated": self.cut.estimated}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GenerationRecord:
        """A record read back; KeyError or TypeError when a field it must have is missing or wrong."""
        timings, cut = data.get("timings"), data.get("cut") if data.get("cut_at_budget") is True else None
        return cls(
            sample_id=data["sample_id"], dataset=data["dataset"], row=int(data["row"]), input_ids=data["input_ids"],
            output_ids=data["output_ids"], finish_reason=data["finish_reason"],
            prompt_tokens=int(data["prompt_tokens"]), completion_tokens=int(data["completion_tokens"]),
            prompt_class=data.get("prompt_class"), sampling_params=data.get("sampling_params") or {},
            rid=data.get("rid", ""),
            timings=Timings(float(timings.get("queued_s") or 0.0), float(timings.get("e2e_s") or 0.0),
                            float(timings["finished_at"])) if isinstance(timings, dict) and "finished_at" in timings else None,
            trace=data.get("source") == "trace",
            source_id=data["source_id"] if isinstance(data.get("source_id"), str) else None,
            cut=CutAtBudget(int((cut or {}).get("generated", data["completion_tokens"])), (cut or {}).get("estimated"))
            if data.get("cut_at_budget") is True else None)


@dataclass(frozen=True, slots=True)
class SkipEntry:
    """A source row left out, with why (a reason code counted in the summaries, and its detail)."""

    sample_id: str
    row: int
    reason: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"sample_id": self.sample_id, "row": self.row, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SkipEntry:
        return cls(data["sample_id"], int(data["row"]), data["reason"], data.get("detail", ""))
