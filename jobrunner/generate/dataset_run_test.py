from draftgen_contracts.budget_shares import Spend
from draftgen_dev.builders import dataset_progress
from jobrunner.generate.dataset_run import peer_spend, replica_sample_cap, surplus


def test_surplus_trims_the_newest_while_the_older_still_cover_the_need():
    finals = {1: 3000.0, 2: 2000.0, 3: 1000.0, 4: 1000.0}  # oldest first
    assert surplus(finals, 5000) == [4, 3]
    assert surplus(finals, 6500) == []
    assert surplus(finals, 0) == [4, 3, 2, 1]  # nothing needed: all of it is surplus
    assert surplus({}, 100) == []


def test_a_peers_settled_word_counts_only_under_the_same_budget():
    settled = dataset_progress(900, settled=True, budget_tokens=1000)
    assert peer_spend(settled, 1000) == Spend(900, settled=True)
    assert peer_spend(settled, 3000) == Spend(900)  # the budget was raised since: it owes a new share
    exhausted = dataset_progress(400, state="Exhausted", budget_tokens=1000)
    assert peer_spend(exhausted, 1000) == Spend(400, settled=True, exhausted=True)


def test_sample_cap_shares_add_up():
    assert sum(replica_sample_cap(17, 4, r) for r in range(4)) == 17 and replica_sample_cap(None, 4, 0) is None
