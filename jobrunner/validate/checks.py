"""What each check finds wrong with one sample, a shard or the index (pure), and the table of the checks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from jobrunner.shared import corpus
from jobrunner.hidden_states import selection

SHOWN_PROBLEMS = 20


@dataclass
class Check:
    name: str
    checked: int = 0
    problems: list[str] = field(default_factory=list)

    def count(self, problem: str | None) -> None:
        self.checked += 1
        if problem:
            self.problems.append(problem)


def mask_problem(record: dict) -> str | None:
    """What is wrong with a corpus sample's loss mask; None when it covers exactly the generated tokens."""
    ids, mask, prompt = record["input_ids"], record["loss_mask"], record["prompt_len"]
    if len(ids) != len(mask):
        return f"{len(ids)} ids but a loss mask of {len(mask)}"
    if mask != corpus.loss_mask(prompt, len(ids) - prompt):
        wrong = next(i for i, (m, w) in enumerate(zip(mask, corpus.loss_mask(prompt, len(ids) - prompt))) if m != w)
        return (f"loss mask {mask[wrong]} at position {wrong}: it must be 0 on the {prompt} prompt tokens "
                f"and 1 on the {len(ids) - prompt} generated ones")
    return None


def stored_problem(record: dict, stored: dict, run: dict) -> str | None:
    """What a stored sample gets wrong against its corpus sample and the run's settings; None if nothing."""
    action, length = selection.length_action(len(record["input_ids"]), record["prompt_len"], run.get("max_len"),
                                        run.get("too_long", "truncate"))
    if action == "skip":
        return f"stored, but extraction skips it ({length})"
    ids, mask = stored["input_ids"].tolist(), stored["loss_mask"].tolist()
    if len(ids) != length:
        return f"{len(ids)} tokens stored, the corpus sample has {length} to store"
    if ids != record["input_ids"][:length]:
        at = next(i for i, (a, b) in enumerate(zip(ids, record["input_ids"])) if a != b)
        return f"token id {ids[at]} at position {at}, the corpus has {record['input_ids'][at]}"
    if mask != record["loss_mask"][:length]:
        return "the loss mask differs from the corpus's"
    aux, final = stored["aux_hidden_states"], stored["final_hidden_state"]
    want_aux = (length, len(run["aux_layers"]), run["hidden_size"])
    if tuple(aux.shape) != want_aux or tuple(final.shape) != (length, run["hidden_size"]):
        return f"states of shape {tuple(aux.shape)} and {tuple(final.shape)}, expected {want_aux} and " \
               f"{(length, run['hidden_size'])}"
    return None


def finite_problem(stored: dict) -> str | None:
    import torch

    for name in ("aux_hidden_states", "final_hidden_state"):
        bad = ~torch.isfinite(stored[name].float())
        if bad.any():
            return f"{int(bad.sum())} non-finite values in {name} (first at token {int(bad.nonzero()[0][0])})"
    return None


def once_problems(shard_samples: dict[str, list[str]], index: dict, corpus_ids: set[str]) -> list[str]:
    """Samples in no shard or in two, samples the index and the shards disagree on, and corpus samples
    neither stored nor counted as skipped."""
    seen = Counter(sid for ids in shard_samples.values() for sid in ids)
    problems = [f"{sid}: in {n} shards" for sid, n in sorted(seen.items()) if n > 1]
    problems += [f"{sid}: in index.json but in no shard" for sid in sorted(set(index["samples"]) - set(seen))]
    problems += [f"{sid}: in a shard but not in index.json" for sid in sorted(set(seen) - set(index["samples"]))]
    problems += [f"{sid}: stored but not in the corpus" for sid in sorted(set(seen) - corpus_ids)]
    missing = len(corpus_ids - set(seen))
    skipped = sum(index.get("skipped", {}).values())
    if missing != skipped:
        problems.append(f"{missing} corpus samples not stored, but index.json counts {skipped} skipped")
    return problems


def table(checks: list[Check]) -> list[str]:
    width = max(len(c.name) for c in checks)
    lines = [f"{'check':<{width}}  {'checked':>8}  {'problems':>8}"]
    lines += [f"{c.name:<{width}}  {c.checked:>8}  {len(c.problems):>8}" for c in checks]
    shown = [p for c in checks for p in c.problems][:SHOWN_PROBLEMS]
    total = sum(len(c.problems) for c in checks)
    lines += [f"  {p}" for p in shown] + ([f"  ... and {total - len(shown)} more"] if total > len(shown) else [])
    return lines
