"""What a failed test session keeps of the local control plane (no control plane started here)."""

from draftgen_dev.cluster.controlplane import KEPT_CONTAINER_LOG_BYTES, LocalCluster


def test_kept_logs_hold_the_components_logs_and_the_end_of_every_containers_log(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster0")
    cluster.logs_dir.mkdir(parents=True)
    (cluster.logs_dir / "kube-apiserver.log").write_text("apiserver\n")
    server_log = cluster.state_dir / "pods" / "uid-1" / "sglang.log"
    server_log.parent.mkdir(parents=True)
    server_log.write_bytes(b"x" * KEPT_CONTAINER_LOG_BYTES + b"OSError: [Errno 98] Address already in use\n")
    kept = cluster.keep_logs(tmp_path / "kept")
    assert (kept / "kube-apiserver.log").read_text() == "apiserver\n"
    tail = (kept / "pods" / "uid-1" / "sglang.log").read_bytes()
    assert len(tail) == KEPT_CONTAINER_LOG_BYTES and tail.endswith(b"Address already in use\n")


def test_a_failed_session_says_the_last_lines_of_each_container_started_more_than_once(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster0")
    cluster.logs_dir.mkdir(parents=True)
    (cluster.logs_dir / "local-kubelet.log").write_text("".join(
        f"INFO pod ns/{pod}: started {c} (pid {i}, log pods/{uid}/{c}.log)\n"
        for i, (pod, uid, c) in enumerate([("gen", "u1", "sglang"), ("gen", "u1", "sglang"), ("gen", "u1", "generate"),
                                           ("prep", "u2", "preflight")])))
    crashed = cluster.state_dir / "pods" / "u1" / "sglang.log"
    crashed.parent.mkdir(parents=True)
    crashed.write_text("".join(f"line {i}\n" for i in range(20)) + "OSError: [Errno 98] Address already in use\n")
    said = cluster.restarted_containers(lines=2)
    assert said == ("pod ns/gen, container sglang, started 2 times (pods/u1/sglang.log):\n"
                    "  | line 19\n  | OSError: [Errno 98] Address already in use")
