"""Fixtures for the corpus tests: generation output written by the real part writer."""

from __future__ import annotations

import pytest

from draftgen_contracts.generation_record import GenerationRecord
from draftgen_dev import builders
from jobrunner.shared import output


def generation_record(dataset: str, row: int, prompt: list[int], response: list[int], finish: str = "stop") -> dict:
    """A record's JSON object, as the merge reads it from a part file (its tests break some on purpose)."""
    return builders.generation_record(dataset, row, prompt, response, finish).to_json()


def write_generation(root, records_by_part: dict[tuple[str, int], list[dict]]) -> None:
    """Write records as generation replicas would: {(dataset, replica): [record, ...]}."""
    for (dataset, replica), records in records_by_part.items():
        w = output.PartWriter(root, dataset, replica)
        for rec in records:
            w.append_record(GenerationRecord.from_json(rec))
        w.close()


def synthetic_generation(root, datasets=("code", "math"), rows=60, replicas=2, seed=0) -> dict[str, list[dict]]:
    """Deterministic varied output: lengths 1..40, every 7th row truncated (every 14th cut at the budget);
    returns records by dataset."""
    import random

    rnd = random.Random(seed)
    by_part: dict[tuple[str, int], list[dict]] = {}
    by_dataset: dict[str, list[dict]] = {}
    for d in datasets:
        for row in range(rows):
            prompt = [rnd.randrange(1, 1000) for _ in range(rnd.randint(1, 30))]
            response = [rnd.randrange(1, 1000) for _ in range(rnd.randint(1, 40))]
            rec = generation_record(d, row, prompt, response, "length" if row % 7 == 3 else "stop")
            if row % 14 == 3:  # half the length-finished ones: cut at the budget (atBudget: cut)
                rec.update(cut_at_budget=True, cut={"generated": len(response), "estimated": len(response)})
            by_part.setdefault((d, row % replicas), []).append(rec)
            by_dataset.setdefault(d, []).append(rec)
    write_generation(root, by_part)
    return by_dataset


def merged_corpus(root, rows: int, eval_fraction: float = 0.2, shard_records: int = 25):
    """synthetic_generation's output under `root`, merged into `root`/corpus (returned)."""
    from jobrunner.merge.run import merge_corpus
    from jobrunner.merge.settings import MergeSettings

    synthetic_generation(root, rows=rows)
    merge_corpus(root, root / "corpus", MergeSettings(eval_fraction=eval_fraction, shard_records=shard_records),
                log=lambda *_: None)
    return root / "corpus"


@pytest.fixture
def gen_root(tmp_path):
    root = tmp_path / "out"
    synthetic_generation(root)
    return root
