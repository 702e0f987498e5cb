import pytest
from kubernetes.client.exceptions import ApiException

from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from jobrunner.shared import coordination_kube
from jobrunner.shared.coordination_kube import EveryDataset, KubeCoordinator, peers_in_reports


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


def test_only_a_404_means_no_previous_report(monkeypatch):
    """Any other error taken for "none" would drop the predecessor's settled word: it raises, and the
    pod fails and is retried."""
    class Core:
        def __init__(self, error):
            self.error = error

        def read_namespaced_config_map(self, *args, **kwargs):
            raise self.error
    monkeypatch.setattr(coordination_kube, "load_kube_config", lambda: None)
    monkeypatch.setattr(coordination_kube.client, "CoreV1Api", lambda: Core(ApiException(status=404)))
    assert KubeCoordinator("x", "ns", 0, 2).previous_own() is None
    for error in (ApiException(status=500, reason="etcd timeout"), ApiException(status=403)):
        monkeypatch.setattr(coordination_kube.client, "CoreV1Api", lambda error=error: Core(error))
        with pytest.raises(ApiException):
            KubeCoordinator("x", "ns", 0, 2)
