"""Leader election over a coordination.k8s.io Lease, so that of several operator replicas exactly one
reconciles and a standby takes over when it dies.

The rules are client-go's (k8s.io/client-go tools/leaderelection/leaderelection.go, v0.31): a Lease
names its holder; the holder renews it every `retry_s`; a candidate takes it when it has no holder or
when its record has not changed for `duration_s` as measured by the candidate's own clock (never the
renewTime written by another machine, whose clock may be skewed); every write carries the
resourceVersion read, so of two candidates only one wins. A holder that has not renewed for
`renew_deadline_s` gives up (the process exits; each try's API calls are cut to what is left of the
deadline, so a hanging call cannot delay that), and because `renew_deadline_s + retry_s <
duration_s`, it is gone before anyone may take the Lease. A holder stopping cleanly releases the Lease
(no holder), and a standby takes it at its next try.

kopf's own peering (kopf.ClusterKopfPeering) is not used: peers of equal priority all pause, and
unequal priorities need a priority per pod, which a Deployment's identical pods do not have.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from kubernetes import client

log = logging.getLogger("draftgen.lease")


@dataclass(frozen=True)
class Timing:
    duration_s: float = 15.0  # a Lease unchanged this long is free (client-go's default)
    renew_deadline_s: float = 10.0  # a holder that could not renew for this long gives up
    retry_s: float = 2.0  # between two tries, to take or to renew

    def problem(self) -> str | None:
        """Why these timings could let two holders overlap, or None."""
        if min(self.duration_s, self.renew_deadline_s, self.retry_s) <= 0:
            return "every lease duration must be positive"
        if self.renew_deadline_s + self.retry_s >= self.duration_s:
            return (f"the renew deadline ({self.renew_deadline_s:g} s) plus the retry period ({self.retry_s:g} s) "
                    f"must be under the lease duration ({self.duration_s:g} s), so that a holder gives up "
                    "before a standby may take the lease")
        return None


def may_take(holder: str | None, me: str, unchanged_for_s: float, duration_s: float) -> bool:
    """May `me` write itself as the Lease's holder?"""
    return not holder or holder == me or unchanged_for_s >= duration_s


def has_lost(since_renewed_s: float, renew_deadline_s: float) -> bool:
    """Has the holder gone too long without renewing to go on acting as the leader?"""
    return since_renewed_s >= renew_deadline_s


def identity() -> str:
    """This process's name in the Lease: its pod's name (HOSTNAME, which a kubelet sets to it) and a
    part no restart repeats."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def now_micro() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """One candidate for one Lease. `clock` is monotonic seconds (tests pass their own)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, me: str, timing: Timing,
                 clock: Callable[[], float] = time.monotonic):
        self.api = client.CoordinationV1Api(api)
        self.namespace, self.name, self.me, self.timing, self.clock = namespace, name, me, timing, clock
        self.seen: tuple | None = None  # the last record read: (holder, renewTime, resourceVersion)
        self.seen_at = 0.0
        self.renewed_at: float | None = None

    def try_once(self, timeout: float | None = None) -> bool:
        """Take or renew the Lease; True while this candidate holds it. `timeout` bounds each of its
        two API calls (default: the retry period)."""
        timeout = timeout or self.timing.retry_s
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=timeout)
        except client.ApiException as e:
            if e.status != 404:
                log.warning("reading lease %s/%s: %s %s", self.namespace, self.name, e.status, e.reason)
                return False
            return self._write(None, timeout)
        spec = lease.spec
        record = (spec.holder_identity, spec.renew_time, lease.metadata.resource_version)
        if record != self.seen:
            self.seen, self.seen_at = record, self.clock()
        if not may_take(spec.holder_identity, self.me, self.clock() - self.seen_at, self.timing.duration_s):
            return False
        return self._write(lease, timeout)

    def _write(self, lease, timeout: float) -> bool:
        now = now_micro()
        if lease is None:
            body = {"metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(now, acquired=now, transitions=0)}
        else:
            spec = lease.spec
            mine = spec.holder_identity == self.me
            acquired = spec.acquire_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if mine and spec.acquire_time else now
            transitions = (spec.lease_transitions or 0) + (0 if mine or not spec.holder_identity else 1)
            body = {"metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease.metadata.resource_version},
                    "spec": self._spec(now, acquired, transitions)}
        # The lease counts from before the write: a standby times it from when it sees the record,
        # after the write landed, while the answer may come back a time-out later. Counted from the
        # answer, this leader could lead on for up to that long after a standby took over.
        sent_at = self.clock()
        try:
            if lease is None:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
            else:
                self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=timeout)
        except client.ApiException as e:
            if e.status not in (404, 409):  # someone else wrote first: not ours this time
                log.warning("writing lease %s/%s: %s %s", self.namespace, self.name, e.status, e.reason)
            return False
        self.renewed_at = sent_at
        return True

    def _spec(self, now: str, acquired: str, transitions: int) -> dict:
        return {"holderIdentity": self.me, "leaseDurationSeconds": max(1, round(self.timing.duration_s)),
                "acquireTime": acquired, "renewTime": now, "leaseTransitions": transitions}

    def wait_to_lead(self, stop: threading.Event) -> bool:
        """Try until this candidate holds the Lease (True) or `stop` is set (False)."""
        log.info("waiting for lease %s/%s as %s", self.namespace, self.name, self.me)
        while not stop.is_set():
            if self._try_quietly():
                log.info("holds lease %s/%s as %s: leading", self.namespace, self.name, self.me)
                return True
            stop.wait(self.timing.retry_s)
        return False

    def keep(self, on_lost: Callable[[], None], stop: threading.Event) -> threading.Thread:
        """Renew in a thread until `stop`; call `on_lost` once renewing has failed past the deadline
        or someone else holds the Lease."""
        def since() -> float:
            return self.clock() - (self.renewed_at or 0.0)

        def lost(held: bool) -> bool:
            taken = self.seen is not None and self.seen[0] not in (None, "", self.me)
            return (not held and taken) or has_lost(since(), self.timing.renew_deadline_s)

        def renew():
            while not stop.wait(self.timing.retry_s):
                # A hanging API call must not carry the leader past its deadline: each of a try's two
                # calls gets half of what is left of it, so the check below comes by the deadline.
                left = self.timing.renew_deadline_s - since()
                held = left > 0 and self._try_quietly(timeout=max(left / 2, 0.05))
                if stop.is_set():
                    return
                if lost(held):
                    log.error("lost lease %s/%s (last renewed %.1f s ago, holder %s): stopping",
                              self.namespace, self.name, since(), self.seen[0] if self.seen else None)
                    on_lost()
                    return
        thread = threading.Thread(target=renew, name="lease renewer", daemon=True)
        thread.start()
        return thread

    def _try_quietly(self, timeout: float | None = None) -> bool:
        try:
            return self.try_once(timeout)
        except Exception as e:  # the API unreachable, a time-out: one failed try, counted by the deadline
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def release(self) -> None:
        """Hand the Lease back (no holder) if this candidate holds it, so a standby takes it at once."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timing.retry_s)
            if lease.spec.holder_identity != self.me:
                return
            body = {"metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease.metadata.resource_version},
                    "spec": {"leaseDurationSeconds": 1, "renewTime": now_micro(),
                             "leaseTransitions": lease.spec.lease_transitions or 0}}
            self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self.timing.retry_s)
            log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as e:  # the standby then waits out the duration instead
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name,
                        f"{e.status} {e.reason}" if isinstance(e, client.ApiException) else e)


def own_namespace() -> str | None:
    """The namespace of the pod this runs in: POD_NAMESPACE, else the service account's mount."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip()
    except OSError:
        return None
