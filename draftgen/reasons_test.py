from draftgen import reasons
from draftgen.reasons import Explanation, Reason


def test_a_reason_is_its_string_on_the_wire():
    assert Reason.OUTPUT_IN_USE == "OutputInUse" and f"{Reason.BUDGETS_MET}" == "BudgetsMet"
    assert ("Warning", *reasons.REOPENED) == ("Warning", "Reopened", "a dataset is below its budget again; "
                                                                     "generation resumes from its output")


def test_every_reason_is_its_own_camelcase_name():
    for reason in Reason:
        assert reason.value == "".join(w.capitalize() for w in reason.name.split("_"))


def test_the_templates_name_what_they_are_about():
    assert reasons.queued("x-merge", "", "t0") == (
        Reason.QUEUED, "its Job x-merge is suspended since t0 until a queue admits it")
    assert reasons.queued("x-merge", "cpu", "t0", "no quota").message == (
        "its Job x-merge is queued in Kueue LocalQueue cpu since t0: no quota")
    assert reasons.job_failed(Reason.MERGE_JOB_FAILED, "x-merge", "") == (
        Reason.MERGE_JOB_FAILED, "Job x-merge failed (no reason given)")
    assert reasons.suspended_jobs_deleted(["a", "b"]).message == "deleted a, b; data kept"


def test_pod_errors_go_beside_a_failure_only_when_there_are_some():
    failure = Explanation(Reason.JOB_FAILED, "Job j failed (x)")
    assert reasons.with_pod_errors(failure, []) is failure
    assert reasons.with_pod_errors(failure, ["replica 0: boom", "replica 1: bang"]) == (
        Reason.JOB_FAILED, "Job j failed (x); replica 0: boom; replica 1: bang")
