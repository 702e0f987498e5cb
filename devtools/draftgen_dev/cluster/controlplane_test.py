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


def test_a_failed_session_says_the_last_lines_of_each_container_that_failed(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster0")
    cluster.logs_dir.mkdir(parents=True)
    started = [("gen", "u1", "sglang"), ("gen", "u1", "sglang"), ("gen", "u1", "generate"), ("ext", "u2", "extract"),
               ("del", "u3", "merge")]
    (cluster.logs_dir / "local-kubelet.log").write_text("".join(
        f"INFO pod ns/{pod}: started {c} (pid {i}, log pods/{uid}/{c}.log)\n" for i, (pod, uid, c) in enumerate(started))
        + "INFO pod ns/ext: extract exited 1 (log pods/u2/extract.log)\n"
        + "INFO pod ns/gen: generate exited 0 (log pods/u1/generate.log)\n"
        + "INFO pod ns/del: merge exited -15 (log pods/u3/merge.log)\n")  # deleted: killed, not failed
    for uid, name, last in [("u1", "sglang", "OSError: [Errno 98] Address already in use"),
                            ("u2", "extract", "ModuleNotFoundError: No module named 'kubernetes'")]:
        log = cluster.state_dir / "pods" / uid / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(f"line {i}\n" for i in range(20)) + last + "\n")
    assert cluster.failed_containers(lines=2) == (
        "pod ns/gen, container sglang, started 2 times (pods/u1/sglang.log):\n"
        "  | line 19\n  | OSError: [Errno 98] Address already in use\n"
        "pod ns/ext, container extract, exited 1 (pods/u2/extract.log):\n"
        "  | line 19\n  | ModuleNotFoundError: No module named 'kubernetes'")
