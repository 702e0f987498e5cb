from draftgen.observed import JobState
from draftgen.policies.job_policy import generation_jobs_finished, jobs_to_create, jobs_to_delete

GEN0 = JobState("x-gen-r000", "generate", config_hash="h1", active=1)
GEN1 = JobState("x-gen-r001", "generate", config_hash="h1", active=1)


def test_generation_jobs_go_as_soon_as_generation_is_over():
    assert jobs_to_delete("Merging", False, [GEN0, GEN1], "h1") == ["x-gen-r000", "x-gen-r001"]
    assert jobs_to_delete("Generating", False, [GEN0, GEN1], "h1") == []


def test_stale_config_replaces_generation_jobs():
    assert jobs_to_delete("Generating", False, [GEN0, GEN1], "h2") == ["x-gen-r000", "x-gen-r001"]


def test_suspend_deletes_unfinished_jobs_only():
    merged = JobState("x-merge", "merge", succeeded=True)
    assert jobs_to_delete("Merging", True, [merged, JobState("x-extract", "extract", active=1)], "h") == ["x-extract"]


def test_jobs_already_deleting_are_left_alone():
    assert jobs_to_delete("Merging", False, [JobState("x-gen-r000", "generate", deleting=True)], "h") == []


def test_reopened_generation_discards_merge_and_extract():
    jobs = [JobState("x-merge", "merge", succeeded=True), JobState("x-extract", "extract", succeeded=True)]
    assert jobs_to_delete("Generating", False, jobs, "h") == ["x-extract", "x-merge"]
    assert jobs_to_delete("Merging", False, jobs, "h") == ["x-extract"]


def test_create_only_what_the_stage_needs_and_is_missing():
    assert jobs_to_create("x", "Generating", 2, [GEN1]) == [("generate", 0)]
    assert jobs_to_create("x", "Merging", 2, []) == [("merge", 0)]
    assert jobs_to_create("x", "Extracting", 2, [JobState("x-extract", "extract", active=1)]) == []
    assert jobs_to_create("x", "Done", 2, []) == []


def test_merge_waits_until_generation_pods_are_gone():
    assert jobs_to_create("x", "Merging", 2, [JobState("x-gen-r000", "generate", deleting=True)]) == []


def test_generation_finished_needs_every_replica_of_the_current_config():
    ok = [JobState("x-gen-r000", "generate", "h", succeeded=True), JobState("x-gen-r001", "generate", "h", succeeded=True)]
    assert generation_jobs_finished(ok, 2, "h")
    assert not generation_jobs_finished(ok[:1], 2, "h")
    assert not generation_jobs_finished(ok, 2, "other")
