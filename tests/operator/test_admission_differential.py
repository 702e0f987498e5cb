"""The two executors of admission held to one verdict on generated manifests: the real API server
(the CRD's schema and CEL rules, strict field validation, a server-side dry run) and `draftgen run`'s
check (pydantic and draftgen.admission). Each manifest is a mutation of the quickstart or the Kimi
example (tests/admission_mutations.py); both must accept it, or both refuse it naming a common field.
Seeded; hypothesis shrinks a disagreement to a minimal manifest. `make test SLOW=1` runs 10x more."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes import client

from draftgen.local.spec_file import SpecError, parse_object
from draftgen_contracts import names
from tests.admission_mutations import mutated_manifests

EXAMPLES = 2000


def examples(request) -> int:
    return EXAMPLES * (10 if request.config.getoption("--slow") else 1)


UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


def server_verdict(custom: client.CustomObjectsApi, namespace: str, manifest: dict) -> set[str] | None:
    """None when the API server admits the manifest, else the fields its refusal names."""
    try:
        custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest,
                                               dry_run="All", field_validation="Strict")
        return None
    except client.ApiException as e:
        if e.status not in (400, 422):
            raise
        body = json.loads(e.body)
    causes = (body.get("details") or {}).get("causes") or []
    fields = {c["field"] for c in causes if c.get("field")}
    fields |= set(UNKNOWN_FIELD.findall(body.get("message", "")))
    return fields or {body.get("message", "")}


def local_verdict(manifest: dict) -> set[str] | None:
    """None when `draftgen run` accepts the manifest, else the fields its refusal names."""
    try:
        parse_object(manifest)
        return None
    except SpecError as e:
        return {line.split(":", 1)[0].strip() for line in str(e).split("\n")}


def same_field(server: str, local: str) -> bool:
    """The same field, or the server's unknown field under the one draftgen names: strict field
    validation names `spec.model.path.x` where an object is given for the string `spec.model.path`."""
    return server == local or server.startswith(local + ".") or server.startswith(local + "[")


def agree(server: set[str] | None, local: set[str] | None) -> bool:
    if server is None or local is None:
        return server is None and local is None
    return any(same_field(s, l) for s in server for l in local)


def test_the_api_server_and_draftgen_run_refuse_the_same_generated_manifests_naming_the_same_field(
        k8s, crd, namespace, request):
    custom = client.CustomObjectsApi(k8s)
    seen = {"accepted": 0, "refused": 0}

    @settings(max_examples=examples(request), derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_manifests())
    def same_verdict(case):
        manifest, mutations = case
        manifest = {**manifest, "metadata": {"name": manifest["metadata"]["name"]}}
        server, local = server_verdict(custom, namespace, manifest), local_verdict(manifest)
        seen["accepted" if server is None else "refused"] += 1
        assert agree(server, local), (f"after {mutations}: the API server says {server or 'admitted'}, "
                                      f"draftgen run {local or 'admitted'}")

    same_verdict()
    # Both kinds of verdict are exercised, not one alone.
    assert seen["accepted"] >= examples(request) // 20 and seen["refused"] >= examples(request) // 2, seen
