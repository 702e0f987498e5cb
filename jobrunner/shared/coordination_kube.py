"""The Kubernetes side of coordination (jobrunner.shared.coordination.Coordinator) for generation pods.

A replica publishes its progress into its own report ConfigMap (the only objects its
ServiceAccount may write) and reads the other replicas' reports from theirs (tokens, state,
settled, the budget they were reported under, per dataset): so the replicas share every budget, and
end when every budget is met, with or without the operator (docs/operator.md#an-operator-outage).
From its DatasetGeneration's status, which the operator alone writes, it learns which datasets the
operator declared done (a suspend, a deleted object). Reads are rate-limited to one round of GETs
per `min_poll_s`; an API error keeps the last known view (generation never stops because the API
server blinked).
"""

from __future__ import annotations

import logging
import time

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from draftgen_contracts import names
from draftgen_contracts.progress import DatasetProgress, ProgressDocument, parse_progress
from draftgen_contracts.states import DATASET_DONE

log = logging.getLogger("jobrunner.shared.coordination")


def load_kube_config() -> None:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


class EveryDataset(frozenset):
    """The stopped set of a DatasetGeneration that was deleted: every dataset is done."""

    def __contains__(self, name: object) -> bool:
        return True


def peers_in_reports(reports: dict[int, ProgressDocument], replica: int,
                     replicas: int) -> dict[str, dict[int, DatasetProgress]]:
    """Per dataset, the other replicas' last reports; one written for another number of replicas (before
    a resize) says nothing of this run's shares."""
    found: dict[str, dict[int, DatasetProgress]] = {}
    for r, report in reports.items():
        if r != replica and report.replica == r and report.replicas == replicas:
            for name, progress in report.datasets.items():
                found.setdefault(name, {})[r] = progress
    return found


class KubeCoordinator:
    def __init__(self, name: str, namespace: str, replica: int, replicas: int, min_poll_s: float = 1.0):
        load_kube_config()
        self.name, self.namespace, self.replica, self.replicas = name, namespace, replica, replicas
        self.report = names.report_name(name, replica)
        self._peer_reports: dict[int, ProgressDocument] = {}
        self._peers_read_at = float("-inf")
        self.core = client.CoreV1Api()
        self.custom = client.CustomObjectsApi()
        self.min_poll_s = min_poll_s
        self._status: dict = {}
        self._gone = False  # the DatasetGeneration was deleted: nothing is left to generate for
        self._polled_at = float("-inf")
        # What this replica's predecessor (a pod before a restart, a suspend or a budget change)
        # published last: a settled dataset stays settled.
        self._previous = self.own_now()

    def own_now(self) -> ProgressDocument | None:
        """This replica's report as the API server has it; None when there is none (404). Any other
        error raises: taken for "none", it would drop the predecessor's settled word, and a settled
        share would be generated twice."""
        try:
            data = self.core.read_namespaced_config_map(self.report, self.namespace, _request_timeout=10).data or {}
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return parse_progress(data.get(names.REPORT_KEY))

    def publish(self, progress: ProgressDocument) -> None:
        self.core.patch_namespaced_config_map(self.report, self.namespace,
                                              {"data": {names.REPORT_KEY: progress.to_json()}}, _request_timeout=10)

    def previous_own(self) -> ProgressDocument | None:
        return self._previous

    def _current_status(self) -> dict:
        if time.monotonic() - self._polled_at >= self.min_poll_s:
            try:
                obj = self.custom.get_namespaced_custom_object(
                    names.GROUP, names.VERSION, self.namespace, names.PLURAL, self.name, _request_timeout=10)
                self._status = obj.get("status") or {}
                self._polled_at = time.monotonic()
            except ApiException as e:
                if e.status == 404:  # deleted: a replica waiting on its peers would wait forever
                    self._gone = True
                log.warning("could not read DatasetGeneration %s/%s: %s", self.namespace, self.name, e.reason)
            except Exception as e:  # keep the last view; the next poll retries
                log.warning("could not read DatasetGeneration %s/%s: %s", self.namespace, self.name, e)
        return self._status

    def stopped_datasets(self) -> set[str]:
        if self._gone:
            return EveryDataset()
        return {d["name"] for d in self._current_status().get("datasets") or [] if d.get("state") in DATASET_DONE}

    def peers(self) -> dict[str, dict[int, DatasetProgress]]:
        return peers_in_reports(self._read_peer_reports(), self.replica, self.replicas)

    def _read_peer_reports(self) -> dict[int, ProgressDocument]:
        if time.monotonic() - self._peers_read_at >= self.min_poll_s:
            self._peers_read_at = time.monotonic()
            for r in range(self.replicas):
                if r != self.replica:
                    try:
                        data = self.core.read_namespaced_config_map(names.report_name(self.name, r), self.namespace,
                                                                    _request_timeout=10).data or {}
                    except Exception as e:  # keep its last report; the next round reads it again
                        log.warning("could not read replica %d's report: %s", r, e)
                        continue
                    if (report := parse_progress(data.get(names.REPORT_KEY))) is not None:
                        self._peer_reports[r] = report
        return self._peer_reports
