"""The generation server of a local run: one the user runs (--server-url), or a simulator child."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from draftgen import api, plan

from .local_job import die_with_parent, log_tail, stop
from .paths import JOBRUNNER

SIMULATOR_COMMAND = ["jobrunner", "simulate"]
SERVER_URL_TIMEOUT_S = 60.0  # the simulator binds at once; the readiness wait is generate's own


class ServerFailed(RuntimeError):
    pass


def runs_simulator(spec: api.DatasetGenerationSpec) -> bool:
    """Whether the spec's own server is jobrunner's simulator (the quickstart's way)."""
    return spec.server.command[:2] == SIMULATOR_COMMAND


def simulator_argv(spec: api.DatasetGenerationSpec, model_path: str) -> list[str]:
    """`jobrunner simulate` with the flags the pod's server gets (plan.server_args), on a free loopback
    port; the spec's own server args only when that server is the simulator."""
    extra = spec.server.args if runs_simulator(spec) else []
    return [*JOBRUNNER, "simulate", *plan.server_args(spec, host="127.0.0.1", port=0, model_path=model_path,
                                                      extra=extra)]


class GenerationServer:
    """The URL of the server generation talks to; a simulator is started on first use, by PID."""

    def __init__(self, spec: api.DatasetGenerationSpec, model_path: str, log: Path, url: str | None, say):
        self.spec, self.model_path, self.log, self.given_url, self.say = spec, model_path, log, url, say
        self.proc: subprocess.Popen | None = None
        self.url = url

    def start(self) -> str:
        if self.url:
            return self.url
        if not runs_simulator(self.spec):
            self.say(f"generate: spec.server.command is {self.spec.server.command}, not {SIMULATOR_COMMAND}: "
                     "using the simulator with default flags (pass --server-url for a running SGLang)")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(simulator_argv(self.spec, self.model_path), stdout=f,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=die_with_parent)
        self.url = self._printed_url()
        return self.url

    def _printed_url(self) -> str:
        deadline = time.monotonic() + SERVER_URL_TIMEOUT_S
        while time.monotonic() < deadline:
            first = (self.log.read_text(errors="replace").splitlines() or [""])[0]
            if first.startswith("http://"):
                return first.strip()
            self.raise_if_died()
            time.sleep(0.05)
        raise ServerFailed(f"the simulator printed no URL in {SERVER_URL_TIMEOUT_S:.0f} s:\n{log_tail(self.log)}")

    def raise_if_died(self) -> None:
        """A simulator that died fails generation now, not after generate's retries run out."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerFailed(f"the simulator exited with {self.proc.returncode}; the end of {self.log}:\n"
                               f"{log_tail(self.log)}")

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
            self.url = self.given_url
