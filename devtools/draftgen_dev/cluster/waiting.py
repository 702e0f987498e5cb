"""Waits on a control plane that may be loaded: what is waited for may not exist yet, or exist without
the field asked about (a new CRD has no status until the API server writes its conditions, a moment
after creating it; `kubectl wait --for=condition=Established` on it then fails with
`.status.conditions accessor error`). So a wait asks again until the object exists and has the field,
and a wait that runs out names what it waited for."""

from __future__ import annotations

import time

from kubernetes import client


def wait_until(read, timeout_s: float, what: str, interval_s: float = 0.2):
    """read()'s first truthy answer, asked again on a 404 (not there yet); TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = read()
        except client.ApiException as e:
            if e.status != 404:
                raise
            answer = None
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(interval_s)


def crd_established(api: client.ApiClient, name: str) -> bool:
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(name)
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
