"""The file-based coordinator: replicas see each other's tokens and the stopped set."""

from draftgen_dev.builders import progress
from jobrunner.coordination import FileCoordinator


def test_replicas_see_each_others_tokens_and_stops(tmp_path):
    r0, r1 = FileCoordinator(tmp_path, 0), FileCoordinator(tmp_path, 1)
    assert r0.tokens_elsewhere() == {} and r0.stopped_datasets() == set()
    r0.publish(progress(0, replicas=2, a=10))
    r1.publish(progress(1, replicas=2, a=5, b=2))
    assert r0.tokens_elsewhere() == {"a": 5, "b": 2}
    assert r1.tokens_elsewhere() == {"a": 10}
    r0.declare_stopped({"a"})
    r0.declare_stopped({"b"})
    assert r1.stopped_datasets() == {"a", "b"}
    assert sorted(r0.all_progress()) == [0, 1]
