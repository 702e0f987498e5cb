"""Process supervision: one Job of the plan as local processes, retried as Kubernetes would retry it.

A LocalJob runs one process at a time (a pod), each in its own session so a terminal's Ctrl-C
reaches `draftgen run` alone, which forwards it. When a process exits, the retry policy (the Job's
backoffLimit and podFailurePolicy, draftgen.policies.retry_policy) says whether the Job succeeded,
failed, or runs a new process, which resumes from the stored output. `state()` is what the
reconcile sees, the same JobState the operator reads off a Job.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path

from draftgen.observed import JobState
from draftgen.policies.retry_policy import after_exit
from draftgen_contracts import exit_codes
from draftgen_contracts.timestamps import utc_now_iso

from .pod_process import PodProcess

LOG_TAIL_LINES = 20
STOP_GRACE_S = 30.0


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In a child, before it runs: SIGTERM when `draftgen run` dies, however it dies (even SIGKILL),
    so no orphan keeps writing what the next run resumes. Linux only, as the whole local executor."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop(proc: subprocess.Popen, timeout_s: float = STOP_GRACE_S) -> None:
    """Stop a child by its PID: SIGTERM, then SIGKILL if it outlives the timeout."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class LocalJob:
    def __init__(self, name: str, component: str, config_hash: str | None, log: Path, say):
        self.name, self.component, self.config_hash = name, component, config_hash
        self.log, self.say = log, say
        self.process: PodProcess | None = None  # what each of its pods runs; set before start()
        self.backoff_limit = exit_codes.BACKOFF_LIMITS[component]
        self.proc: subprocess.Popen | None = None
        self.failed_pods = 0
        self.last_exit_code: int | None = None
        self.outcome = "running"  # running, succeeded, failed
        self.failure_reason = ""
        self.failure_message = ""
        self.failed_at = ""
        self.deleting = False

    def start(self) -> LocalJob:
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(self.process.argv, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
                                         env={**os.environ, **self.process.env, "PYTHONUNBUFFERED": "1"})
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def poll(self) -> None:
        """Judge a process that exited; start the next one when the Job retries."""
        if self.outcome != "running" or self.proc is None or self.running():
            return
        self.last_exit_code = self.proc.returncode
        if self.deleting:
            return
        decided = after_exit(self.component, self.last_exit_code, self.failed_pods, self.backoff_limit)
        if decided.outcome == "restart":
            self.failed_pods += 1
            self.say(f"{self.component}: exit {self.last_exit_code}; restart {self.failed_pods} of "
                     f"{self.backoff_limit} (the Job's backoffLimit), resuming from the stored output")
            self.start()
        else:
            self.outcome, self.failure_reason, self.failure_message = decided.outcome, decided.reason, decided.message
            self.failed_at = utc_now_iso() if decided.outcome == "failed" else ""

    def fail(self, reason: str, message: str) -> None:
        """Fail the Job for a reason outside its process (its server died): as a pod whose sidecar failed."""
        self.terminate()
        self.outcome, self.failure_reason, self.failure_message = "failed", reason, message

    def terminate(self) -> None:
        """SIGTERM to the running process (it stops cleanly: generate aborts what is in flight and syncs)."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.running():
            self.proc.kill()

    def wait(self, timeout_s: float = STOP_GRACE_S) -> None:
        if self.proc is not None:
            stop(self.proc, timeout_s)

    def delete(self) -> None:
        self.deleting = True
        self.terminate()

    def gone(self) -> bool:
        """A deleted Job whose process has exited: the world no longer has it."""
        return self.deleting and not self.running()

    def state(self) -> JobState:
        return JobState(name=self.name, component=self.component, config_hash=self.config_hash,
                        active=1 if self.running() else 0, succeeded=self.outcome == "succeeded",
                        failed=self.outcome == "failed", failure_reason=self.failure_reason,
                        failure_message=self.failure_message, failed_at=self.failed_at, deleting=self.deleting)
