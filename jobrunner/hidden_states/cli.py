"""`jobrunner extract`'s command line: the settings from the options, the backend they name, the
progress published from a pod, the exports; a full volume said as such."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from draftgen_contracts import drafters as drafter_choice
from draftgen_contracts import exit_codes, hidden_state_layout, names
from draftgen_contracts.extraction_progress import ExtractionProgress
from draftgen_contracts.hidden_state_layout import DTYPE_BYTES
from jobrunner.shared import corpus
from jobrunner.shared.config import CONFIGURATION_ERRORS
from jobrunner.shared.full_volume import needs, ran_out_of_room, say_on_stderr
from jobrunner.hidden_states import selection
from jobrunner.hidden_states.backend import FINAL_STATES
from jobrunner.hidden_states.extract import ESTIMATE_NAME, discard_unfinished_exports, extract, make_transformers_backend
from jobrunner.hidden_states.extraction_settings import ExtractionSettings

BACKENDS = ("transformers", "sglang")


def backend_factory(args: argparse.Namespace):
    """The backend the command line names, as `extract` makes it: (model, layers, final state, dtype)."""
    if args.backend == "transformers":
        return lambda m, l, f, d: make_transformers_backend(m, l, f, d, args.device, args.device_map,
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
    from jobrunner.shared.report_patch import patch_report

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
            from jobrunner.hidden_states.exports import export_states

            for kind in args.export:
                for folder in export_states(args.out, kind, args.corpus):
                    print(f"extract: export {kind} -> {folder}")
    except Exception as e:
        if ran_out_of_room(e, Path(args.out)):
            say_on_stderr(f"jobrunner extract: {stop_for_room(Path(args.out), args.export, publisher(args.report_configmap))}")
            return exit_codes.VOLUME_FULL
        if not isinstance(e, CONFIGURATION_ERRORS):
            raise  # a transient I/O error among them: a failed pod, which its Job retries
        print(f"jobrunner extract: error: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    return exit_codes.OK
