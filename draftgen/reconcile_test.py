"""One reconcile, as a pure function, in the situations the operator meets."""

from dataclasses import replace

from draftgen import plan
from draftgen.api import DatasetGenerationStatus
from draftgen.conditions import ConditionType
from draftgen.observed import PodState, World
from draftgen.reasons import Reason
from draftgen.reconcile import decide
from draftgen_contracts.names import CONFIG_HASH_ANNOTATION
from draftgen_contracts.preflight_report import DatasetReport, ModelReport, PreflightReport, Problem
from draftgen_contracts.states import Component, DatasetState, Phase, Stage
from draftgen_dev.builders import JobBuilder, SpecBuilder, dataset_progress, generation_jobs, progress

SPEC = SpecBuilder().replicas(2).dataset("a", budget=100).spec()
SETTINGS = plan.OperatorSettings()
NOW = "2026-12-01T00:00:00Z"
DIGEST = plan.config_digest(plan.config_object("x", "ns", SPEC, SETTINGS))


def run(spec=SPEC, previous=None, retry="", **world):
    """One reconcile of an object past its preflight, unless `previous` says otherwise."""
    world.setdefault("existing", frozenset())
    world.setdefault("output_owner", "x")
    previous = previous or DatasetGenerationStatus(stage=Stage.GENERATING)
    return decide("x", "ns", 1, spec, previous, World(**world), SETTINGS, NOW, retry)


FOUND = PreflightReport(model=ModelReport(architecture="LlamaForCausalLM", hidden_size=64, num_layers=8,
                                          vocab_size=512, context_length=2048),
                        datasets=[DatasetReport(name="a", rows=10, usable_rows=9, prompt_tokens=400,
                                                skipped_by_reason={"bad_json": 1}, expected_response_tokens=1800)])


def test_a_new_object_runs_its_preflight_before_asking_for_any_gpu():
    d = run(previous=DatasetGenerationStatus())
    assert names(d.create, "Job") == ["x-preflight"]
    [job] = [o for o in d.create if o["kind"] == "Job"]
    assert "nvidia.com/gpu" not in str(job["spec"]["template"]["spec"]["containers"][0]["resources"])
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert d.status.phase == Phase.PENDING and d.status.stage == Stage.PREFLIGHT and ready.reason == Reason.PREFLIGHT


def test_a_passed_preflight_starts_generation_and_its_findings_go_to_status():
    preflight = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).succeeded().state()
    d = run(previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": preflight}, preflight=FOUND)
    assert d.status.stage == Stage.GENERATING and names(d.create, "Job") == ["x-gen-r000", "x-gen-r001"]
    assert ("Normal", Reason.PREFLIGHT_PASSED) in [(t, r) for t, r, _ in d.events]
    assert d.status.preflight.model.hidden_size == 64 and d.status.preflight.datasets[0].usable_rows == 9
    assert d.status.estimate.rate_basis == "expected" and d.status.estimate.generation_ends is None
    assert {c.type: c.status for c in d.status.conditions}[ConditionType.BUDGETS_REACHABLE] == "True"


def test_a_failed_preflight_fails_the_run_naming_what_it_found():
    failed = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).failed(Reason.POD_FAILURE_POLICY).state()
    found = FOUND.model_copy(update={"problem": Problem(where="/models/tiny/config.json", message="not found")})
    d = run(previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": failed}, preflight=found)
    failure = {c.type: c for c in d.status.conditions}[ConditionType.FAILED]
    assert d.status.phase == Phase.FAILED and failure.reason == Reason.PREFLIGHT_FAILED
    assert "preflight: /models/tiny/config.json: not found" in failure.message and not names(d.create, "Job")


def test_a_preflight_of_an_older_spec_is_run_again_and_does_not_fail_the_new_one():
    stale = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash("old-digest").failed(Reason.POD_FAILURE_POLICY).state()
    d = run(previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": stale})
    assert d.delete_jobs == ["x-preflight"] and d.status.phase == Phase.PENDING


def test_a_budget_out_of_reach_of_its_rows_is_a_warning_not_a_failure():
    short = FOUND.model_copy(update={"datasets": [FOUND.datasets[0].model_copy(update={"expected_response_tokens": 60})]})
    d = run(jobs=gen_jobs(active=1), preflight=short)
    reach = {c.type: c for c in d.status.conditions}[ConditionType.BUDGETS_REACHABLE]
    assert reach.status == "False" and reach.reason == Reason.BUDGET_OUT_OF_REACH
    assert reach.message == ("a: 9 usable rows x about 7 tokens (prior) may give about 60 tokens of its 100: "
                             "it will be Exhausted at about 60 tokens")
    assert ("Warning", Reason.BUDGET_OUT_OF_REACH) in [(t, r) for t, r, _ in d.events]
    assert d.status.phase != Phase.FAILED


def names(objs, kind=None):
    return sorted(o["metadata"]["name"] for o in objs if kind is None or o["kind"] == kind)


def report(replica, tokens, state=DatasetState.GENERATING):
    return progress(replica, replicas=2, updated_at=1.0, a=dataset_progress(tokens, state=state))


def gen_jobs(**kw):
    return generation_jobs("x", 2, DIGEST, **kw)


def test_past_its_preflight_an_object_gets_its_setup_and_one_generation_job_per_replica_and_waits():
    d = run()
    assert names(d.create, "Job") == ["x-gen-r000", "x-gen-r001"]
    assert {"ServiceAccount", "Role", "RoleBinding", "ConfigMap"} <= {o["kind"] for o in d.create}
    # The server keys come just before the pods that read them, and not again once the Jobs exist.
    kinds = [o["kind"] for o in d.create]
    assert names(d.create, "Secret") == ["x-server-keys"] and kinds.index("Secret") < kinds.index("Job")
    assert names(d.create, "NetworkPolicy") == ["x-generation"] and kinds.index("NetworkPolicy") < kinds.index("Job")
    assert not names(run(jobs=gen_jobs(active=1)).create, "Secret")
    assert d.status.phase == Phase.PENDING and d.status.estimate.response_tokens == 100
    assert {c.type: c.reason for c in d.status.conditions}[ConditionType.PROGRESSING] == Reason.WAITING_FOR_SERVERS


def test_budget_met_over_replicas_deletes_generation_jobs_and_says_why():
    d = run(jobs=gen_jobs(active=1), reports={0: report(0, 60), 1: report(1, 50)})
    assert d.delete_jobs == ["x-gen-r000", "x-gen-r001"]
    assert ("Normal", Reason.BUDGETS_MET) in [(t, r) for t, r, _ in d.events]
    assert d.status.phase == Phase.MERGING and d.status.datasets[0].state == DatasetState.BUDGET_MET
    assert {c.type: c.reason for c in d.status.conditions}[ConditionType.PROGRESSING] == Reason.BUDGETS_MET
    assert not names(d.create, "Job")  # the merge waits until the generation pods are gone


def test_a_replica_whose_job_completed_with_rows_left_is_created_again_and_nothing_is_exhausted():
    """A pod stopped by a drain that exited 0 (generate before it exited 143 on SIGTERM) completed its
    Job: its final report has rows left, so the Job goes (and comes back), said in a Warning; the
    short dataset is not Exhausted and the run does not merge."""
    jobs = gen_jobs(succeeded=True)
    done = progress(0, replicas=2, updated_at=1.0, finished=True, a=dataset_progress(30, state=DatasetState.EXHAUSTED))
    stopped = progress(1, replicas=2, updated_at=1.0, finished=True, a=dataset_progress(20))
    d = run(jobs=jobs, reports={0: done, 1: stopped})
    assert d.delete_jobs == ["x-gen-r001"]
    assert [r for t, r, _ in d.events if t == "Warning"] == [Reason.STOPPED_SHORT]
    assert d.status.phase == Phase.GENERATING and d.status.datasets[0].state == DatasetState.GENERATING
    # Its report not final yet (the operator saw the Job before the report): nothing goes, nothing ends.
    waiting = run(jobs=jobs, reports={0: done, 1: stopped.model_copy(update={"finished": False})})
    assert waiting.delete_jobs == [] and waiting.status.datasets[0].state == DatasetState.GENERATING
    # Both final and done: the dataset is Exhausted and generation ends.
    ended = run(jobs=jobs, reports={0: done, 1: done.model_copy(update={"replica": 1})})
    assert ended.status.datasets[0].state == DatasetState.EXHAUSTED and ended.status.phase == Phase.MERGING


def test_suspend_deletes_running_jobs_and_creates_none():
    spec = SPEC.model_copy(update={"suspend": True})
    d = run(spec=spec, jobs=gen_jobs(active=1), reports={0: report(0, 10)})
    assert d.delete_jobs == ["x-gen-r000", "x-gen-r001"] and not names(d.create, "Job")
    assert d.status.phase == Phase.SUSPENDED


def test_a_run_created_suspended_gets_its_plan_from_the_preflight_and_no_gpu_job():
    spec = SPEC.model_copy(update={"suspend": True})
    d = run(spec=spec, previous=DatasetGenerationStatus())
    assert names(d.create, "Job") == ["x-preflight"] and d.status.phase == Phase.SUSPENDED
    running = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).active().state()
    assert run(spec=spec, previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT),
               jobs={"x-preflight": running}).delete_jobs == []  # the preflight runs on while suspended
    passed = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).succeeded().state()
    d = run(spec=spec, previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": passed},
            preflight=FOUND)
    assert not names(d.create, "Job") and not names(d.create, "Secret") and d.status.phase == Phase.SUSPENDED
    assert d.status.stage == Stage.GENERATING and d.status.preflight.datasets[0].usable_rows == 9
    assert d.status.estimate.response_tokens == 100 and d.status.estimate.generated_tokens == 100
    resumed = run(previous=d.status, jobs={"x-preflight": passed}, preflight=FOUND)
    assert names(resumed.create, "Job") == ["x-gen-r000", "x-gen-r001"]  # the passed preflight is not run again


def test_a_preflight_that_fails_while_suspended_fails_the_run():
    spec = SPEC.model_copy(update={"suspend": True})
    failed = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).failed(Reason.POD_FAILURE_POLICY).state()
    d = run(spec=spec, previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": failed})
    assert d.status.phase == Phase.FAILED


def test_a_missing_claim_is_a_condition_and_no_job_is_created():
    d = run(missing_claims=("data",))
    assert not names(d.create, "Job") and d.status.phase == Phase.PENDING
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert ready.reason == Reason.VOLUME_MISSING and "PersistentVolumeClaim data not found" in ready.message


def test_a_failed_job_fails_the_object_with_the_pods_own_words_and_it_stays_failed():
    jobs = gen_jobs(failed=True, failure_reason=Reason.POD_FAILURE_POLICY, failure_message="exit code 2")
    d = run(jobs=jobs, reports={0: progress(0, replicas=2, error="tokenizer_path /models/m: no such directory")})
    failed = {c.type: c for c in d.status.conditions}[ConditionType.FAILED]
    assert d.status.phase == Phase.FAILED and failed.reason == Reason.GENERATION_JOB_FAILED
    assert "exit code 2" in failed.message and "no such directory" in failed.message
    again = run(previous=d.status, jobs={})
    assert again.status.phase == Phase.FAILED and not names(again.create, "Job")


def test_a_new_retry_value_runs_a_failed_run_again_as_it_is_and_only_once():
    """A transient failure (a node lost six times over) leaves nothing to fix: a new value of the
    annotation draftgen.io/retry deletes the failed Jobs, which are created again and resume; the
    spec, and so what the run generates, is unchanged. The same value again does nothing."""
    jobs = gen_jobs(failed=True, failure_reason=Reason.BACKOFF_LIMIT_EXCEEDED)
    failed = run(jobs=jobs, retry="1")  # the annotation was there before the failure: it asks nothing
    assert failed.status.phase == Phase.FAILED and failed.status.retry == "1"
    assert run(previous=failed.status, jobs=jobs, retry="1").status.phase == Phase.FAILED
    retried = run(previous=failed.status, jobs=jobs, retry="2")
    assert retried.delete_jobs == ["x-gen-r000", "x-gen-r001"] and retried.status.retry == "2"
    assert retried.status.phase != Phase.FAILED
    assert [(t, r) for t, r, _ in retried.events if r == Reason.RETRIED] == [("Normal", Reason.RETRIED)]
    # The Jobs gone, they are created again with the same config.
    again = run(previous=retried.status, jobs={}, retry="2")
    assert names(again.create, "Job") == ["x-gen-r000", "x-gen-r001"] and not again.delete_jobs
    assert all(j["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == DIGEST for j in again.create if j["kind"] == "Job")


def test_nothing_changed_means_the_same_status():
    first = run(jobs=gen_jobs(active=1), reports={0: report(0, 10)})
    second = run(previous=first.status, jobs=gen_jobs(active=1), reports={0: report(0, 10)},
                 existing=frozenset((o["kind"], o["metadata"]["name"]) for o in first.create))
    assert second.status == first.status and not second.create and not second.delete_jobs


def test_a_new_object_claims_its_output_folder_before_any_job():
    d = run(output_owner=None)
    [lock] = [o for o in d.create if o["metadata"]["labels"].get("draftgen.io/output-lock")]
    assert lock["data"] == {"owner": "x", "folder": "data:/x"} and not names(d.create, "Job")
    assert lock["metadata"]["name"] == plan.output_lock(
        "y", SPEC.model_copy(update={"output": SPEC.output.model_copy(update={"path": "./x/"})}))["metadata"]["name"]


def test_a_folder_owned_by_another_object_runs_nothing_and_says_whose_it_is():
    d = run(output_owner="first", jobs=gen_jobs(active=1))
    assert not names(d.create, "Job") and not d.delete_jobs  # not even its own Jobs' data is touched
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert d.status.phase == Phase.PENDING and ready.reason == Reason.OUTPUT_IN_USE
    assert "DatasetGeneration first" in ready.message
    assert [r for _, r, _ in d.events] == [Reason.OUTPUT_IN_USE]
    again = run(previous=d.status, output_owner="first")
    assert not again.events  # said once


def test_waiting_for_servers_says_how_many_pods_exist_are_scheduled_and_ready():
    pods = (PodState("x-gen-r000-a", 0, scheduled=True),)
    d = run(jobs=gen_jobs(active=1), pods=pods)
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert ready.reason == Reason.WAITING_FOR_SERVERS
    assert ready.message.startswith("1 of 2 generation pods exist, 1 scheduled, 0 ready")
    assert d.status.ready_replicas == 0


def test_half_the_replicas_refused_by_a_quota_is_said_on_the_object_and_the_run_goes_on():
    pods = (PodState("x-gen-r000-a", 0, scheduled=True, ready=True),)
    refused = {"x-gen-r001": 'pods "x-gen-r001-b" is forbidden: exceeded quota: gpus'}
    d = run(jobs=gen_jobs(active=1), pods=pods, refused_pods=refused, reports={0: report(0, 10)})
    capacity = {c.type: c for c in d.status.conditions}[ConditionType.CAPACITY]
    assert d.status.phase == Phase.GENERATING and d.status.ready_replicas == 1
    assert capacity.status == "False" and capacity.reason == Reason.PODS_REFUSED
    assert capacity.message.startswith("1 of 2 generation replicas ready; replica 1: PodsRefused: pods")
    assert ("Warning", Reason.PODS_REFUSED) in [(t, r) for t, r, _ in d.events]
    again = run(previous=d.status, jobs=gen_jobs(active=1), pods=pods, refused_pods=refused,
                reports={0: report(0, 10)})
    assert not again.events  # said once


def test_pods_refused_by_pod_security_fail_the_run_quoting_the_admission():
    refused = {"x-gen-r000": 'pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged'}
    d = run(jobs=gen_jobs(active=0), pods=(), refused_pods=refused)
    failed = {c.type: c for c in d.status.conditions}[ConditionType.FAILED]
    assert d.status.phase == Phase.FAILED and failed.reason == Reason.PODS_REFUSED and "PodSecurity" in failed.message


def test_a_merge_job_held_in_a_queue_says_which_queue_since_when_and_kueues_words():
    merge = JobBuilder("x-merge", Component.MERGE).queued("cpu-batch", since="2026-12-01T10:00:00Z").state()
    previous = DatasetGenerationStatus(stage=Stage.MERGING, phase=Phase.MERGING)
    met = {0: report(0, 60, DatasetState.BUDGET_MET), 1: report(1, 50, DatasetState.BUDGET_MET)}
    d = run(previous=previous, jobs={"x-merge": merge}, reports=met,
            queue_waits={"x-merge": "insufficient unused quota for cpu in flavor default, 2 more needed"})
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert d.status.phase == Phase.MERGING and ready.reason == Reason.QUEUED
    assert ready.message == ("its Job x-merge is queued in Kueue LocalQueue cpu-batch since 2026-12-01T10:00:00Z: "
                             "insufficient unused quota for cpu in flavor default, 2 more needed")


def test_a_preflight_whose_pods_pod_security_refuses_fails_the_run_quoting_it():
    psa = 'pods "x-preflight-abc" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
    job = JobBuilder("x-preflight", Component.PREFLIGHT).config_hash(DIGEST).state()
    d = run(previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": job},
            refused_pods={"x-preflight": psa}, pods=())
    failure = {c.type: c for c in d.status.conditions}[ConditionType.FAILED]
    assert d.status.phase == Phase.FAILED and failure.reason == Reason.PODS_REFUSED and "violates PodSecurity" in failure.message
    quota = 'pods "x-preflight-abc" is forbidden: exceeded quota: cpu'
    d = run(previous=DatasetGenerationStatus(stage=Stage.PREFLIGHT), jobs={"x-preflight": job},
            refused_pods={"x-preflight": quota}, pods=())
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert d.status.phase == Phase.PENDING and ready.reason == Reason.PODS_REFUSED and "exceeded quota" in ready.message


def test_a_full_volume_stops_its_stage_said_on_the_object_once_and_its_job_is_tried_again_after_the_wait():
    from draftgen.observed import JobState
    from draftgen.policies.retry_policy import after_exit
    from draftgen_contracts import exit_codes
    from draftgen_contracts.extraction_progress import ExtractionProgress

    stopped = after_exit("extract", exit_codes.VOLUME_FULL, 0, 3)
    job = JobState(name="x-extract", component=Component.EXTRACT, failed=True, failure_reason=stopped.reason,
                   failure_message=stopped.message, failed_at=NOW)
    previous = DatasetGenerationStatus(stage=Stage.EXTRACTING, phase=Phase.EXTRACTING)
    said = ExtractionProgress(updated_at=0, volume_full="volume full at /data/x/hidden-states: 1.0 MB free; ...")
    met = {0: report(0, 60, DatasetState.BUDGET_MET), 1: report(1, 50, DatasetState.BUDGET_MET)}
    spec = SPEC.model_copy(update={"extraction": SPEC.extraction.model_copy(update={"enabled": True})})
    d = run(spec, previous=previous, jobs={"x-extract": job}, reports=met, extraction=said)
    ready = {c.type: c for c in d.status.conditions}[ConditionType.READY]
    assert d.status.phase == Phase.EXTRACTING and ready.reason == Reason.VOLUME_FULL
    assert "PersistentVolumeClaim data) is full: Job x-extract stopped" in ready.message
    assert "volume full at /data/x/hidden-states" in ready.message
    assert [e[1] for e in d.events] == [Reason.VOLUME_FULL] and not d.delete_jobs and not names(d.create, "Job")
    again = run(spec, previous=d.status, jobs={"x-extract": job}, reports=met, extraction=said)
    assert not again.events  # said once
    later = decide("x", "ns", 1, spec, d.status, World(jobs={"x-extract": job}, reports=met, existing=frozenset(),
                                                       output_owner="x", extraction=said),
                   SETTINGS, "2026-12-01T00:05:00Z")
    assert later.delete_jobs == ["x-extract"]
    gone = run(spec, previous=later.status, jobs={}, reports=met)
    assert names(gone.create, "Job") == ["x-extract"]  # the stage's Job again: it resumes


def test_replicas_that_cannot_cut_at_the_budget_say_so_in_a_condition_and_a_warning_once():
    cut_off = "cutting at the budget is off: the server refuses /abort_request without its admin key"
    reports = {r: progress(r, replicas=2, a=10).model_copy(update={"notices": [cut_off]}) for r in (0, 1)}
    d = run(jobs=gen_jobs(active=2), reports=reports)
    at_budget = {c.type: c for c in d.status.conditions}[ConditionType.AT_BUDGET]
    assert at_budget.status == "False" and at_budget.reason == Reason.CUT_OFF
    assert at_budget.message == f"replicas 0, 1: {cut_off}"
    assert ("Warning", Reason.CUT_OFF, at_budget.message) in d.events
    again = run(previous=d.status, jobs=gen_jobs(active=2), reports=reports)
    assert not [e for e in again.events if e[1] == Reason.CUT_OFF]  # said once
    assert ConditionType.AT_BUDGET not in {c.type for c in run(jobs=gen_jobs(active=2)).status.conditions}


GROUPS = SpecBuilder().replicas(2).server(nodesPerReplica=2, tensorParallelSize=16).dataset("a", budget=100).spec()
GROUP_DIGEST = plan.config_digest(plan.config_object("x", "ns", GROUPS, SETTINGS))


def test_a_failed_rank_group_is_started_again_whole_counted_and_said_until_its_restarts_run_out():
    jobs = generation_jobs("x", 2, GROUP_DIGEST, active=2)
    jobs["x-gen-r001"] = replace(jobs["x-gen-r001"], active=0, failed=True, failure_reason="BackoffLimitExceeded",
                                 failure_message="Job has reached the specified backoff limit")
    # Listed out of rank order: status.replicas[].nodes is by rank.
    pods = (PodState("x-gen-r000-1-b", 0, scheduled=True, ready=True, node="gpu-2", rank=1),
            PodState("x-gen-r000-0-a", 0, scheduled=True, ready=True, node="gpu-1", rank=0))
    d = run(spec=GROUPS, jobs=jobs, pods=pods)
    assert d.delete_jobs == ["x-gen-r001"] and d.status.phase != Phase.FAILED
    assert [(e[0], e[1]) for e in d.events] == [("Warning", Reason.GROUP_RESTARTED)]
    assert "replica 1: a rank of its 2-node group failed" in d.events[0][2] and "restart 1 of 6" in d.events[0][2]
    replicas = {r.index: r for r in d.status.replicas}
    assert replicas[1].group_restarts == 1 and replicas[0].nodes == ["gpu-1", "gpu-2"]
    # Seen again while it is deleted: not counted twice.
    deleting = {**jobs, "x-gen-r001": replace(jobs["x-gen-r001"], deleting=True)}
    again = run(spec=GROUPS, previous=d.status, jobs=deleting, pods=pods)
    assert not again.delete_jobs and {r.index: r.group_restarts for r in again.status.replicas}[1] == 1
    # Its restarts spent, the next failure fails the run.
    spent = d.status.model_copy(update={"replicas": [r.model_copy(update={"group_restarts": 6}) if r.index == 1 else r
                                                     for r in d.status.replicas]})
    last = run(spec=GROUPS, previous=spent, jobs=jobs, pods=pods)
    assert last.status.phase == Phase.FAILED and not last.delete_jobs


def test_a_rank_group_that_says_its_configuration_is_wrong_fails_the_run_at_once():
    jobs = generation_jobs("x", 2, GROUP_DIGEST, failed=True, failure_reason=Reason.POD_FAILURE_POLICY,
                           failure_message="Container generate for pod ns/x-gen-r000-0-a failed with exit code 2 "
                                           "matching FailJob rule at index 0")
    d = run(spec=GROUPS, jobs=jobs)
    assert d.status.phase == Phase.FAILED and not d.delete_jobs


def test_a_rank_group_serves_once_every_rank_is_ready():
    half = (PodState("x-gen-r000-0-a", 0, scheduled=True, ready=True, node="gpu-1"),
            PodState("x-gen-r000-1-b", 0, scheduled=True, node="gpu-2"))
    d = run(spec=GROUPS, jobs=generation_jobs("x", 2, GROUP_DIGEST, active=2), pods=half)
    assert d.status.ready_replicas == 0
    whole = (half[0], PodState("x-gen-r000-1-b", 0, scheduled=True, ready=True, node="gpu-2"))
    assert run(spec=GROUPS, jobs=generation_jobs("x", 2, GROUP_DIGEST, active=2), pods=whole).status.ready_replicas == 1


def test_a_rank_groups_run_gets_its_headless_service_with_its_first_generation_jobs():
    d = run(spec=GROUPS, jobs={})
    assert names(d.create, "Service") == ["x-ranks"] and names(d.create, "Job") == ["x-gen-r000", "x-gen-r001"]
    assert not names(run(jobs={}).create, "Service")
