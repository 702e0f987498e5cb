"""`draftgen run spec.yaml`: a DatasetGeneration on this machine, through the operator's own code.

The YAML a user would `kubectl apply` runs here with the same stages, and nothing is decided twice:

- paths: the pods' mounts (/data and spec.model.mountPath) map to --data-dir and --model-dir, and
  every path the operator's plan renders is translated (`local_path`), never recomputed;
- generation: `plan.generate_config` for replica 0 of 1 (server.replicas is ignored locally), file
  coordination under the output root, run as `jobrunner generate` against --server-url or a
  `jobrunner simulate` child; its progress documents are folded with the operator's `fold_reports`;
- merge and extraction: the command lines of the operator's own Jobs (`plan.merge_command`,
  `plan.extract_command`), paths translated, extraction on the CPU unless --extract-device says otherwise;
- stages: the operator's stage policy (`next_stage`) moves the run on, from what is on disk, so a
  rerun continues where the last one stopped: generation resumes by sample id, a merge whose inputs
  and settings are unchanged is not redone, nor an extraction committed after the current corpus;
- Ctrl-C / SIGTERM: the running child is sent SIGTERM by PID (generate aborts what is in flight and
  syncs; merge and extract commit atomically and resume), a second signal kills it; exit 128+signal.

Exit status: 0 done, 1 a stage failed (it is named), 2 bad input (the spec, a missing file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ValidationError

from draftgen_contracts import budget, exit_codes, names
from draftgen_contracts.states import Component
from draftgen_contracts.timestamps import utc_now_iso
from draftgen_contracts.validation import error_lines
from jobrunner.config import ConfigError, parse_config
from jobrunner.coordination import FileCoordinator
from jobrunner.output import record_files

from . import api, plan
from .api import DatasetStatus
from .fold import fold_reports, is_generation_done, progress_text
from .policies.stage_policy import Stage, next_stage

JOBRUNNER = [sys.executable, "-m", "jobrunner.cli"]
SIMULATOR_COMMAND = ["jobrunner", "simulate"]
# Generate publishes (fsync + progress document) this often: the display's refresh rate.
PROGRESS_INTERVAL_S = 1.0
PLAIN_INTERVAL_S = 5.0  # one block of progress lines this often when stdout is not a terminal
# The first run and as many restarts after transient failures as the generation Job's backoffLimit.
GENERATE_ATTEMPTS = 1 + exit_codes.BACKOFF_LIMITS[Component.GENERATE]
SERVER_URL_TIMEOUT_S = 60.0  # the simulator binds at once; the readiness wait is generate's own
LOG_TAIL_LINES = 20
STAGE_COMMANDS: dict[Stage, str] = {"Generating": "generate", "Merging": "merge", "Extracting": "extract"}


class SpecError(ValueError):
    """A spec file that cannot be run; the message names the file and the field."""


class StageFailed(RuntimeError):
    def __init__(self, stage: str, message: str, exit_code: int = exit_codes.FAILED):
        super().__init__(message)
        self.stage = stage
        self.exit_code = exit_code


class Interrupted(RuntimeError):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# --- the spec ---------------------------------------------------------------------------------------

def dataset_generation(documents: list) -> dict:
    """The one DatasetGeneration among a file's YAML documents (a file may carry its PVCs too)."""
    found = [d for d in documents if isinstance(d, dict) and d.get("kind") == names.KIND]
    if len(found) != 1:
        raise SpecError(f"expected one {names.KIND} object, found {len(found)}")
    obj = found[0]
    if obj.get("apiVersion") != f"{names.GROUP}/{names.VERSION}":
        raise SpecError(f"apiVersion: {obj.get('apiVersion')!r}, expected {names.GROUP}/{names.VERSION}")
    return obj


def parse_object(obj: dict) -> tuple[str, api.DatasetGenerationSpec]:
    """(metadata.name, spec) of a DatasetGeneration object; SpecError names the first bad fields."""
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not names.NAME_PATTERN.match(name) or len(name) > names.MAX_NAME_LENGTH:
        raise SpecError(f"metadata.name: {name!r} must be a lowercase DNS name of at most {names.MAX_NAME_LENGTH} "
                        "characters")
    if not isinstance(obj.get("spec"), dict):
        raise SpecError("spec: required, a mapping")
    try:
        return name, api.DatasetGenerationSpec.model_validate(obj["spec"])
    except ValidationError as e:
        raise SpecError("\n  ".join(error_lines(e, "spec"))) from None


def load_spec(path: str | os.PathLike) -> tuple[str, api.DatasetGenerationSpec]:
    try:
        documents = list(yaml.safe_load_all(Path(path).read_text()))
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {e}") from None
    try:
        return parse_object(dataset_generation(documents))
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None


def local_spec(spec: api.DatasetGenerationSpec) -> api.DatasetGenerationSpec:
    """The spec as run here: one generate process, replica 0 of 1, against one server."""
    return spec.model_copy(update={"server": spec.server.model_copy(update={"replicas": 1})})


# --- paths and command lines ------------------------------------------------------------------------

def pod_mounts(spec: api.DatasetGenerationSpec, data_dir: Path, model_dir: Path) -> dict[str, Path]:
    """What the pods mount where -> the local folder that stands for it."""
    return {names.DATA_MOUNT: data_dir, spec.model.mount_path.rstrip("/") or "/": model_dir}


def local_path(pod_path: str, mounts: dict[str, Path]) -> str:
    """A path as the pods see it, on this machine: under a mount (the longest that matches) -> under
    its local folder; any other path is used as it is."""
    for mount in sorted(mounts, key=len, reverse=True):
        if pod_path == mount or pod_path.startswith(mount.rstrip("/") + "/"):
            return str(mounts[mount] / pod_path[len(mount):].lstrip("/"))
    return pod_path


def local_argv(pod_command: list[str], mounts: dict[str, Path]) -> list[str]:
    """A pod's `jobrunner ...` command line for this machine: this interpreter, local paths."""
    if pod_command[0] != "jobrunner":
        raise ValueError(f"not a jobrunner command: {pod_command}")
    return [*JOBRUNNER, *(local_path(a, mounts) if a.startswith("/") else a for a in pod_command[1:])]


def with_flag_values(argv: list[str], values: dict[str, str]) -> list[str]:
    """argv with the value after each occurrence of the given flags replaced."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg in values:
            out[i + 1] = values[arg]
    return out


def extract_placement(device: str) -> list[str]:
    """Where the extraction puts the model here: a torch device, or "auto" (transformers spreads the
    model over the GPUs), instead of the extraction pod's placement."""
    return ["--device-map", "auto"] if device == "auto" else ["--device", device]


def runs_simulator(spec: api.DatasetGenerationSpec) -> bool:
    """Whether the spec's own server is jobrunner's simulator (the quickstart's way)."""
    return spec.server.command[:2] == SIMULATOR_COMMAND


def simulator_argv(spec: api.DatasetGenerationSpec, model_path: str) -> list[str]:
    """`jobrunner simulate` with the flags the pod's server gets (plan.server_args), on a free loopback
    port; the spec's own server args only when that server is the simulator."""
    server = spec.server if runs_simulator(spec) else spec.server.model_copy(update={"args": []})
    argv = plan.server_args(spec.model_copy(update={"server": server}))
    return [*JOBRUNNER, "simulate",
            *with_flag_values(argv, {"--host": "127.0.0.1", "--port": "0", "--model-path": model_path})]


# --- what is done already (pure decisions on what is on disk) ---------------------------------------

def merge_inputs(output_root: Path) -> dict[str, int]:
    """The generation part files a merge would read now, with their sizes (they only grow)."""
    return {str(p.relative_to(output_root)): p.stat().st_size for p in record_files(output_root)}


def other_replicas(part_files: list[Path]) -> list[int]:
    """Replicas other than 0 whose generation output is there: a cluster run with server.replicas > 1.
    Their rows are theirs; replica 0 of 1 would generate them again under the same sample ids."""
    found = (re.fullmatch(r"part-r(\d+)\.jsonl", p.name) for p in part_files)
    return sorted({int(m.group(1)) for m in found if m and int(m.group(1)) != 0})


def is_merge_current(manifest: dict | None, inputs: dict[str, int], policies: dict) -> bool:
    """A committed corpus was merged from exactly these part files, as long as they are now, with these
    settings: merging again would write the same bytes (merge is deterministic), so it is skipped."""
    if not manifest or manifest.get("policies") != policies:
        return False
    return {i.get("path"): i.get("bytes") for i in manifest.get("inputs", [])} == inputs


def is_extraction_current(index: dict | None, index_mtime_ns: int, manifest_mtime_ns: int) -> bool:
    """The hidden states were completed after the current corpus was committed (both files are written
    last, by rename, so their times order the two commits). Changed extraction settings are not a
    reason to redo it: extract refuses to mix settings in one output folder."""
    return bool(index and index.get("complete")) and index_mtime_ns > manifest_mtime_ns


def generate_outcome(exit_code: int, attempt: int) -> Literal["done", "restart", "failed"]:
    """After a generate process: go on, restart it (transient failures left rows to redo), or fail."""
    if exit_code == 0:
        return "done"
    if exit_code == exit_codes.RETRY_LATER and attempt < GENERATE_ATTEMPTS:
        return "restart"
    return "failed"


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def parse_command(argv: list[str], module) -> argparse.Namespace:
    """A jobrunner command line (JOBRUNNER + [command, *args]) parsed by that command's own parser."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv[len(JOBRUNNER) + 1:])


# --- progress ---------------------------------------------------------------------------------------

COLUMNS = ("dataset", "tokens", "budget", "%", "state", "tok/s", "ETA")


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_rows(datasets: list[DatasetStatus]) -> list[tuple[str, ...]]:
    """One row per dataset: tokens, budget, percent (past 100 when the budget was overshot), state,
    rate and ETA (the budget module's, while generating)."""
    rows = []
    for d in datasets:
        generating = d.state == "Generating"
        eta = budget.eta_seconds(d.budget_tokens, d.tokens, d.tokens_per_second) if generating else None
        rows.append((d.name, f"{d.tokens:,}", f"{d.budget_tokens:,}", f"{100 * d.tokens / d.budget_tokens:.1f}",
                     d.state, f"{d.tokens_per_second:,.0f}" if generating else "-", format_duration(eta)))
    return rows


def plain_lines(datasets: list[DatasetStatus]) -> list[str]:
    rows = [COLUMNS, *progress_rows(datasets)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return [f"generate: {progress_text(datasets)} of the budgets"] + [
        "  " + "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows]


class ProgressView:
    """The generation progress: a live table on a terminal, a block of plain lines every few seconds
    elsewhere (logs, CI)."""

    def __init__(self, stream, tty: bool):
        self.stream = stream
        self.tty = tty
        self.live = None
        self.last_plain = 0.0
        self.last_lines: list[str] = []

    def __enter__(self) -> ProgressView:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            # No refresh thread: the table is redrawn when new numbers come (about once a second).
            self.live = Live(console=Console(file=self.stream), auto_refresh=False)
            self.live.start()
        return self

    def show(self, datasets: list[DatasetStatus], final: bool = False) -> None:
        if self.live is not None:
            self.live.update(self._table(datasets), refresh=True)
        elif final or time.monotonic() - self.last_plain >= PLAIN_INTERVAL_S:
            lines = plain_lines(datasets)
            if lines != self.last_lines:  # a log gets a block only when a number moved
                self.last_plain, self.last_lines = time.monotonic(), lines
                print("\n".join(lines), file=self.stream, flush=True)

    @staticmethod
    def _table(datasets: list[DatasetStatus]):
        from rich.table import Table

        table = Table(title=f"generate: {progress_text(datasets)} of the budgets", title_justify="left")
        for i, column in enumerate(COLUMNS):
            table.add_column(column, justify="left" if i in (0, 4) else "right")
        for row in progress_rows(datasets):
            table.add_row(*row)
        return table

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()


# --- the run ----------------------------------------------------------------------------------------

def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class LocalRun:
    """One `draftgen run`: the stages, the children it starts (by PID), the signals it forwards."""

    def __init__(self, name: str, spec: api.DatasetGenerationSpec, data_dir: Path, model_dir: Path, *,
                 server_url: str | None = None, extract_device: str = "cpu", out=None):
        self.name = name
        self.spec = local_spec(spec)
        self.requested_replicas = spec.server.replicas
        self.mounts = pod_mounts(spec, data_dir.resolve(), model_dir.resolve())
        self.server_url = server_url
        self.out = out or sys.stdout
        self.output_root = Path(local_path(plan.output_root(name, spec), self.mounts))
        self.run_dir = self.output_root / "local-run"  # the rendered config and the children's logs
        # The simulator's URL is known only once it runs: generate gets it as --server-url, as in the pods.
        self.generate_config = plan.generate_config(
            self.spec, server_url=server_url or f"http://127.0.0.1:{spec.server.port}",
            output_root=str(self.output_root), tokenizer_path=local_path(spec.model.tokenizer_path(), self.mounts),
            dataset_paths={d.name: local_path(plan.dataset_path(spec, d), self.mounts) for d in spec.datasets},
            coordination={"kind": "file"}, run_id=name, progress_interval_s=PROGRESS_INTERVAL_S)
        self.coordination_dir = parse_config(self.generate_config, "the generate config").coordination_directory()
        self.merge_argv = local_argv(plan.merge_command(name, self.spec), self.mounts)
        self.extract_argv = local_argv(
            plan.extract_command(name, self.spec, placement=extract_placement(extract_device)), self.mounts)
        self.statuses: list[DatasetStatus] = []
        self.child: subprocess.Popen | None = None
        self.simulator: subprocess.Popen | None = None
        self.interrupted: int | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ---- what is on disk ---------------------------------------------------------------------------

    def fold(self, generation_finished: bool = False) -> list[DatasetStatus]:
        reports = FileCoordinator(self.coordination_dir, 0).all_progress()
        self.statuses = fold_reports(self.spec, reports, self.statuses, utc_now_iso(), generation_finished)
        return self.statuses

    def corpus_dir(self) -> Path:
        from jobrunner import merge

        return Path(parse_command(self.merge_argv, merge).corpus_dir)

    def merge_current(self) -> bool:
        from jobrunner import corpus, merge

        settings, _ = merge.settings_from(parse_command(self.merge_argv, merge))
        manifest = read_json(self.corpus_dir() / corpus.MANIFEST_NAME)
        return is_merge_current(manifest, merge_inputs(self.output_root), settings.policies())

    def extraction_current(self) -> bool:
        from jobrunner import corpus, extract
        from jobrunner.hidden_states.store import INDEX_NAME

        index = Path(parse_command(self.extract_argv, extract).out) / INDEX_NAME
        return is_extraction_current(read_json(index), mtime_ns(index), mtime_ns(self.corpus_dir() / corpus.MANIFEST_NAME))

    # ---- the stages --------------------------------------------------------------------------------

    def run(self) -> int:
        """Every stage the operator's stage policy asks for, each at most once; returns the exit status."""
        self.check_output()
        self.check_checkpoint()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ran: set[Stage] = set()
        stage: Stage = "Generating"
        while stage != "Done":
            done = {"generation_done": is_generation_done(self.fold(generation_finished="Generating" in ran)),
                    "merge_succeeded": self.merge_current(), "extract_succeeded": self.extraction_current(),
                    "extraction_enabled": self.spec.extraction.enabled}
            following = next_stage(stage, **done)
            if following != stage:
                if stage not in ran:
                    self.say(f"{STAGE_COMMANDS[stage]}: done already (stored output), skipped")
                    if stage == "Generating":
                        self.show_final()
                stage = following
                continue
            if stage in ran:
                raise StageFailed(STAGE_COMMANDS[stage], "finished, but its output is not there")
            ran.add(stage)
            {"Generating": self.generate, "Merging": self.merge, "Extracting": self.extract}[stage]()
        self.report()
        return exit_codes.OK

    def show_final(self) -> None:
        with ProgressView(self.out, tty=False) as view:
            view.show(self.statuses, final=True)

    def generate(self) -> None:
        config_path = self.run_dir / "generate.yaml"
        config_path.write_text(yaml.safe_dump(self.generate_config, sort_keys=False))
        if self.requested_replicas != 1:
            self.say(f"generate: server.replicas={self.requested_replicas} is ignored locally: "
                     "one generate process (replica 0 of 1) against one server")
        log = self.run_dir / "generate.log"
        with self.server() as url:
            self.say(f"generate: {url}, output {self.output_root}, log {log}")
            for attempt in range(1, GENERATE_ATTEMPTS + 1):
                argv = [*JOBRUNNER, "generate", "--config", str(config_path), "--server-url", url]
                code = self.generate_once(argv, log)
                outcome = generate_outcome(code, attempt)
                if outcome == "done":
                    return
                if outcome == "failed":
                    raise StageFailed("generate", f"exit {code}; the end of {log}:\n{log_tail(log)}",
                                      exit_codes.BAD_CONFIG if code == exit_codes.BAD_CONFIG else exit_codes.FAILED)
                self.say(f"generate: transient failures left rows to redo; restart {attempt} of "
                         f"{GENERATE_ATTEMPTS - 1}")

    def generate_once(self, argv: list[str], log: Path) -> int:
        """One generate process, its progress shown as it goes; returns its exit status."""
        with ProgressView(self.out, tty=self.out.isatty()) as view:
            def tick() -> None:
                view.show(self.fold())
                self.check_simulator()

            code = self.run_child(argv, log=log, tick=tick)
            view.show(self.fold(generation_finished=code == 0), final=True)
        return code

    @contextlib.contextmanager
    def server(self) -> Iterator[str]:
        """The generation server's URL: --server-url, or a simulator child stopped (by PID) afterwards."""
        if self.server_url:
            yield self.server_url
            return
        model_path = local_path(self.spec.model.checkpoint_path(), self.mounts)
        if not runs_simulator(self.spec):
            self.say(f"generate: spec.server.command is {self.spec.server.command}, not {SIMULATOR_COMMAND}: "
                     "using the simulator with default flags (pass --server-url for a running SGLang)")
        log = self.run_dir / "simulator.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(simulator_argv(self.spec, model_path), stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            url = self._server_url(proc, log)
            self.simulator = proc
            yield url
        finally:
            self.simulator = None
            stop(proc)

    def check_simulator(self) -> None:
        """A simulator that died fails the stage now, not after generate's retries run out."""
        proc = self.simulator
        if proc is not None and proc.poll() is not None:
            log = self.run_dir / "simulator.log"
            raise StageFailed("generate", f"the simulator exited with {proc.returncode}; the end of {log}:\n"
                                          f"{log_tail(log)}")

    def _server_url(self, proc: subprocess.Popen, log: Path) -> str:
        """The URL the simulator prints once it has bound its port."""
        deadline = time.monotonic() + SERVER_URL_TIMEOUT_S
        while time.monotonic() < deadline:
            first = (log.read_text(errors="replace").splitlines() or [""])[0]
            if first.startswith("http://"):
                return first.strip()
            if proc.poll() is not None:
                raise StageFailed("generate", f"the simulator exited with {proc.returncode}:\n{log_tail(log)}")
            if self.interrupted:
                raise Interrupted(self.interrupted)
            time.sleep(0.05)
        raise StageFailed("generate", f"the simulator printed no URL in {SERVER_URL_TIMEOUT_S:.0f} s:\n{log_tail(log)}")

    def merge(self) -> None:
        self.check_child("merge", self.run_child(self.merge_argv))

    def extract(self) -> None:
        self.check_child("extract", self.run_child(self.extract_argv))

    def check_output(self) -> None:
        replicas = other_replicas(record_files(self.output_root))
        if replicas:
            raise StageFailed("generate", f"{self.output_root} holds the output of replicas {replicas} of a run "
                                          "with more replicas; this machine runs replica 0 of 1 and would generate "
                                          "their rows again: use another output.path", exit_codes.BAD_CONFIG)

    def check_checkpoint(self) -> None:
        """Extraction needs the checkpoint: a wrong --model-dir is found before any generation, not after."""
        from jobrunner import extract

        model = Path(parse_command(self.extract_argv, extract).model)
        if self.spec.extraction.enabled and not model.is_dir():
            raise StageFailed("extract", f"the model checkpoint {model} is not a directory "
                                         "(spec.model.path under --model-dir)", exit_codes.BAD_CONFIG)

    def report(self) -> None:
        argv = [*JOBRUNNER, "report", "--output-root", str(self.output_root),
                "--png-dir", str(self.output_root / "report")]
        self.check_child("report", self.run_child(argv))

    @staticmethod
    def check_child(stage: str, code: int) -> None:
        if code != 0:
            raise StageFailed(stage, f"exit {code} (its output is above)")

    # ---- children and signals ----------------------------------------------------------------------

    def run_child(self, argv: list[str], log: Path | None = None, tick: Callable[[], None] | None = None) -> int:
        """Run one stage's process to its end (calling `tick` about once a second); its own session,
        so a terminal's Ctrl-C reaches this process alone, which forwards it (`on_signal`)."""
        if self.interrupted:
            raise Interrupted(self.interrupted)
        with open(log, "ab") if log else contextlib.nullcontext() as f:
            self.child = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT if f else None,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            if self.interrupted:  # a signal that came while the child was starting
                self.child.terminate()
            while True:
                try:
                    code = self.child.wait(timeout=PROGRESS_INTERVAL_S if tick else None)
                    break
                except subprocess.TimeoutExpired:
                    tick()
        finally:
            stop(self.child)
            self.child = None
        if self.interrupted:
            raise Interrupted(self.interrupted)
        return code

    def on_signal(self, signum: int, _frame) -> None:
        """First signal: SIGTERM to the running child, which stops cleanly; a second one kills it."""
        child = self.child
        if self.interrupted is None:
            self.interrupted = signum
            if child is not None and child.poll() is None:
                child.terminate()
        elif child is not None and child.poll() is None:
            child.kill()


def stop(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Stop a child by its PID: SIGTERM, then SIGKILL if it outlives the timeout."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def signals_to(handler) -> Iterator[None]:
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# --- command line -----------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a DatasetGeneration manifest (the YAML you would kubectl apply)")
    parser.add_argument("--data-dir", help="the folder the pods see as /data: prompts are read relative to it, "
                        "outputs go to DATA_DIR/<output.path or metadata.name>/ (default: the spec's folder)")
    parser.add_argument("--model-dir", help="the folder the pods see at spec.model.mountPath "
                        "(default: the spec's folder)")
    parser.add_argument("--server-url", help="a running SGLang server (default: start jobrunner's simulator)")
    parser.add_argument("--extract-device", default="cpu",
                        help="torch device of the extraction, or 'auto' to spread the model over the GPUs "
                             "(default cpu)")


def main(args: argparse.Namespace) -> int:
    try:
        name, spec = load_spec(args.spec)
    except SpecError as e:
        print(f"draftgen run: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    here = Path(args.spec).resolve().parent
    try:
        run = LocalRun(name, spec, Path(args.data_dir or here), Path(args.model_dir or here),
                       server_url=args.server_url, extract_device=args.extract_device)
    except ConfigError as e:
        print(f"draftgen run: {args.spec}: the spec renders an invalid generate config: {e}", file=sys.stderr)
        return exit_codes.BAD_CONFIG
    with signals_to(run.on_signal):
        try:
            return run.run()
        except StageFailed as e:
            print(f"draftgen run: {e.stage} failed: {e}", file=sys.stderr)
            return e.exit_code
        except Interrupted as e:
            print(f"draftgen run: interrupted ({e}); finished work is stored: rerun the same command to resume",
                  file=sys.stderr)
            return 128 + e.signum
