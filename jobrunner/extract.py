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

import argparse
import hashlib
import json
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from draftgen_contracts import drafters as drafter_choice
from draftgen_contracts import exit_codes, hidden_state_layout, names, provenance
from draftgen_contracts.extraction_progress import ExtractionProgress
from draftgen_contracts.hidden_state_layout import DTYPE_BYTES, human_bytes
from jobrunner import corpus
from jobrunner.atomic import write_json_atomically
from jobrunner.full_volume import needs, ran_out_of_room, say_on_stderr
from jobrunner.hidden_states import selection
from jobrunner.hidden_states.backend import FINAL_STATES, Backend
from jobrunner.hidden_states.extraction_settings import ExtractionSettings
from jobrunner.hidden_states.progress import ExtractionReporter
from jobrunner.hidden_states.store import ShardStore

ESTIMATE_NAME = "estimate.json"
BACKENDS = ("transformers", "sglang")


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
    backend: Backend = (make_backend or _transformers_backend)(model_path, layers, s.final_state, s.dtype)
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


def _transformers_backend(model_path, layers, final_state, dtype, device="cpu", device_map=None,
                          trust_remote_code=False):
    from jobrunner.hidden_states.transformers_backend import TransformersBackend

    return TransformersBackend(model_path, layers, final_state=final_state, dtype=dtype,
                               device=device, device_map=device_map, trust_remote_code=trust_remote_code)


def backend_factory(args: argparse.Namespace):
    """The backend the command line names, as `extract` makes it: (model, layers, final state, dtype)."""
    if args.backend == "transformers":
        return lambda m, l, f, d: _transformers_backend(m, l, f, d, args.device, args.device_map,
                                                        args.trust_remote_code)
    server_args = json.loads(args.server_args)
    if not isinstance(server_args, list) or not all(isinstance(a, str) for a in server_args):
        raise ValueError(f"--server-args {args.server_args!r}: expected a JSON list of strings")

    def make(model_path, layers, final_state, dtype):
        from jobrunner.hidden_states.sglang_backend import SGLangBackend

        return SGLangBackend(model_path, layers, final_state, dtype, tp_size=args.tp_size, server_args=server_args,
                             max_batch_size=args.max_batch_size)
    return make


def publisher(configmap: str | None):
    """Where the progress goes besides OUT: the run's extraction report ConfigMap, from a pod."""
    if not configmap:
        return None
    from jobrunner.report_patch import patch_report

    return lambda text: patch_report(configmap, names.EXTRACTION_KEY, text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="a merged corpus directory (jobrunner merge)")
    parser.add_argument("--model", required=True, help="the target model (a transformers checkpoint directory)")
    parser.add_argument("--out", required=True, help="output directory (shards, index.json, estimate.json)")
    parser.add_argument("--split", choices=["train", "eval", "all"], default="all")
    parser.add_argument("--drafters", default="eagle3", help="comma-separated drafters the states serve, of "
                        f"{','.join(drafter_choice.DRAFTERS)}: one forward stores every layer they read "
                        "(draftgen_contracts/drafters.py) and each state export writes a layout per drafter")
    parser.add_argument("--aux-layers", help="comma-separated decoder layer numbers, 0-based, replacing the "
                        "drafters' defaults (EAGLE-3's 1,N//2-1,N-4 = output_hidden_states indices 2,N//2,N-3)")
    parser.add_argument("--final-state", choices=FINAL_STATES, default="post-norm")
    parser.add_argument("--dtype", choices=sorted(DTYPE_BYTES), default="bf16")
    parser.add_argument("--max-len", type=int, help="longest sequence extracted (default: no limit)")
    parser.add_argument("--too-long", choices=selection.TOO_LONG_POLICIES, default="truncate",
                        help="what happens to a sample over --max-len")
    parser.add_argument("--max-batch-tokens", type=int, default=16384, help="padded tokens per forward pass")
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--sort-window", type=int, default=2048, help="samples sorted by length together")
    parser.add_argument("--shard-mb", type=float, default=1024, help="target shard size")
    parser.add_argument("--backend", choices=BACKENDS, default="transformers",
                        help="what runs the target: transformers, or SGLang's own model runner in this "
                        "process (needs SGLang importable; docs/eagle3.md#the-sglang-backend)")
    parser.add_argument("--device", default="cpu", help="transformers: torch device when --device-map is not given")
    parser.add_argument("--device-map", help="transformers: device_map, e.g. auto (spreads a big model over GPUs)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="transformers: run the Python the model folder ships (auto_map); sglang: in --server-args")
    parser.add_argument("--tp-size", type=int, default=1, help="sglang: tensor-parallel ranks (one per GPU)")
    parser.add_argument("--server-args", default="[]",
                        help="sglang: the generation server's own flags as a JSON list (quantization, memory, "
                        "kernels); the backend adds the capture settings and refuses flags that change them")
    parser.add_argument("--report-configmap", help="in a pod: also publish the progress into this ConfigMap "
                        f"of the pod's namespace (key {names.EXTRACTION_KEY}; it is always written to OUT)")
    parser.add_argument("--export", action="append", choices=["specforge", "speculators"], default=[],
                        help="also write the states in that tool's layout under OUT/exports/ (repeatable)")


def discard_unfinished_exports(out_dir: Path) -> None:
    from jobrunner.exports import UNFINISHED_SUFFIX

    for folder in (out_dir / "exports").glob("*" + UNFINISHED_SUFFIX):
        shutil.rmtree(folder, ignore_errors=True)


def stop_for_room(out_dir: Path, exports: list[str], publish) -> str:
    """What a full volume stopped: the unfinished writes removed (their room back, the finished shards
    and exports kept whole), and what the states and exports still need, said as the extraction's
    progress (in a pod, to the API server, which has room)."""
    from jobrunner.hidden_states.store import read_shard_header

    discard_unfinished_exports(out_dir)
    for tmp in out_dir.glob("*.tmp"):
        tmp.unlink()
    estimate_file = out_dir / ESTIMATE_NAME
    estimate = json.loads(estimate_file.read_text()) if estimate_file.exists() else None
    shards = [(read_shard_header(p), p.stat().st_size) for p in out_dir.glob("shard-*.safetensors")]
    tokens, stored = sum(h["offsets"][-1] for h, _ in shards), sum(size for _, size in shards)
    served = (estimate or {}).get("drafters") or {"eagle3": (estimate or {}).get("aux_layers", [])}
    left = [(kind, d) for kind in exports for d in drafter_choice.exports_for(kind, list(served))
            if not (out_dir / "exports" / drafter_choice.export_folder(kind, d)).exists()]
    states = max(0, estimate["bytes"] - stored) if estimate else 0
    what = [*(["the hidden states"] if states or not estimate else []),
            *(f"the {drafter_choice.export_folder(kind, d)} export" for kind, d in left)]
    still = states + sum(hidden_state_layout.export_bytes(
        kind, estimate["tokens"], 0, estimate["hidden_size"],
        drafter_choice.export_aux_count(kind, d, served[d]), estimate["dtype"]) for kind, d in left if estimate)
    said = needs(" and ".join(what), out_dir, still)
    if publish is not None:
        samples = sum(len(h["sample_ids"]) for h, _ in shards)
        publish(ExtractionProgress(updated_at=time.time(), tokens=tokens, samples=samples,
                                   corpus_tokens=estimate["tokens"] if estimate else 0, volume_full=said).to_json())
    return said


def main(args: argparse.Namespace) -> int:
    try:
        layers = [int(x) for x in args.aux_layers.split(",")] if args.aux_layers else None
        splits = list(corpus.SPLITS) if args.split == "all" else [args.split]
        settings = ExtractionSettings(
            splits=tuple(splits), aux_layers=tuple(layers) if layers else None, drafters=tuple(args.drafters.split(",")),
            final_state=args.final_state, dtype=args.dtype, max_len=args.max_len, too_long=args.too_long,
            max_batch_tokens=args.max_batch_tokens, max_batch_size=args.max_batch_size, sort_window=args.sort_window,
            shard_mb=args.shard_mb, backend=args.backend)
        extract(args.corpus, args.out, args.model, settings, make_backend=backend_factory(args),
                publish=publisher(args.report_configmap))
        if args.export:
            from jobrunner.exports import export_states

            for kind in args.export:
                for folder in export_states(args.out, kind, args.corpus):
                    print(f"extract: export {kind} -> {folder}")
    except Exception as e:
        if ran_out_of_room(e, Path(args.out)):
            say_on_stderr(f"jobrunner extract: {stop_for_room(Path(args.out), args.export, publisher(args.report_configmap))}")
            return exit_codes.VOLUME_FULL
        if not isinstance(e, (ValueError, FileNotFoundError, OSError)):
            raise
        print(f"jobrunner extract: error: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    return exit_codes.OK
