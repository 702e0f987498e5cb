"""Budget decisions (pure)."""

from draftgen_contracts import exit_codes


def test_replica_sample_caps_add_up_to_the_cap():
    from jobrunner.generate import replica_sample_cap

    assert [replica_sample_cap(10, 3, k) for k in range(3)] == [4, 3, 3]
    assert replica_sample_cap(None, 3, 0) is None


def test_exit_code():
    from jobrunner.generate import exit_code

    assert exit_code({"a": "BudgetMet", "b": "Exhausted"}, 0, False, False) == exit_codes.OK
    assert exit_code({"a": "Generating"}, 3, False, False) == exit_codes.RETRY_LATER
    assert exit_code({"a": "BudgetMet"}, 3, False, False) == exit_codes.OK  # the failed rows are not needed
    assert exit_code({"a": "Generating"}, 0, True, False) == exit_codes.OK  # SIGTERM
    assert exit_code({"a": "Generating"}, 0, False, True) == exit_codes.FAILED
