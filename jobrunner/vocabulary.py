"""The draft vocabulary, counted where the tokens pass: how often each trainable token (loss mask 1)
of the train split occurs, and the maps an EAGLE-3 drafter predicts over a reduced vocabulary with.

The merge counts; `write` puts into CORPUS/vocab/:
- `token_freq.json`: {"split": "train", "tokens": T, "counts": {"<id>": n, ...}}, ids ascending;
- `token_freq.pt`: the same counts as speculators' `save_token_frequency_distribution` writes them
  (torch.save of {id: n}; speculators 0.9.0 speculators/train/vocab_mapping.py), where torch is
  installed;
- for a draft vocabulary smaller than the target's, `d2t-N.npy` and `t2d-N.npy`, the files
  speculators' trainer loads from its data path for `--draft-vocab-size N` (np.load;
  speculators/train/cli.py `parse_vocab_mappings`), and `vocab_mapping-N.pt`, {"d2t", "t2d"} as
  SpecForge's draft model loads it (`load_vocab_mapping`, specforge 0.2.0
  specforge/modeling/draft/base.py; the file `model.vocab_mapping_path` names).

The maps follow speculators' rule (`build_vocab_mappings_from_distribution`): the N most frequent
tokens, ties broken by the lower id; with fewer distinct tokens than N, the lowest unused ids fill
the rest; ascending; `d2t[i]` is target id - i (an offset), `t2d` a mask over the target's ids.
SpecForge's builder (`process_token_dict_to_mappings`, specforge/data/preprocessing.py) breaks ties in
the order tokens were first counted and fills from an unordered set, so the two agree except among
tokens of equal count at the boundary (tests/trainers/test_vocabulary.py holds both to this).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from jobrunner.atomic import write_bytes_atomically

FOLDER = "vocab"
COUNTS_FILE = "token_freq.json"


def draft_tokens(counts: dict[int, int], draft_size: int) -> list[int]:
    """The target ids of the draft vocabulary, ascending."""
    chosen = sorted(counts, key=lambda t: (-counts[t], t))[:draft_size]
    taken = set(chosen)
    chosen += [t for t in range(draft_size) if t not in taken][:draft_size - len(chosen)]
    return sorted(chosen)


def maps(counts: dict[int, int], draft_size: int, target_size: int):
    """(d2t, t2d) as numpy arrays: int64 offsets of the draft ids, bool mask of the target ids."""
    import numpy as np

    chosen = np.array(draft_tokens(counts, draft_size), dtype=np.int64)
    t2d = np.zeros(target_size, dtype=bool)
    t2d[chosen] = True
    return chosen - np.arange(draft_size, dtype=np.int64), t2d


def write(corpus_dir: str | Path, counts: Counter, draft_size: int, target_size: int | None) -> dict:
    """The vocabulary files under CORPUS/vocab/; returns the manifest's `vocabulary` entry (the files
    with their sha256, and why a file is missing where one is)."""
    from jobrunner import corpus

    folder = Path(corpus_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():  # a rerun with another draft size leaves no map of the last one
        stale.unlink()
    ordered = {str(t): counts[t] for t in sorted(counts)}
    write_bytes_atomically(folder / COUNTS_FILE, json.dumps(
        {"split": "train", "tokens": sum(counts.values()), "counts": ordered}, separators=(",", ":")).encode())
    entry: dict = {"split": "train", "tokens": sum(counts.values()), "distinct": len(counts),
                   "draft_vocab_size": draft_size, "target_vocab_size": target_size}
    try:
        import torch
    except ImportError:
        torch = None
        entry["note"] = "torch is not installed here: no .pt files (the counts are in token_freq.json)"
    if torch is not None:
        torch.save({int(t): int(n) for t, n in counts.items()}, folder / "token_freq.pt")
    if target_size is None:
        entry.setdefault("note", "no target vocabulary size (merge --model): no d2t/t2d maps")
    elif draft_size and draft_size < target_size:
        import numpy as np

        d2t, t2d = maps(counts, draft_size, target_size)
        np.save(folder / f"d2t-{draft_size}.npy", d2t)
        np.save(folder / f"t2d-{draft_size}.npy", t2d)
        if torch is not None:
            torch.save({"d2t": torch.from_numpy(d2t), "t2d": torch.from_numpy(t2d)},
                       folder / f"vocab_mapping-{draft_size}.pt")
        entry["draft_coverage"] = round(sum(counts.get(int(t), 0) for t in (d2t + np.arange(draft_size)))
                                        / max(1, sum(counts.values())), 6)
    entry["files"] = [{"name": f"{FOLDER}/{p.name}", "bytes": p.stat().st_size, "sha256": corpus.sha256_file(p)}
                      for p in sorted(folder.iterdir())]
    return entry
