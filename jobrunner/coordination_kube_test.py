from jobrunner.coordination_kube import tokens_elsewhere

STATUS = {"replicas": [{"index": 0, "reportTime": 100.0}, {"index": 1, "reportTime": 101.0}],
          "datasets": [{"name": "chat", "tokens": 10_000}, {"name": "code", "tokens": 500}]}


def test_subtracts_own_tokens_as_of_the_folded_report_not_as_of_now():
    own = {95.0: {"chat": 3_000}, 100.0: {"chat": 5_000, "code": 500}, 105.0: {"chat": 8_000, "code": 900}}
    assert tokens_elsewhere(STATUS, 0, own) == {"chat": 5_000, "code": 0}


def test_before_any_report_was_folded_everything_is_elsewhere():
    assert tokens_elsewhere({"datasets": STATUS["datasets"]}, 0, {}) == {"chat": 10_000, "code": 500}


def test_a_forgotten_report_errs_low():
    assert tokens_elsewhere(STATUS, 1, {200.0: {"chat": 9_000}}) == {"chat": 1_000, "code": 500}


def test_a_restarted_replica_subtracts_its_predecessors_last_report():
    # what _remember_previous_report seeds: the report the status still folds
    assert tokens_elsewhere(STATUS, 0, {100.0: {"chat": 4_000, "code": 500}}) == {"chat": 6_000, "code": 0}
