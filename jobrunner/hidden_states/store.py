"""The extracted states on disk: sharded safetensors, unpadded, atomically written, resumable.

A shard `shard-NNNNNN.safetensors` holds consecutive samples concatenated along the token axis:

    aux_hidden_states   [T, K, H]  (dtype of the run)   K = number of aux layers
    final_hidden_state  [T, H]     (post-norm or pre-norm: metadata `final_state`)
    input_ids           [T]        int64
    loss_mask           [T]        uint8
    offsets             [n + 1]    int64   sample i is rows offsets[i]:offsets[i+1]

and, when the run's dtype is fp8 (float8 e4m3, jobrunner/hidden_states/fp8.py), the scales:

    aux_hidden_states_scales   [T, K, 1]  float32
    final_hidden_state_scales  [T, 1]     float32

and, in its safetensors metadata, the sample ids and the run's settings. A shard is written to a
temp file, fsynced and renamed: it exists whole or not at all, so the shards are the record of what
is done. `index.json` (sample_id -> shard, offset, length) is derived from the shard headers: a
killed run's index may be stale, and the next run rebuilds it by reading only the headers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from draftgen_contracts import names
from draftgen_contracts.hidden_state_layout import SCALED_DTYPES
from jobrunner.shared.atomic import fsync_dir, write_json_atomically
from jobrunner.hidden_states import fp8

INDEX_NAME = "index.json"
FORMAT = "draftgen-eagle3-states"
FORMAT_VERSION = "1"
SCALES_SUFFIX = "_scales"  # fp8 states: `<tensor>_scales` beside each state tensor
# Settings that must agree between a resumed run and the shards already written.
# A resume with another backend is refused too: the backends agree bit for bit in fp32 only (docs/eagle3.md).
RUN_KEYS = ("aux_layers", "final_state", "dtype", "hidden_size", "max_len", "too_long", "backend")
RUN_DEFAULTS = {"backend": "transformers"}  # shards written before the key existed


def read_shard_header(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} shard")
    return {"run": json.loads(meta["run"]), "sample_ids": json.loads(meta["sample_ids"]),
            "offsets": json.loads(meta["offsets"])}


class ShardStore:
    def __init__(self, directory: str | os.PathLike, run: dict):
        """Open (or resume) an output directory for a run described by `run` (RUN_KEYS and more)."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.discard_unfinished()
        self.run = run
        self.samples: dict[str, dict] = {}
        self.shards: list[dict] = []
        for path in sorted(p for p in self.directory.iterdir() if names.parse_states_shard_name(p.name) is not None):
            header = read_shard_header(path)
            for key in RUN_KEYS:
                written = header["run"].get(key, RUN_DEFAULTS.get(key))
                if written != run.get(key, RUN_DEFAULTS.get(key)):
                    raise ValueError(f"{path}: written with {key}={written!r}, this run has "
                                     f"{run.get(key)!r}; use another --out or the same settings")
            self._add_shard(path.name, header["sample_ids"], header["offsets"], path.stat().st_size)
        self._next = 1 + max((names.parse_states_shard_name(s["name"]) for s in self.shards), default=-1)
        self._buffer: list[tuple[str, list[int], list[int], object]] = []
        self.buffered_tokens = 0

    def _add_shard(self, name: str, sample_ids: list[str], offsets: list[int], size: int) -> None:
        for i, sid in enumerate(sample_ids):
            self.samples[sid] = {"shard": name, "offset": offsets[i], "length": offsets[i + 1] - offsets[i]}
        self.shards.append({"name": name, "samples": len(sample_ids), "tokens": offsets[-1], "bytes": size})

    def discard_unfinished(self) -> None:
        """A shard's write that did not finish (a crash, a full volume): its samples are not done."""
        for tmp in self.directory.glob("*.tmp"):
            tmp.unlink()

    def is_done(self, sample_id: str) -> bool:
        return sample_id in self.samples

    def add(self, sample_id: str, input_ids: list[int], loss_mask: list[int], states) -> None:
        """Buffer one sample (`states`: a backend SampleStates); it is done once `flush` returns."""
        if len(input_ids) != len(loss_mask) or states.aux.shape[0] != len(input_ids) or states.final.shape[0] != len(input_ids):
            raise ValueError(f"{sample_id}: ids {len(input_ids)}, mask {len(loss_mask)}, states "
                             f"{states.aux.shape[0]}/{states.final.shape[0]} tokens: lengths must agree")
        self._buffer.append((sample_id, input_ids, loss_mask, states))
        self.buffered_tokens += len(input_ids)

    def flush(self) -> None:
        """Write the buffered samples as one shard (temp file + fsync + rename)."""
        if not self._buffer:
            return
        import torch
        from safetensors.torch import save_file

        offsets = [0]
        for _, ids, _, _ in self._buffer:
            offsets.append(offsets[-1] + len(ids))
        tensors = {
            **state_tensors(torch.cat([s.aux for *_, s in self._buffer]), torch.cat([s.final for *_, s in self._buffer]),
                            self.run.get("dtype")),
            "input_ids": torch.tensor([t for _, ids, _, _ in self._buffer for t in ids], dtype=torch.int64),
            "loss_mask": torch.tensor([m for _, _, mask, _ in self._buffer for m in mask], dtype=torch.uint8),
            "offsets": torch.tensor(offsets, dtype=torch.int64),
        }
        sample_ids = [sid for sid, *_ in self._buffer]
        metadata = {"format": FORMAT, "version": FORMAT_VERSION, "run": json.dumps(self.run, sort_keys=True),
                    "sample_ids": json.dumps(sample_ids), "offsets": json.dumps(offsets)}
        name = names.states_shard_name(self._next)
        tmp = self.directory / (name + ".tmp")
        save_file(tensors, str(tmp), metadata=metadata)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / name)
        fsync_dir(self.directory)
        self._add_shard(name, sample_ids, offsets, (self.directory / name).stat().st_size)
        self._next += 1
        self._buffer.clear()
        self.buffered_tokens = 0

    def stored_tokens(self) -> int:
        """Tokens in the shards on disk (the buffer's are not stored yet)."""
        return sum(s["tokens"] for s in self.shards)

    def write_index(self, extra: dict) -> dict:
        index = {"format": FORMAT, "version": FORMAT_VERSION, "run": self.run, **extra,
                 "tokens": self.stored_tokens(), "bytes": sum(s["bytes"] for s in self.shards),
                 "shards": sorted(self.shards, key=lambda s: s["name"]),
                 "samples": dict(sorted(self.samples.items()))}
        write_json_atomically(self.directory / INDEX_NAME, index)
        return index


def state_tensors(aux, final, dtype: str | None) -> dict:
    """The state tensors of a shard: as they are, or fp8 values with their scales."""
    if dtype not in SCALED_DTYPES:
        return {"aux_hidden_states": aux.contiguous(), "final_hidden_state": final.contiguous()}
    tensors = {}
    for name, states in (("aux_hidden_states", aux), ("final_hidden_state", final)):
        values, scales = fp8.quantize(states)
        tensors[name], tensors[name + SCALES_SUFFIX] = values.contiguous(), scales.contiguous()
    return tensors


def load_sample(directory: str | os.PathLike, sample_id: str, index: dict | None = None,
                dequantize: bool = True) -> dict:
    """One sample's tensors (reads only its rows): aux_hidden_states, final_hidden_state, input_ids,
    loss_mask. fp8 states come back in bf16 unless `dequantize` is False; then they come as stored,
    with their `*_scales`."""
    from safetensors import safe_open

    directory = Path(directory)
    index = index or json.loads((directory / INDEX_NAME).read_text())
    where = index["samples"][sample_id]
    lo, hi = where["offset"], where["offset"] + where["length"]
    with safe_open(str(directory / where["shard"]), framework="pt") as f:
        sample = {k: f.get_slice(k)[lo:hi] for k in f.keys() if k != "offsets"}
    if dequantize:
        for name in ("aux_hidden_states", "final_hidden_state"):
            if name + SCALES_SUFFIX in sample:
                sample[name] = fp8.dequantize(sample[name], sample.pop(name + SCALES_SUFFIX))
    return sample
