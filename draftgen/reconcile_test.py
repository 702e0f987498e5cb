"""One reconcile, as a pure function, in the situations the operator meets."""

from draftgen import plan
from draftgen.api import DatasetGenerationStatus
from draftgen.observed import World
from draftgen.reconcile import decide
from draftgen_dev.builders import SpecBuilder, dataset_progress, generation_jobs, progress

SPEC = SpecBuilder().replicas(2).dataset("a", budget=100).spec()
SETTINGS = plan.OperatorSettings()
DIGEST = plan.config_digest(plan.config_object("x", "ns", SPEC))


def run(spec=SPEC, previous=None, **world):
    world.setdefault("existing", frozenset())
    return decide("x", "ns", 1, spec, previous or DatasetGenerationStatus(), World(**world), SETTINGS, "t")


def names(objs, kind=None):
    return sorted(o["metadata"]["name"] for o in objs if kind is None or o["kind"] == kind)


def report(replica, tokens, state="Generating"):
    return progress(replica, replicas=2, updated_at=1.0, a=dataset_progress(tokens, state=state))


def gen_jobs(**kw):
    return generation_jobs("x", 2, DIGEST, **kw)


def test_a_new_object_gets_its_setup_and_one_generation_job_per_replica_and_waits_for_servers():
    d = run()
    assert names(d.create, "Job") == ["x-gen-r000", "x-gen-r001"]
    assert {"ServiceAccount", "Role", "RoleBinding", "ConfigMap"} <= {o["kind"] for o in d.create}
    assert d.status.phase == "Pending" and d.status.capacity.tokens == 100
    assert {c.type: c.reason for c in d.status.conditions}["Progressing"] == "WaitingForServers"


def test_budget_met_over_replicas_deletes_generation_jobs_and_says_why():
    d = run(jobs=gen_jobs(active=1), reports={0: report(0, 60), 1: report(1, 50)})
    assert d.delete_jobs == ["x-gen-r000", "x-gen-r001"]
    assert ("Normal", "BudgetsMet") in [(t, r) for t, r, _ in d.events]
    assert d.status.phase == "Merging" and d.status.datasets[0].state == "BudgetMet"
    assert {c.type: c.reason for c in d.status.conditions}["Progressing"] == "BudgetsMet"
    assert not names(d.create, "Job")  # the merge waits until the generation pods are gone


def test_suspend_deletes_running_jobs_and_creates_none():
    spec = SPEC.model_copy(update={"suspend": True})
    d = run(spec=spec, jobs=gen_jobs(active=1), reports={0: report(0, 10)})
    assert d.delete_jobs == ["x-gen-r000", "x-gen-r001"] and not names(d.create, "Job")
    assert d.status.phase == "Suspended"


def test_a_missing_claim_is_a_condition_and_no_job_is_created():
    d = run(missing_claims=("data",))
    assert not names(d.create, "Job") and d.status.phase == "Pending"
    ready = {c.type: c for c in d.status.conditions}["Ready"]
    assert ready.reason == "VolumeMissing" and "PersistentVolumeClaim data not found" in ready.message


def test_a_failed_job_fails_the_object_with_the_pods_own_words_and_it_stays_failed():
    jobs = gen_jobs(failed=True, failure_reason="PodFailurePolicy", failure_message="exit code 2")
    d = run(jobs=jobs, reports={0: progress(0, replicas=2, error="tokenizer_path /models/m: no such directory")})
    failed = {c.type: c for c in d.status.conditions}["Failed"]
    assert d.status.phase == "Failed" and failed.reason == "GenerationJobFailed"
    assert "exit code 2" in failed.message and "no such directory" in failed.message
    again = run(previous=d.status, jobs={})
    assert again.status.phase == "Failed" and not names(again.create, "Job")


def test_nothing_changed_means_the_same_status():
    first = run(jobs=gen_jobs(active=1), reports={0: report(0, 10)})
    second = run(previous=first.status, jobs=gen_jobs(active=1), reports={0: report(0, 10)},
                 existing=frozenset((o["kind"], o["metadata"]["name"]) for o in first.create))
    assert second.status == first.status and not second.create and not second.delete_jobs
