import pytest

from draftgen.policies.job_policy import generation_jobs_finished, jobs_to_create, jobs_to_delete
from draftgen_contracts.states import Component, Stage
from draftgen_dev.builders import JobBuilder


def gen(replica: int, digest: str = "h1") -> JobBuilder:
    return JobBuilder(f"x-gen-r{replica:03d}", Component.GENERATE).config_hash(digest)


MERGED = JobBuilder("x-merge", Component.MERGE).succeeded().state()
EXTRACTED = JobBuilder("x-extract", Component.EXTRACT).succeeded().state()
RUNNING = [gen(0).active().state(), gen(1).active().state()]


@pytest.mark.parametrize("stage, suspended, jobs, digest, doomed", [
    (Stage.MERGING, False, RUNNING, "h1", ["x-gen-r000", "x-gen-r001"]),  # generation over: the GPUs go at once
    (Stage.GENERATING, False, RUNNING, "h1", []),
    (Stage.GENERATING, False, RUNNING, "h2", ["x-gen-r000", "x-gen-r001"]),  # a stale config is replaced
    (Stage.MERGING, True, [MERGED, JobBuilder("x-extract", Component.EXTRACT).active().state()], "h", ["x-extract"]),
    (Stage.MERGING, False, [gen(0).deleting().state()], "h1", []),  # already going
    (Stage.GENERATING, False, [MERGED, EXTRACTED], "h", ["x-extract", "x-merge"]),  # reopened: later output is stale
    (Stage.MERGING, False, [MERGED, EXTRACTED], "h", ["x-extract"]),
])
def test_jobs_to_delete(stage, suspended, jobs, digest, doomed):
    assert jobs_to_delete(stage, suspended, jobs, digest) == doomed


@pytest.mark.parametrize("stage, jobs, wanted", [
    (Stage.GENERATING, [gen(1).active().state()], [(Component.GENERATE, 0)]),
    (Stage.MERGING, [], [(Component.MERGE, 0)]),
    (Stage.MERGING, [gen(0).deleting().state()], []),  # the merge waits until the generation pods are gone
    (Stage.EXTRACTING, [JobBuilder("x-extract", Component.EXTRACT).active().state()], []),
    (Stage.DONE, [], []),
])
def test_jobs_to_create(stage, jobs, wanted):
    assert jobs_to_create("x", stage, 2, jobs) == wanted


@pytest.mark.parametrize("jobs, digest, finished", [
    ([gen(0).succeeded().state(), gen(1).succeeded().state()], "h1", True),
    ([gen(0).succeeded().state()], "h1", False),  # every replica
    ([gen(0).succeeded().state(), gen(1).succeeded().state()], "other", False),  # of the current config
])
def test_generation_finished_needs_every_replica_of_the_current_config(jobs, digest, finished):
    assert generation_jobs_finished(jobs, 2, digest) == finished
