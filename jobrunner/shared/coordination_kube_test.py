from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from jobrunner.shared.coordination_kube import EveryDataset, peers_in_reports


def report(replica: int, replicas: int = 2, **datasets: DatasetProgress) -> ProgressDocument:
    return ProgressDocument(replica=replica, replicas=replicas, updated_at=100.0 + replica, datasets=datasets)


REPORTS = {
    0: report(0, chat=DatasetProgress(completion_tokens=4_000, state="Generating", budget_tokens=10_000)),
    1: report(1, chat=DatasetProgress(completion_tokens=5_100, state="Generating", budget_tokens=10_000, settled=True),
              code=DatasetProgress(completion_tokens=500, state="Exhausted", budget_tokens=900)),
}


def test_peers_are_the_other_replicas_own_reports():
    peers = peers_in_reports(REPORTS, 0, 2)
    assert set(peers) == {"chat", "code"} and set(peers["chat"]) == {1}
    chat = peers["chat"][1]
    assert (chat.completion_tokens, chat.settled, chat.budget_tokens) == (5_100, True, 10_000)
    assert peers["code"][1].state == "Exhausted"


def test_no_reports_no_peers_and_a_report_of_another_number_of_replicas_says_nothing():
    assert peers_in_reports({}, 0, 2) == {}
    assert peers_in_reports({1: report(1, replicas=3, chat=DatasetProgress(completion_tokens=9))}, 0, 2) == {}


def test_a_deleted_generation_stops_every_dataset():
    assert "anything" in EveryDataset()
