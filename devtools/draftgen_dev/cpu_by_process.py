"""Where a command's CPU goes, by kind of process: `python -m draftgen_dev.cpu_by_process -- make test`.

Every half second it reads each process's CPU time (user + system, /proc/PID/stat) and its command
line, and keeps the last reading of each; at the end it sums them by kind (the control plane's
components, the operator, each jobrunner command, the real SGLang, the simulator, the pytest
workers, ...) and prints a table with each kind's share of the machine's CPU over the wall time
(docs/testing.md). A process that lives less than half a second is missed, and each is counted up
to its last reading: the table is a floor, close for the long-lived and the seconds-long processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (  # (what the command line holds, the kind's name), the first match wins
    ("kube-apiserver", "kube-apiserver"), ("kube-controller-manager", "kube-controller-manager"),
    ("kube-scheduler", "kube-scheduler"), ("/etcd", "etcd"), ("/kwok", "kwok"), ("kueue", "kueue"),
    ("draftgen_dev.cluster.kubelet", "local kubelet"), ("sglang.launch_server", "real SGLang server"),
    ("sglang", "real SGLang (other)"), ("draftgen_operator", "operator"), ("draftgen operator", "operator"),
    ("exec(eval(sys.stdin", "pytest workers (execnet)"), ("pytest", "pytest"),
    ("helm", "helm"), ("kubectl", "kubectl"), ("buildah", "buildah"), ("/go", "go"),
)


def kind_of(argv: list[str]) -> str:
    """`jobrunner COMMAND` (however it is started: its script, `-m jobrunner.cli`, inside an image), else
    the first of KINDS the command line holds, else the program's name."""
    at = next((i for i, a in enumerate(argv) if a.endswith("/jobrunner") or a in ("jobrunner", "jobrunner.cli")), None)
    if at is not None:
        command = next((w for w in argv[at + 1:] if not w.startswith("-")), "?")
        return "simulator (jobrunner simulate)" if command == "simulate" else f"jobrunner {command}"
    line = " ".join(argv)
    for word, kind in KINDS:
        if word in line:
            return kind
    return Path(argv[0]).name if argv else "?"


def cpu_seconds(pid: str) -> tuple[str, float] | None:
    """(the process's key: its PID and start time, so a reused PID is another process; its CPU seconds)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return f"{pid}:{fields[19]}", (int(fields[11]) + int(fields[12])) / TICK  # starttime; utime + stime


def command_line(pid: str) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def sample(last: dict[str, tuple[str, float]]) -> None:
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        read = cpu_seconds(pid)
        if read is None:
            continue
        key, used = read
        known = last.get(key)
        last[key] = (kind_at_sighting(known[0] if known else None, command_line(pid)), used)


def kind_at_sighting(known: str | None, argv: list[str]) -> str:
    """A process's kind, told again at every sighting: a child seen between fork and exec still shows
    its parent's command line (the API server was once counted as a pytest worker); an exiting one
    shows none, and keeps the kind it had."""
    return kind_of(argv) if argv or known is None else known


def table(last: dict[str, tuple[str, float]], wall_s: float) -> str:
    by_kind: dict[str, float] = defaultdict(float)
    for kind, used in last.values():
        by_kind[kind] += used
    machine = wall_s * os.cpu_count()
    rows = [f"{'kind of process':34s} {'CPU s':>8s} {'of the machine':>15s}"]
    for kind, used in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        if used >= 1:
            rows.append(f"{kind:34s} {used:8.0f} {100 * used / machine:14.1f}%")
    rows.append(f"{'all':34s} {sum(by_kind.values()):8.0f} {100 * sum(by_kind.values()) / machine:14.1f}%"
                f"   (wall {wall_s:.0f} s, {os.cpu_count()} cores)")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1:] if "--" in argv else argv
    before: dict[str, tuple[str, float]] = {}
    sample(before)
    started = time.monotonic()
    proc = subprocess.Popen(command)
    last: dict[str, tuple[str, float]] = {}
    while proc.poll() is None:
        sample(last)
        time.sleep(0.5)
    for key in before.keys() & last.keys():  # what ran before the command is not its
        del last[key]
    print(table(last, time.monotonic() - started), file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
