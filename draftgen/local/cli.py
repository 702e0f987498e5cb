"""`draftgen run spec.yaml`: a DatasetGeneration on this machine, through the operator's own pipeline.

The YAML a user would `kubectl apply` runs here with the same stages, decided by the same reconcile
(draftgen.local.executor): the same phases, conditions and events, Jobs retried by their own
backoffLimit and podFailurePolicy, paths translated from the pods' mounts. A rerun continues where
the last one stopped: generation resumes by sample id, and stages whose Jobs completed are not run
again. Ctrl-C / SIGTERM: the running children get SIGTERM (generate aborts what is in flight and
syncs; merge and extract commit atomically and resume), a second signal kills them.

Exit status: 0 done, 1 a stage failed (it is named), 2 bad input (the spec, a missing file, a stage
failing on its config), 128+N stopped by signal N.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from draftgen_contracts import exit_codes
from draftgen_contracts.timestamps import utc_now_iso
from jobrunner.shared.config import ConfigError

from .executor import Interrupted, LocalExecutor, RunRefused
from .pod_process import NotRunnableHere
from .spec_file import SpecError, load_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a DatasetGeneration manifest (the YAML you would kubectl apply)")
    parser.add_argument("--data-dir", help="the folder the pods see as /data: prompts are read relative to it, "
                        "outputs go to DATA_DIR/<output.path or metadata.name>/ (default: the spec's folder)")
    parser.add_argument("--model-dir", help="the folder the pods see at spec.model.mountPath "
                        "(default: the spec's folder)")
    parser.add_argument("--inputs-dir", help="the folder the pods see at spec.inputs.mountPath (its volume of "
                        "prompt files; needed when the spec has inputs)")
    parser.add_argument("--server-url", help="a running SGLang server (default: start jobrunner's simulator)")
    parser.add_argument("--extract-device", default="cpu",
                        help="torch device of the transformers extraction, or 'auto' to spread the model over "
                             "the GPUs (default cpu); the sglang extraction runs as the spec's server flags say")
    parser.add_argument("--retry", action="store_true",
                        help="run a Failed run again as it is: its failed stage starts again and resumes from its "
                             "output (on a cluster: a new value of the annotation draftgen.io/retry)")


@contextlib.contextmanager
def signals_to(handler) -> Iterator[None]:
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(args: argparse.Namespace) -> int:
    try:
        name, spec = load_spec(args.spec)
    except SpecError as e:
        print(f"draftgen run: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    here = Path(args.spec).resolve().parent
    try:
        run = LocalExecutor(name, spec, Path(args.data_dir or here), Path(args.model_dir or here),
                            inputs_dir=Path(args.inputs_dir) if args.inputs_dir else None,
                            server_url=args.server_url, extract_device=args.extract_device,
                            retry=utc_now_iso() if args.retry else "")
    except ConfigError as e:
        print(f"draftgen run: {args.spec}: the spec renders an invalid generate config: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    except ValueError as e:  # a spec whose volumes this command was not given a folder for
        print(f"draftgen run: {args.spec}: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    with signals_to(run.on_signal):
        try:
            return run.run()
        except RunRefused as e:
            print(f"draftgen run: {e.stage} failed: {e}", file=sys.stderr)
            return exit_codes.BAD_CONFIG
        except SpecError as e:  # an update the API server would refuse
            print(f"draftgen run: {args.spec}: {e}", file=sys.stderr)
            return exit_codes.BAD_CONFIG
        except NotRunnableHere as e:  # a pod setting a local process has nothing for (a ConfigMap's value)
            print(f"draftgen run: {args.spec}: {e}", file=sys.stderr)
            return exit_codes.BAD_CONFIG
        except Interrupted as e:
            print(f"draftgen run: interrupted ({e}); finished work is stored: rerun the same command to resume",
                  file=sys.stderr)
            return exit_codes.interrupted(e.signum)
