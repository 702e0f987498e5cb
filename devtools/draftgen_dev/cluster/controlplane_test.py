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
