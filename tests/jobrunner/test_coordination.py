"""The file-based coordinator: replicas see each other's reports and the stopped set, and a
restarted replica its own last report."""

from draftgen_dev.builders import dataset_progress, progress
from jobrunner.shared.coordination import FileCoordinator


def test_replicas_see_each_others_reports_and_stops(tmp_path):
    r0, r1 = FileCoordinator(tmp_path, 0), FileCoordinator(tmp_path, 1)
    assert r0.peers() == {} and r0.stopped_datasets() == set()
    r0.publish(progress(0, replicas=2, a=10))
    r1.publish(progress(1, replicas=2, a=dataset_progress(5, settled=True), b=2))
    assert {name: {r: e.completion_tokens for r, e in by.items()} for name, by in r0.peers().items()} == {
        "a": {1: 5}, "b": {1: 2}}
    assert r0.peers()["a"][1].settled
    assert {name: list(by) for name, by in r1.peers().items()} == {"a": [0]}
    r0.declare_stopped({"a"})
    r0.declare_stopped({"b"})
    assert r1.stopped_datasets() == {"a", "b"}
    assert sorted(r0.all_progress()) == [0, 1]


def test_a_restarted_replica_reads_what_its_predecessor_published_last(tmp_path):
    assert FileCoordinator(tmp_path, 0).previous_own() is None
    FileCoordinator(tmp_path, 0).publish(progress(0, replicas=2, a=dataset_progress(7, settled=True)))
    previous = FileCoordinator(tmp_path, 0).previous_own()
    assert previous is not None and previous.datasets["a"].settled
