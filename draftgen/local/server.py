"""The generation server of a local run: one the user runs (--server-url), or a simulator child: the
generation pod's own server sidecar when that is the simulator, else the simulator with the pod's
flags but not the spec's own server args (they are another server's)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from draftgen import api, plan

from .local_job import die_with_parent, log_tail, stop
from .paths import JOBRUNNER
from .pod_process import PodProcess

SIMULATOR_COMMAND = ["jobrunner", "simulate"]
SERVER_URL_TIMEOUT_S = 60.0  # the simulator binds at once; the readiness wait is generate's own


class ServerFailed(RuntimeError):
    pass


def runs_simulator(spec: api.DatasetGenerationSpec) -> bool:
    """Whether the spec's own server is jobrunner's simulator (the quickstart's way)."""
    return spec.server.command[:2] == SIMULATOR_COMMAND


def stand_in_argv(spec: api.DatasetGenerationSpec, model_path: str) -> list[str]:
    """`jobrunner simulate` standing in for a server that is not the simulator: the flags the pod's
    server gets (plan.server_args) without the spec's own args, on a free loopback port."""
    return [*JOBRUNNER, "simulate", *plan.server_args(spec, host="127.0.0.1", port=0, model_path=model_path,
                                                      extra=[])]


class GenerationServer:
    """The URL of the server generation talks to; a simulator is started on first use, by PID."""

    def __init__(self, spec: api.DatasetGenerationSpec, model_path: str, log: Path, url: str | None, say):
        self.spec, self.model_path, self.log, self.given_url, self.say = spec, model_path, log, url, say
        self.proc: subprocess.Popen | None = None
        self.url = url

    def start(self, sidecar: PodProcess | None) -> str:
        """The URL generate talks to. `sidecar`: the generation pod's server as a local process, when
        that server runs here (the simulator); it gets a free port."""
        if self.url:
            return self.url
        if sidecar is not None:
            argv, env = sidecar.with_option("--port", "0").argv, sidecar.env
        else:
            self.say(f"generate: spec.server.command is {self.spec.server.command}, not {SIMULATOR_COMMAND}: "
                     "using the simulator with default flags (pass --server-url for a running SGLang)")
            argv, env = stand_in_argv(self.spec, self.model_path), {}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=die_with_parent,
                                         env={**os.environ, **env})
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
