from jobrunner.coordination_kube import EveryDataset, peers_in_status

STATUS = {"replicas": [
    {"index": 0, "reportTime": 100.0, "datasets": [{"name": "chat", "tokens": 4_000, "state": "Generating",
                                                    "budgetTokens": 10_000}]},
    {"index": 1, "reportTime": 101.0, "datasets": [
        {"name": "chat", "tokens": 5_100, "state": "Generating", "budgetTokens": 10_000, "settled": True},
        {"name": "code", "tokens": 500, "state": "Exhausted", "budgetTokens": 900}]},
]}


def test_peers_are_the_other_replicas_folded_entries():
    peers = peers_in_status(STATUS, 0)
    assert set(peers) == {"chat", "code"} and set(peers["chat"]) == {1}
    chat = peers["chat"][1]
    assert (chat.completion_tokens, chat.settled, chat.budget_tokens) == (5_100, True, 10_000)
    assert peers["code"][1].state == "Exhausted"


def test_a_status_without_replicas_has_no_peers():
    assert peers_in_status({}, 0) == {} and peers_in_status({"replicas": [{"index": 0}]}, 1) == {}


def test_a_deleted_generation_stops_every_dataset():
    assert "anything" in EveryDataset()
