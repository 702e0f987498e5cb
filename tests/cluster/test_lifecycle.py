"""Ports, dead components and teardown, checked on real processes (etcd alone starts in about a second)."""

from __future__ import annotations

import socket
import sys

import pytest

from draftgen_dev.cluster import binaries
from draftgen_dev.cluster.controlplane import Component, ComponentDied, LocalCluster


def test_a_port_taken_in_between_is_retried_with_another(tmp_path):
    cluster = LocalCluster(tmp_path)
    cluster.logs_dir.mkdir(parents=True)
    etcd = binaries.ensure(binaries.KUBERNETES) / "etcd"
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    ports = iter([taken])

    def build():
        argv, port = cluster._etcd(etcd)
        first = next(ports, None)
        if first is not None:  # the first attempt gets a port someone else holds
            argv = [a.replace(f"127.0.0.1:{port}", f"127.0.0.1:{first}") for a in argv]
            port = first
        return argv, port

    try:
        port = cluster._start_with_port_retry("etcd", build, cluster._etcd_ready)
        assert port != taken and cluster._etcd_ready(port)
    finally:
        cluster.stop()
        blocker.close()
    assert all(c.exit_code() is not None for c in cluster.components)


def test_a_component_that_dies_fails_with_its_log(tmp_path):
    cluster = LocalCluster(tmp_path)
    log = tmp_path / "dier.log"
    dier = Component("dier", [sys.executable, "-c", "print('disk on fire'); raise SystemExit(7)"], log)
    dier.start()
    cluster.components.append(dier)
    dier._proc.wait()
    with pytest.raises(ComponentDied, match="(?s)dier exited with 7.*disk on fire"):
        cluster.check_alive()
