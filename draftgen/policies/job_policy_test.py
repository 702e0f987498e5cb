import pytest

from draftgen.policies.job_policy import generation_jobs_finished, jobs_stopped_short, jobs_to_create, jobs_to_delete
from draftgen_contracts.states import Component, DatasetState, Stage
from draftgen_dev.builders import JobBuilder, dataset_progress, progress


def gen(replica: int, digest: str = "h1") -> JobBuilder:
    return JobBuilder(f"x-gen-r{replica:03d}", Component.GENERATE).config_hash(digest).replica(replica)


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


def final(replica: int, *states: DatasetState, finished: bool = True):
    """A replica's last report, its datasets in these states."""
    return progress(replica, 2, finished=finished,
                    **{f"d{i}": dataset_progress(100, state=s) for i, s in enumerate(states)})


DONE = {0: final(0, DatasetState.BUDGET_MET, DatasetState.EXHAUSTED), 1: final(1, DatasetState.BUDGET_MET)}
BOTH = [gen(0).succeeded().state(), gen(1).succeeded().state()]


@pytest.mark.parametrize("jobs, reports, digest, finished", [
    (BOTH, DONE, "h1", True),
    ([gen(0).succeeded().state()], DONE, "h1", False),  # every replica
    (BOTH, DONE, "other", False),  # of the current config
    # a pod stopped by a signal that exited 0 completed its Job: its report says rows are left
    (BOTH, {**DONE, 1: final(1, DatasetState.GENERATING)}, "h1", False),
    (BOTH, {**DONE, 1: final(1, DatasetState.BUDGET_MET, finished=False)}, "h1", False),  # not final yet
    (BOTH, {0: DONE[0]}, "h1", False),  # no report
])
def test_generation_finished_needs_every_replica_of_the_current_config_and_its_final_report(
        jobs, reports, digest, finished):
    assert generation_jobs_finished(jobs, reports, 2, digest) == finished


@pytest.mark.parametrize("reports, short", [
    (DONE, []),
    ({**DONE, 1: final(1, DatasetState.BUDGET_MET, DatasetState.GENERATING)}, ["x-gen-r001"]),
    # the operator may see the Job complete before the report written before it: it waits
    ({**DONE, 1: final(1, DatasetState.GENERATING, finished=False)}, []),
    ({0: DONE[0]}, []),
])
def test_a_job_that_completed_with_rows_left_is_created_again(reports, short):
    assert jobs_stopped_short(BOTH, reports, "h1") == short
    assert jobs_stopped_short(BOTH, reports, "other") == []  # a stale one is replaced anyway
