"""The Kubernetes side of coordination (jobrunner.coordination.Coordinator) for generation pods.

A replica publishes its progress into its own report ConfigMap (the only objects its
ServiceAccount may write), and learns from its DatasetGeneration's status, which the operator
alone writes, which datasets are done over all replicas and how many tokens the others have.

The status says which of our reports its totals include (`status.replicas[].reportTime`), so
`tokens_elsewhere` is a dataset's total minus our own tokens *as of that report*: exact, however
far our count has moved since. Reads are rate-limited to one GET per `min_poll_s`; an API error
keeps the last known view (generation never stops because the API server blinked).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from kubernetes import client, config

from draftgen_contracts import names
from draftgen_contracts.progress import ProgressDocument, parse_progress
from draftgen_contracts.states import DATASET_DONE

log = logging.getLogger("jobrunner.coordination")

REMEMBERED_REPORTS = 64


def load_kube_config() -> None:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


def tokens_elsewhere(status: dict, replica: int, own_tokens_at: dict[float, dict[str, int]]) -> dict[str, int]:
    """Per dataset, the status total minus this replica's tokens in the report the total includes.
    A report we do not remember counts as our latest one (tokens only grow, so this errs low: the
    replica relies a little longer on the operator's stop, and never stops early)."""
    folded = next((r for r in status.get("replicas") or [] if r.get("index") == replica), None)
    if folded is None or folded.get("reportTime") is None:
        own: dict[str, int] = {}
    else:
        own = own_tokens_at.get(folded["reportTime"]) or (list(own_tokens_at.values())[-1] if own_tokens_at else {})
    return {d["name"]: max(0, int(d.get("tokens", 0)) - own.get(d["name"], 0)) for d in status.get("datasets") or []}


class KubeCoordinator:
    def __init__(self, name: str, namespace: str, report: str, replica: int, min_poll_s: float = 1.0):
        load_kube_config()
        self.name, self.namespace, self.report, self.replica = name, namespace, report, replica
        self.core = client.CoreV1Api()
        self.custom = client.CustomObjectsApi()
        self.min_poll_s = min_poll_s
        self._own_tokens_at: OrderedDict[float, dict[str, int]] = OrderedDict()
        self._status: dict = {}
        self._polled_at = float("-inf")
        self._remember_previous_report()

    def _remember_previous_report(self) -> None:
        """A restarted replica (a new pod, after a suspend or a budget raise) resumes its output, and
        the status may still count the report its predecessor published last: remember that one."""
        try:
            data = self.core.read_namespaced_config_map(self.report, self.namespace, _request_timeout=10).data or {}
        except Exception as e:  # none yet, or unreadable: then the status holds nothing of ours
            log.info("no previous report for %s: %s", self.report, e)
            return
        previous = parse_progress(data.get(names.REPORT_KEY))
        if previous is not None:
            self._remember(previous)

    def _remember(self, progress: ProgressDocument) -> None:
        self._own_tokens_at[progress.updated_at] = progress.tokens()
        while len(self._own_tokens_at) > REMEMBERED_REPORTS:
            self._own_tokens_at.popitem(last=False)

    def publish(self, progress: ProgressDocument) -> None:
        self.core.patch_namespaced_config_map(self.report, self.namespace,
                                              {"data": {names.REPORT_KEY: progress.to_json()}}, _request_timeout=10)
        self._remember(progress)

    def _current_status(self) -> dict:
        if time.monotonic() - self._polled_at >= self.min_poll_s:
            try:
                obj = self.custom.get_namespaced_custom_object(
                    names.GROUP, names.VERSION, self.namespace, names.PLURAL, self.name, _request_timeout=10)
                self._status = obj.get("status") or {}
                self._polled_at = time.monotonic()
            except Exception as e:  # keep the last view; the next poll retries
                log.warning("could not read DatasetGeneration %s/%s: %s", self.namespace, self.name, e)
        return self._status

    def stopped_datasets(self) -> set[str]:
        return {d["name"] for d in self._current_status().get("datasets") or [] if d.get("state") in DATASET_DONE}

    def tokens_elsewhere(self) -> dict[str, int]:
        return tokens_elsewhere(self._current_status(), self.replica, self._own_tokens_at)
