"""observe -> decide -> apply on this machine, until the DatasetGeneration has Succeeded or Failed.

The loop is the operator's reconcile (draftgen.reconcile.decide) with local hands: the world it
observes is the LocalJobs' states, the replicas' progress files and the status kept in state.json;
applying a decision runs the decided objects: a Job is its main container's command as a process
(pod_process), a ConfigMap or a Secret its keys as files in a folder that stands for its volume
(the run's server keys made afresh by each run). RBAC objects
have nothing to stand for here, so they are only recorded as existing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from draftgen import admission, api, plan, server_keys
from draftgen.conditions import ConditionType, condition
from draftgen.observed import World
from draftgen.reasons import Reason
from draftgen.reconcile import Decision, decide
from draftgen_contracts import exit_codes, names
from draftgen_contracts.generate_config import GenerateConfig, default_coordination_directory
from draftgen_contracts.extraction_progress import ExtractionProgress, parse_extraction_progress
from draftgen_contracts.preflight_report import PreflightReport, parse_preflight
from draftgen_contracts.states import Component, Phase, Stage
from draftgen_contracts.timestamps import utc_now_iso
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.shared.output import record_files

from .local_job import LocalJob, log_tail
from .output_owner import claim, owner_of
from .paths import JOBRUNNER, local_path, pod_mounts
from .pod_process import PodProcess, config_map_folder, pod_process, secret_folder, server_sidecar, with_device
from .progress_view import ProgressView
from .server import GenerationServer, ServerFailed, runs_simulator
from .spec_file import SpecError, local_spec
from .state import STATE_FILE, RunState, StateFile, next_generation, spec_digest

NAMESPACE = "local"  # the reconcile's namespace: nothing of a local run is namespaced
TICK_S = plan.REPORT_INTERVAL_S  # generate publishes its progress this often: the loop's pace when nothing else happens
POLL_S = 0.05
SETTINGS = plan.OperatorSettings(coordination="file")  # no API server: replicas report through files
PIPELINE = (Component.PREFLIGHT, Component.GENERATE, Component.MERGE, Component.EXTRACT)


class Interrupted(RuntimeError):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class RunRefused(RuntimeError):
    """The run cannot start here (its output holds another run's replicas, a checkpoint is missing)."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage = stage


class LocalExecutor:
    def __init__(self, name: str, spec: api.DatasetGenerationSpec, data_dir: Path, model_dir: Path, *,
                 inputs_dir: Path | None = None, server_url: str | None = None, extract_device: str = "cpu",
                 out=None, err=None, retry: str = ""):
        self.name = name
        self.retry = retry  # as the annotation draftgen.io/retry: a Failed run runs again
        self.requested_replicas = spec.server.replicas
        self.applied = spec  # as the user wrote it: what a rerun's spec is held to
        self.spec = local_spec(spec)
        self.mounts = pod_mounts(spec, data_dir.resolve(), model_dir.resolve(),
                                 inputs_dir.resolve() if inputs_dir else None)
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.output_root = Path(local_path(plan.output_root(name, spec), self.mounts))
        self.run_dir = self.output_root / "local-run"  # the state, the volumes' folders, the children's logs
        self.volumes_dir = self.run_dir / "volumes"  # the ConfigMaps' and emptyDirs' folders (pod_process)
        self.extract_device = extract_device
        self.coordination_dir = Path(local_path(default_coordination_directory(plan.output_root(name, spec)),
                                                self.mounts))
        self.coordination: FileCoordinator | None = None  # made (with its folder) once the run may start
        # A server that already runs: the spec's endpoint unless --server-url names another.
        server_url = server_url or (spec.server.endpoint.url if spec.server.endpoint else None)
        self.server = GenerationServer(self.spec, local_path(spec.model.checkpoint_path(), self.mounts),
                                       self.run_dir / "simulator.log", server_url, self.say)
        self.jobs: dict[str, LocalJob] = {}
        self.existing: set[tuple[str, str]] = set()
        self.state = RunState()
        self.state_file = StateFile(self.run_dir / STATE_FILE)
        self.started: set[str] = set()  # components whose Jobs this run started
        self.interrupted: int | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # ---- before anything starts --------------------------------------------------------------

    def check_output(self) -> None:
        """This machine runs replica 0 of 1: another run's replicas' rows would be generated again."""
        found = (names.replica_of_part_file(p.name) for p in record_files(self.output_root))
        others = sorted({r for r in found if r})
        if others:
            raise RunRefused(Component.GENERATE, f"{self.output_root} holds the output of replicas {others} of a run with "
                                         "more replicas; this machine runs replica 0 of 1 and would generate their "
                                         "rows again: use another output.path")

    def check_nodes(self) -> None:
        """A replica across nodes needs the nodes: this machine runs one server process."""
        nodes = self.spec.server.nodes_per_replica
        if nodes != 1:
            raise RunRefused(Component.GENERATE, f"server.nodesPerReplica={nodes}: a replica across nodes runs on a "
                                                 "cluster; this machine runs one server: set nodesPerReplica to 1 and "
                                                 "tensorParallelSize to this machine's GPUs to run it here")

    def check_checkpoint(self) -> None:
        """Extraction needs the checkpoint: a wrong --model-dir is found before any generation, not after."""
        model = Path(local_path(self.spec.model.checkpoint_path(), self.mounts))
        if self.spec.extraction.enabled and not model.is_dir():
            raise RunRefused(Component.EXTRACT, f"the model checkpoint {model} is not a directory "
                                        "(spec.model.path under --model-dir)")

    def check_update(self, previous: RunState) -> None:
        """A rerun is an update of the object: the fields the API server keeps immutable stay as they were."""
        if previous.spec:
            changes = admission.immutable_changes(api.DatasetGenerationSpec.model_validate(previous.spec), self.applied)
            if changes:
                raise SpecError("\n  ".join(changes))

    # ---- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        previous = self.state_file.load()
        self.check_update(previous)
        self.check_nodes()
        self.check_output()
        self.check_checkpoint()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.coordination = FileCoordinator(self.coordination_dir, 0)
        digest = spec_digest(self.spec)
        self.state = RunState(next_generation(previous, digest), digest, previous.status, previous.completed_jobs,
                              admission.as_applied(self.applied))
        if self.requested_replicas != 1:
            self.say(f"generate: server.replicas={self.requested_replicas} is ignored locally: "
                     "one generate process (replica 0 of 1) against one server")
        try:
            with ProgressView(self.out, tty=self.out.isatty()) as view:
                status = self.reconcile_until_done(view)
        finally:
            self.stop_everything()
            self.state_file.save(self.state)
        return self.finish(status)

    def reconcile_until_done(self, view: ProgressView) -> api.DatasetGenerationStatus:
        while True:
            if self.interrupted:
                raise Interrupted(self.interrupted)
            decision = decide(self.name, NAMESPACE, self.state.generation, self.spec, self.state.status,
                              self.observe(), SETTINGS, utc_now_iso(), self.retry)
            self.apply(decision)
            self.show(view, decision.status)
            self.state.status = decision.status
            self.state_file.save(self.state)
            if decision.status.phase in (Phase.SUCCEEDED, Phase.FAILED) or stopped_by_a_full_volume(decision.status):
                return decision.status
            # Suspended with nothing left running (the preflight, the one Job a suspended run runs, ended):
            # the plan is in the status; a rerun with suspend false goes on from here.
            if decision.status.phase == Phase.SUSPENDED and not decision.create and not self.any_running():
                return decision.status
            if not (decision.create or decision.delete_jobs):
                self.wait_for_news()

    def observe(self) -> World:
        self.fail_generation_if_the_server_died()
        for job in self.jobs.values():
            job.poll()
        for name, job in list(self.jobs.items()):
            if job.gone():
                del self.jobs[name]
            elif job.outcome == "succeeded":
                self.state.completed_jobs[name] = job.state()
                del self.jobs[name]
        jobs = {**self.state.completed_jobs, **{n: j.state() for n, j in self.jobs.items()}}
        return World(jobs=jobs, reports=self.coordination.all_progress(), existing=frozenset(self.existing),
                     output_owner=owner_of(self.output_root), preflight=self.preflight_findings(),
                     extraction=self.extraction_progress())

    def preflight_findings(self) -> PreflightReport | None:
        try:
            return parse_preflight((self.output_root / names.PREFLIGHT_KEY).read_text())
        except OSError:
            return None

    def extraction_progress(self) -> ExtractionProgress | None:
        try:
            return parse_extraction_progress(
                (self.output_root / names.HIDDEN_STATES_DIR / names.EXTRACTION_KEY).read_text())
        except OSError:
            return None

    def fail_generation_if_the_server_died(self) -> None:
        try:
            self.server.raise_if_died()
        except ServerFailed as e:
            for job in self.jobs.values():
                if job.component == Component.GENERATE and job.outcome == "running":
                    job.fail(Reason.SERVER_FAILED, str(e))

    def wait_for_news(self) -> None:
        """Until a child exits, a signal comes, or a tick passes (the next progress report)."""
        deadline = time.monotonic() + TICK_S
        while time.monotonic() < deadline and not self.interrupted:
            if any(j.proc is not None and not j.running() and j.outcome == "running" for j in self.jobs.values()):
                return
            time.sleep(POLL_S)

    # ---- applying a decision -------------------------------------------------------------------

    def apply(self, decision: Decision) -> None:
        for name in decision.delete_jobs:
            if name in self.jobs:
                self.jobs[name].delete()
            self.state.completed_jobs.pop(name, None)
        for obj in decision.create:
            if obj["kind"] == "Job":
                self.create_job(obj)
            elif names.LABEL_OUTPUT_LOCK in obj["metadata"]["labels"]:
                claim(self.output_root, obj["data"]["owner"])
            else:
                if obj["kind"] == "ConfigMap":
                    self.write_config_map(obj)
                elif obj["kind"] == "Secret":
                    self.write_keys(obj)
                self.existing.add((obj["kind"], obj["metadata"]["name"]))
        for event_type, reason, message in decision.events:
            self.say(f"event {event_type} {reason}: {message}")
        if not any(j.component == Component.GENERATE for j in self.jobs.values()):
            self.server.stop()

    def write_config_map(self, obj: dict) -> None:
        """Its keys as files, as its volume shows them; the generate config names the pods' paths,
        which move here as the containers' arguments do. A file already holding the same text is
        left as it is (a rerun changes nothing it does not have to)."""
        folder = config_map_folder(self.volumes_dir, obj["metadata"]["name"])
        folder.mkdir(parents=True, exist_ok=True)
        for key, text in (obj.get("data") or {}).items():
            if key == names.GENERATE_CONFIG_KEY:
                config = GenerateConfig.model_validate(yaml.safe_load(text))
                text = plan.config_text(config.with_paths(lambda p: local_path(p, self.mounts)))
            if not (folder / key).is_file() or (folder / key).read_text() != text:
                (folder / key).write_text(text)

    def write_keys(self, secret: dict) -> None:
        """The run's server keys, made afresh for this `draftgen run` (its server starts with them),
        as files only this user reads."""
        folder = secret_folder(self.volumes_dir, secret["metadata"]["name"])
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for key, text in server_keys.filled(secret, server_keys.fresh_keys())["stringData"].items():
            path = folder / key
            path.touch(mode=0o600)
            path.write_text(text)

    def create_job(self, obj: dict) -> None:
        meta = obj["metadata"]
        name, component = meta["name"], meta["labels"][names.LABEL_COMPONENT]
        log = self.run_dir / f"{component}.log"
        job = LocalJob(name, component, (meta.get("annotations") or {}).get(names.CONFIG_HASH_ANNOTATION), log,
                       self.say)
        self.jobs[name] = job
        self.started.add(component)
        try:
            job.process = self.placed(obj, component, pod_process(obj, self.mounts, self.volumes_dir))
        except ServerFailed as e:
            job.fail(Reason.SERVER_FAILED, str(e))
            return
        self.say(f"{component}: started, log {log}")
        job.start()

    def placed(self, job: dict, component: str, process: PodProcess) -> PodProcess:
        """What only this executor knows: the local server's URL, the device extraction runs on."""
        if component == Component.GENERATE:
            url = self.server.start(self.server_process(job))
            self.say(f"generate: {url}, output {self.output_root}")
            return process.with_option("--server-url", url).without_option("--metrics-address")
        if component == Component.EXTRACT and self.spec.extraction.backend == "transformers":
            return with_device(process, self.extract_device)
        return process

    def server_process(self, job: dict) -> PodProcess | None:
        """The generation pod's server sidecar as a local process, when it is one that runs here."""
        return pod_process(job, self.mounts, self.volumes_dir, server_sidecar(job)) if runs_simulator(self.spec) else None

    # ---- what the user sees ------------------------------------------------------------------

    def show(self, view: ProgressView, status: api.DatasetGenerationStatus) -> None:
        before = self.state.status
        generating = status.stage in (None, Stage.GENERATING)
        if generating or before.stage in (None, Stage.GENERATING):
            view.show(status.datasets, status.estimate, final=not generating)
        if status.phase != before.phase:
            ready = condition(status.conditions, ConditionType.READY)
            detail = f" ({ready.reason}): {ready.message}" if ready else ""
            self.say(f"phase {status.phase}{detail}")

    def any_running(self) -> bool:
        return any(j.proc is not None and j.running() for j in self.jobs.values())

    def finish(self, status: api.DatasetGenerationStatus) -> int:
        if status.phase == Phase.SUSPENDED:
            e = status.estimate
            self.say(f"suspended: no GPU Job runs. The plan: {e.generated_tokens:,} tokens to generate, "
                     f"{e.generation_hours:.2f} h and {e.gpu_hours:.1f} GPU-hours at {e.tokens_per_second:,.0f} "
                     f"tokens/s, hidden states {e.hidden_state_size or 'none'} (status.estimate in "
                     f"{self.state_file.path}); set spec.suspend: false and rerun to generate" if e else
                     "suspended before the preflight passed; set spec.suspend: false and rerun")
            return exit_codes.OK
        if stopped_by_a_full_volume(status):
            # On one machine nobody else makes room: the run stops here, and a rerun resumes.
            ready = condition(status.conditions, ConditionType.READY)
            component = next(j.component for j in self.jobs.values() if j.outcome == "failed")
            log = self.run_dir / f"{component}.log"
            print(f"draftgen run: {ready.message.split('. Make room')[0]}. Make room and run again: it resumes.\n"
                  f"the end of {log}:\n{log_tail(log)}", file=self.err, flush=True)
            return exit_codes.VOLUME_FULL
        if status.phase == Phase.SUCCEEDED:
            for component in PIPELINE:
                if component not in self.started and (component != Component.EXTRACT or self.spec.extraction.enabled):
                    self.say(f"{component}: done already (stored output), skipped")
            return self.report()
        failed = condition(status.conditions, ConditionType.FAILED)
        # The log to show is the failed child's; a run failed by no child (a server that died
        # before generate started) failed in generation.
        component = next((j.component for j in self.jobs.values() if j.outcome == "failed"), Component.GENERATE)
        log = self.run_dir / f"{component}.log"
        print(f"draftgen run: {component} failed: {failed.message}\nthe end of {log}:\n{log_tail(log)}",
              file=self.err, flush=True)
        bad_config = any(j.failure_reason == Reason.POD_FAILURE_POLICY for j in self.jobs.values())
        return exit_codes.BAD_CONFIG if bad_config else exit_codes.FAILED

    def report(self) -> int:
        argv = [*JOBRUNNER, "stats", "--output-root", str(self.output_root),
                "--png-dir", str(self.output_root / "stats"),
                *(f"--budget={d.name}={d.budget_tokens}" for d in self.spec.datasets)]
        code = subprocess.call(argv, stdin=subprocess.DEVNULL)
        if code != exit_codes.OK:
            print(f"draftgen run: report failed: exit {code} (its output is above)", file=self.err)
            return exit_codes.FAILED
        return exit_codes.OK

    # ---- stopping ------------------------------------------------------------------------------

    def on_signal(self, signum: int, _frame) -> None:
        """First signal: SIGTERM to every running child, which stops cleanly; a second one kills them."""
        if self.interrupted is None:
            self.interrupted = signum
            for job in self.jobs.values():
                job.terminate()
        else:
            for job in self.jobs.values():
                job.kill()

    def stop_everything(self) -> None:
        for job in self.jobs.values():
            job.terminate()
        for job in self.jobs.values():
            job.wait()
        self.server.stop()


def stopped_by_a_full_volume(status: api.DatasetGenerationStatus) -> bool:
    ready = condition(status.conditions, ConditionType.READY)
    return ready is not None and ready.reason == Reason.VOLUME_FULL
