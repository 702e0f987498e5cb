"""`jobrunner extract`: the target model's EAGLE-3 hidden states over a merged corpus.

Order of work: read the model's config (layers, hidden size) -> check the aux layers -> compute,
print and write the size estimate (`estimate.json`) -> load the weights -> run. The corpus is read in
windows; each window's samples are sorted by length into padded batches (jobrunner/hidden_states/
selection.py); a shard is written only between batches, so a killed run has finished whole batches and
resuming (by sample id, from the shards on disk) reruns exactly the batches it had not finished,
with the same members: its tensors equal an uninterrupted run's, bit for bit.

Default final state: post-norm. It is the input of the target's lm_head, so a trainer gets the
target's logits from it with the lm_head alone (SpecForge's layout stores the same); `--final-state
pre-norm` stores layer N-1's output instead (speculators' layout applies the norm at training time).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from contextlib import contextmanager
from pathlib import Path

from draftgen_contracts import drafters as drafter_choice
from draftgen_contracts import hidden_state_layout, provenance
from draftgen_contracts.hidden_state_layout import human_bytes
from jobrunner.shared import corpus
from jobrunner.shared.atomic import write_json_atomically
from jobrunner.hidden_states import selection
from jobrunner.hidden_states.backend import Backend
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.hidden_states.progress import ExtractionReporter
from jobrunner.hidden_states.store import ShardStore

ESTIMATE_NAME = "estimate.json"


def corpus_tokens(manifest: dict, splits: list[str]) -> int:
    return sum(manifest["splits"][s]["tokens"] for s in splits)


def extract(corpus_dir, out_dir, model_path: str, settings: ExtractionSettings, *, make_backend=None, publish=None,
            log=print) -> dict:
    """Extract states for every sample of `settings.splits` not yet in `out_dir`; returns the index. One
    forward stores every auxiliary layer the drafters read (`settings.aux_layers` replaces their
    defaults) and the final state. `make_backend` makes what `settings.backend` names (by default
    transformers); `publish` takes the progress document's text now and then
    (jobrunner.hidden_states.progress)."""
    from jobrunner.hidden_states.transformers_backend import model_dims

    s = settings
    manifest = corpus.read_manifest(corpus_dir)
    discard_unfinished_exports(Path(out_dir))  # an export a crash or a full volume cut short: its room back
    num_layers, hidden = model_dims(model_path)
    aux_layers = list(s.aux_layers) if s.aux_layers is not None else None
    problem = drafter_choice.problem(list(s.drafters), aux_layers) or s.problem()
    if problem:
        raise ValueError(problem)
    layers = drafter_choice.layers_to_store(list(s.drafters), num_layers, aux_layers)
    selection.check_aux_layers(layers, num_layers)
    out_dir = Path(out_dir)
    served = {d: drafter_choice.drafter_layers(d, num_layers, aux_layers) for d in s.drafters}
    estimate = write_estimate(out_dir, corpus_tokens(manifest, list(s.splits)), hidden, layers, s.dtype,
                              list(s.splits), served, log)
    reporter = ExtractionReporter(out_dir, estimate["tokens"], publish, log=log)
    store = ShardStore(out_dir, {
        "model": str(model_path), "aux_layers": layers, "hidden_state_indices": selection.hidden_state_indices(layers),
        "drafters": served,
        "final_state": s.final_state, "dtype": s.dtype, "hidden_size": hidden, "num_layers": num_layers,
        "max_len": s.max_len, "too_long": s.too_long, "backend": s.backend})
    if store.samples:
        log(f"extract: resuming: {len(store.samples)} samples already in {len(store.shards)} shards")
    backend: Backend = (make_backend or make_transformers_backend)(model_path, layers, s.final_state, s.dtype)
    reporter.start()
    with closing(backend):
        skipped, done_now = extract_all(store, backend, reporter, corpus_dir, s, estimate, log)
    store.flush()
    origin = extraction_provenance(Path(corpus_dir), model_path, s.final_state, s.backend)
    if origin["model_matches_generation"] is False:
        log("extract: WARNING: the model's config files differ from those the corpus was generated with")
    index = store.write_index({"complete": True, "skipped": dict(sorted(skipped.items())), "provenance": origin})
    reporter.report(store, finished=True)
    log(f"extract: done: {len(index['samples'])} samples ({done_now} this run), {index['tokens']} tokens, "
        f"{human_bytes(index['bytes'])} in {len(index['shards'])} shards; skipped {skipped or 'none'}")
    return index


@contextmanager
def closing(backend: Backend):
    """The backend's processes (SGLang's tensor-parallel ranks) stopped however the run ends."""
    try:
        yield backend
    finally:
        getattr(backend, "close", lambda: None)()


def extract_all(store: ShardStore, backend: Backend, reporter: ExtractionReporter, corpus_dir,
                settings: ExtractionSettings, estimate: dict, log) -> tuple[dict[str, int], int]:
    """Every sample not stored yet, in batches, a shard written whenever one is full; returns
    (skipped samples by reason, samples stored this run)."""
    s = settings
    shard_tokens = max(1, int(s.shard_mb * (1 << 20)) // estimate["bytes_per_token"])
    skipped: dict[str, int] = {}
    done_now = 0
    records = (r for split in s.splits for r in corpus.iter_corpus(corpus_dir, split))
    for window in selection.windows(records, s.sort_window):
        kept = kept_samples(window, s.max_len, s.too_long, skipped)
        for batch in selection.plan_batches([len(ids) for _, ids, _ in kept], s.max_batch_tokens, s.max_batch_size):
            buffered = store.buffered_tokens
            done_now += extract_batch(store, backend, [kept[i] for i in batch])
            reporter.extracted_batch(store.buffered_tokens - buffered, store)
            if store.buffered_tokens >= shard_tokens:
                store.flush()
    return skipped, done_now


def extraction_provenance(corpus_dir: Path, model_path: str, final_state: str, backend_name: str) -> dict:
    """What made these states (draftgen_contracts.provenance): the model's files, the layer and
    final-state conventions, the corpus (its manifest's hash) and what generated it."""
    manifest_bytes = (corpus_dir / corpus.MANIFEST_NAME).read_bytes()
    generation = json.loads(manifest_bytes).get("provenance", {})
    model = provenance.file_hashes(model_path, provenance.MODEL_FILES)
    generated_with = [s.get("model") for s in generation.get("sessions", []) if s.get("model")]
    return {"draftgen_version": provenance.draftgen_version(), "model": {"path": str(model_path), "files": model},
            "model_matches_generation": all(m == model for m in generated_with) if generated_with else None,
            "aux_layer_convention": provenance.AUX_LAYER_CONVENTION, "backend": backend_name,
            "final_state": {final_state: hidden_state_layout.FINAL_STATES[final_state]},
            "corpus": {"manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(), "generation": generation}}


def write_estimate(out_dir: Path, tokens: int, hidden: int, layers: list[int], dtype: str, splits: list[str],
                   served: dict[str, list[int]], log) -> dict:
    """The bytes the states will take, written and said before any weight is loaded; `served` maps each
    drafter to the layers it reads (what its exports will hold)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    estimate = selection.size_estimate(tokens, hidden, len(layers), dtype)
    estimate.update(splits=splits, aux_layers=layers, drafters=served,
                    note="upper bound when --max-len truncates or skips")
    write_json_atomically(out_dir / ESTIMATE_NAME, estimate)
    free = shutil.disk_usage(out_dir).free
    log(f"extract: {estimate['tokens']} tokens x {estimate['bytes_per_token']} B/token = "
        f"{human_bytes(estimate['bytes'])} (free on {out_dir}: {human_bytes(free)})")
    if estimate["bytes"] > free:
        log("extract: WARNING: the estimate exceeds the free space; the run will stop when the disk is full")
    return estimate


def kept_samples(window: list[dict], max_len: int | None, too_long: str,
                 skipped: dict[str, int]) -> list[tuple[str, list[int], list[int]]]:
    """(sample id, ids, loss mask) of the window's samples, cut to max_len; the skipped ones counted."""
    kept = []
    for r in window:
        action, value = selection.length_action(len(r["input_ids"]), r["prompt_len"], max_len, too_long)
        if action == "skip":
            skipped[value] = skipped.get(value, 0) + 1
        else:
            kept.append((r["sample_id"], r["input_ids"][:value], r["loss_mask"][:value]))
    return kept


def extract_batch(store: ShardStore, backend: Backend, batch: list[tuple[str, list[int], list[int]]]) -> int:
    """One forward pass over the batch's samples not stored yet; returns how many were stored."""
    todo = [sample for sample in batch if not store.is_done(sample[0])]
    if todo:
        for (sid, ids, mask), states in zip(todo, backend.extract([ids for _, ids, _ in todo])):
            store.add(sid, ids, mask, states)
    return len(todo)


def make_transformers_backend(model_path, layers, final_state, dtype, device="cpu", device_map=None,
                              trust_remote_code=False):
    from jobrunner.hidden_states.transformers_backend import TransformersBackend

    return TransformersBackend(model_path, layers, final_state=final_state, dtype=dtype,
                               device=device, device_map=device_map, trust_remote_code=trust_remote_code)


def discard_unfinished_exports(out_dir: Path) -> None:
    from jobrunner.shared.export_folder import UNFINISHED_SUFFIX

    for folder in (out_dir / "exports").glob("*" + UNFINISHED_SUFFIX):
        shutil.rmtree(folder, ignore_errors=True)
