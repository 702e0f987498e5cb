"""One real SGLang server process on the CPU: started on 127.0.0.1 with the tiny model, ready when
`/ready` answers 200, stopped by its process group (SGLang's scheduler and detokenizer are children
of the launcher)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from .install import PLATFORM_NAME, ensure_installed

# What the CPU needs: SGLang's pure-torch attention, a KV pool sized for a laptop, no CUDA device.
# --sleep-on-idle: an idle scheduler otherwise spins a whole core (measured: 100 % of one of two cores).
CPU_ARGS = ("--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "16384",
            "--sleep-on-idle")
# The platform plugin, no CUDA device, and one OpenMP thread: torch's default of one thread per core
# makes two servers on two cores spin against each other (bench/real_sglang_threads.py; docs/benchmarks.md
# has the numbers).
CPU_ENV = {"SGLANG_PLATFORM": PLATFORM_NAME, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
STARTUP_TIMEOUT_S = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HTTPEndpoint:
    """Blocking GET and POST on `base_url`, answering (status, body) whatever the status."""

    base_url: str

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def generation_tokens(self) -> float:
        """Every token of the requests the server has answered since it started, by its own count:
        the tokenizer manager adds each finished request's completion_tokens
        (`observe_one_finished_request`, python/sglang/srt/managers/tokenizer_manager.py), so it is
        what the answers say, not what the scheduler made (/metrics, with --enable-metrics)."""
        found = self._counter("sglang:generation_tokens_total")
        if found is None:
            raise RuntimeError("no sglang:generation_tokens_total in /metrics: is --enable-metrics set?")
        return found

    def retracted_requests(self) -> float:
        """Requests the scheduler has taken back to its waiting queue for want of KV cache (the
        counter appears at the first one)."""
        return self._counter("sglang:num_retracted_requests_total") or 0.0

    def _counter(self, name: str) -> float | None:
        status, body = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}: {body[:500]!r}")
        found = re.search(rb"^" + re.escape(name.encode()) + rb"\{[^}]*\} ([0-9.e+]+)$", body, re.M)
        return float(found.group(1)) if found else None

    def post(self, path: str, body: dict) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


class RealSGLang(HTTPEndpoint):
    """`RealSGLang(model_dir, log_path, *args).start()`; `.base_url`, `.get(path)`, `.stop()`."""

    def __init__(self, model_dir: str | os.PathLike, log_path: Path, *args: str, port: int | None = None):
        self.model_dir = str(model_dir)
        self.log_path = Path(log_path)
        self.args = args
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [str(ensure_installed()), "-m", "sglang.launch_server", "--model-path", self.model_dir,
                "--host", "127.0.0.1", "--port", str(self.port), *CPU_ARGS, *self.args]

    def start(self, env_overrides: dict[str, str | None] | None = None) -> "RealSGLang":
        """`env_overrides`: variables to set, or with None to unset, over CPU_ENV (benchmarks)."""
        self.launch(env_overrides)
        self.wait_ready()
        return self

    def launch(self, env_overrides: dict[str, str | None] | None = None) -> "RealSGLang":
        """The process started, not waited for (a rank > 0 of a group never answers /ready)."""
        env = {**os.environ, **CPU_ENV, "PYTHONUNBUFFERED": "1"}
        for key, value in (env_overrides or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        command = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"SGLang exited {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if self.get("/ready")[0] == 200:
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"SGLang not ready after {timeout_s:.0f}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU of the server and every process under it (scheduler, detokenizer), so far."""
        import psutil

        root = psutil.Process(self.proc.pid)
        total = 0.0
        for p in [root, *root.children(recursive=True)]:
            try:
                times = p.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        return total

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after the grace period."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        # The children may outlive the launcher by a moment; the group is killed for good.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
