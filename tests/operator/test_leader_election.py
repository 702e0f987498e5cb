"""The leader Lease (draftgen_operator/lease.py) on the real API server: one holder at a time,
a standby taking it only once it is left unrenewed for its duration, or at once when released."""

from __future__ import annotations

import threading
import time

from kubernetes import client

from draftgen_operator.lease import Elector, Timing

FAST = Timing(duration_s=3.0, renew_deadline_s=2.0, retry_s=0.5)


def electors(k8s, namespace, *names):
    return [Elector(k8s, namespace, "draftgen-operator", name, FAST) for name in names]


def holder(k8s, namespace) -> str | None:
    return client.CoordinationV1Api(k8s).read_namespaced_lease("draftgen-operator", namespace).spec.holder_identity


def test_one_holder_and_a_standby_takes_the_lease_only_once_it_is_left_unrenewed(k8s, namespace):
    a, b = electors(k8s, namespace, "a", "b")
    assert a.try_once() and not b.try_once()
    lost, stop_a = threading.Event(), threading.Event()
    a.keep(on_lost=lost.set, stop=stop_a)
    until = time.monotonic() + 2 * FAST.duration_s  # twice the duration: renewed, the lease stays a's
    while time.monotonic() < until:
        assert not b.try_once()
        time.sleep(FAST.retry_s)
    assert holder(k8s, namespace) == "a"

    stop_a.set()  # a stops renewing (as if it hung): b takes it after the duration, not before
    stopped = time.monotonic()
    assert b.wait_to_lead(threading.Event())
    waited = time.monotonic() - stopped
    assert FAST.duration_s - FAST.retry_s <= waited <= FAST.duration_s + 3 * FAST.retry_s, waited
    assert holder(k8s, namespace) == "b"
    lease = client.CoordinationV1Api(k8s).read_namespaced_lease("draftgen-operator", namespace)
    assert lease.spec.lease_transitions == 1


def test_a_holder_that_finds_the_lease_taken_says_it_lost_it(k8s, namespace):
    skew = [0.0]
    a = Elector(k8s, namespace, "draftgen-operator", "a", FAST)
    b = Elector(k8s, namespace, "draftgen-operator", "b", FAST, clock=lambda: time.monotonic() + skew[0])
    assert a.try_once() and not b.try_once()
    skew[0] = 60.0  # to b, a's record has not changed for a minute (a hung, or b's clock jumped): b takes it
    assert b.try_once()
    lost = threading.Event()
    a.keep(on_lost=lost.set, stop=threading.Event())
    assert lost.wait(FAST.retry_s * 4)


def test_a_released_lease_is_taken_by_the_standby_at_its_next_try(k8s, namespace):
    a, b = electors(k8s, namespace, "a", "b")
    assert a.try_once() and not b.try_once()
    a.release()
    assert holder(k8s, namespace) is None
    started = time.monotonic()
    assert b.wait_to_lead(threading.Event())
    assert time.monotonic() - started < FAST.retry_s * 2
    assert not a.try_once()  # a's record of the lease is fresh: b holds it
