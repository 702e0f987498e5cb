"""Startup and readiness probes, run as a kubelet runs them (HTTP GET or exec)."""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.request


def probe_ok(container, probe, pod_ip: str) -> bool:
    if probe.http_get:
        port = probe.http_get.port
        if isinstance(port, str) and not port.isdigit():
            port = next(p.container_port for p in container.ports or [] if p.name == port)
        host = probe.http_get.host or pod_ip
        try:
            with urllib.request.urlopen(f"http://{host}:{port}{probe.http_get.path or '/'}", timeout=2) as r:
                return 200 <= r.status < 400
        except OSError:
            return False
    if probe._exec:
        return subprocess.run(probe._exec.command, capture_output=True).returncode == 0
    return True


def wait_started(container, proc: subprocess.Popen, pod_ip: str, terminating: threading.Event) -> bool:
    """Whether the container passed its startup (or readiness) probe within the probe's budget."""
    probe = container.startup_probe or container.readiness_probe
    if probe is None:
        return True
    deadline = time.monotonic() + (probe.initial_delay_seconds or 0) + \
        (probe.period_seconds or 10) * (probe.failure_threshold or 3)
    while time.monotonic() < deadline and not terminating.is_set():
        if proc.poll() is not None:
            return False
        if probe_ok(container, probe, pod_ip):
            return True
        time.sleep(min(0.2, probe.period_seconds or 1))
    return False
