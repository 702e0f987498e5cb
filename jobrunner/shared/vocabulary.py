"""The draft vocabulary, counted where the tokens pass: how often each trainable token (loss mask 1)
of the train split occurs, and the maps an EAGLE-3 drafter predicts over a reduced vocabulary with.

The merge counts; `write` puts into CORPUS/vocab/:
- `token_freq.json`: {"split": "train", "tokens": T, "counts": {"<id>": n, ...}}, ids ascending;
- for a draft vocabulary smaller than the target's, `d2t-N.npy` and `t2d-N.npy`, the files
  speculators' trainer loads from its data path for `--draft-vocab-size N` (np.load;
  speculators 0.9.0 speculators/train/cli.py `parse_vocab_mappings`).
The state exports, whose process has torch loaded anyway, add the torch files (`torch_files`): for
speculators `token_freq.pt`, the counts as its `save_token_frequency_distribution` writes them
(torch.save of {id: n}; speculators/train/vocab_mapping.py), beside the maps in its data path; for
SpecForge `vocab_mapping-N.pt`, {"d2t", "t2d"} as its draft model loads it (`load_vocab_mapping`,
specforge 0.2.0 specforge/modeling/draft/base.py; the file `model.vocab_mapping_path` names). The
merge itself never imports torch: that alone is 500 MB of a merge's memory.

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

from jobrunner.shared.atomic import write_bytes_atomically

FOLDER = "vocab"
COUNTS_FILE = "token_freq.json"


class TokenTally:
    """Token counts over a whole corpus at C speed: ids are appended to a buffer (array.extend of a
    list is a C loop) and counted a few million at a time with numpy's bincount. Counter.update, the
    obvious tool, took a merge of 2 GB from 3.2 to 5.2 times the time of one read."""

    FLUSH = 1 << 22  # ids buffered between two counts: 32 MB as int64
    # Ids counted: below 2**24 (no tokenizer comes near); one outside, from a malformed record the merge
    # otherwise keeps, would make the counts array as long as its value.
    LIMIT = 1 << 24

    def __init__(self):
        from array import array

        self._array = array
        self._added, self._removed = array("q"), array("q")
        self._totals = None  # numpy int64 array indexed by token id

    def add(self, ids: list[int]) -> None:
        self._added.extend(ids)
        if len(self._added) >= self.FLUSH:
            self._flush()

    def remove(self, ids: list[int]) -> None:
        self._removed.extend(ids)

    def _flush(self) -> None:
        import numpy as np

        for buffer, sign in ((self._added, 1), (self._removed, -1)):
            ids = np.frombuffer(buffer, dtype=np.int64) if buffer else None
            if ids is not None and ((ids < 0) | (ids >= self.LIMIT)).any():
                ids = ids[(ids >= 0) & (ids < self.LIMIT)]
            if ids is not None and len(ids):
                counted = np.bincount(ids) * sign
                if self._totals is None or len(self._totals) < len(counted):
                    grown = np.zeros(len(counted), dtype=np.int64)
                    if self._totals is not None:
                        grown[:len(self._totals)] = self._totals
                    self._totals = grown
                self._totals[:len(counted)] += counted
        self._added, self._removed = self._array("q"), self._array("q")

    def counts(self) -> Counter:
        """{token id: count} of the ids seen more often than removed."""
        import numpy as np

        self._flush()
        if self._totals is None:
            return Counter()
        ids = np.flatnonzero(self._totals > 0)
        return Counter(dict(zip(ids.tolist(), self._totals[ids].tolist())))


def draft_tokens(counts: dict[int, int], draft_size: int) -> list[int]:
    """The target ids of the draft vocabulary, ascending."""
    chosen = sorted(counts, key=lambda t: (-counts[t], t))[:draft_size]
    taken = set(chosen)
    chosen += [t for t in range(draft_size) if t not in taken][:draft_size - len(chosen)]
    return sorted(chosen)


def maps(counts: dict[int, int], draft_size: int, target_size: int):
    """(d2t, t2d) as numpy arrays: int64 offsets of the draft ids, bool mask of the target ids."""
    import numpy as np

    # An id the target's vocabulary does not have (a tokenizer's added token past config.json's
    # vocab_size) cannot be mapped: t2d has no place for it.
    known = {t: n for t, n in counts.items() if t < target_size}
    chosen = np.array(draft_tokens(known, draft_size), dtype=np.int64)
    t2d = np.zeros(target_size, dtype=bool)
    t2d[chosen] = True
    return chosen - np.arange(draft_size, dtype=np.int64), t2d


def write(corpus_dir: str | Path, counts: Counter, draft_size: int, target_size: int | None) -> dict:
    """The vocabulary files under CORPUS/vocab/; returns the manifest's `vocabulary` entry (the files
    with their sha256, and why the maps are missing where they are)."""
    import numpy as np

    from jobrunner.shared import corpus

    folder = Path(corpus_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():  # a rerun with another draft size leaves no map of the last one
        stale.unlink()
    ordered = {str(t): counts[t] for t in sorted(counts)}
    write_bytes_atomically(folder / COUNTS_FILE, json.dumps(
        {"split": "train", "tokens": sum(counts.values()), "counts": ordered}, separators=(",", ":")).encode())
    entry: dict = {"split": "train", "tokens": sum(counts.values()), "distinct": len(counts),
                   "draft_vocab_size": draft_size, "target_vocab_size": target_size}
    if target_size is None:
        entry["note"] = "no target vocabulary size (merge --model): no d2t/t2d maps"
    elif draft_size and draft_size < target_size:
        d2t, t2d = maps(counts, draft_size, target_size)
        np.save(folder / f"d2t-{draft_size}.npy", d2t)
        np.save(folder / f"t2d-{draft_size}.npy", t2d)
        chosen = d2t + np.arange(draft_size)
        entry["draft_coverage"] = round(sum(counts.get(int(t), 0) for t in chosen) / max(1, entry["tokens"]), 6)
    entry["files"] = [{"name": f"{FOLDER}/{p.name}", "bytes": p.stat().st_size, "sha256": corpus.sha256_file(p)}
                      for p in sorted(folder.iterdir())]
    return entry


def torch_files(corpus_dir: str | Path, kind: str, into: Path) -> list[str]:
    """The vocabulary as `kind` (an export) reads it, written into `into`: speculators the counts
    (token_freq.pt) and the .npy maps, SpecForge vocab_mapping-N.pt. Returns the names written."""
    import numpy as np
    import torch

    folder = Path(corpus_dir) / FOLDER
    written = []
    if kind == "speculators":
        counts = json.loads((folder / COUNTS_FILE).read_text())["counts"]
        torch.save({int(t): int(n) for t, n in counts.items()}, into / "token_freq.pt")
        written.append("token_freq.pt")
    for d2t_path in sorted(folder.glob("d2t-*.npy")):
        size = d2t_path.stem.removeprefix("d2t-")
        t2d_path = folder / f"t2d-{size}.npy"
        if kind == "speculators":
            for path in (d2t_path, t2d_path):
                into.joinpath(path.name).write_bytes(path.read_bytes())
                written.append(path.name)
        else:
            torch.save({"d2t": torch.from_numpy(np.load(d2t_path)), "t2d": torch.from_numpy(np.load(t2d_path))},
                       into / f"vocab_mapping-{size}.pt")
            written.append(f"vocab_mapping-{size}.pt")
    return written
