"""The two executors of admission held to one verdict on generated manifests: the real API server
(the CRD's schema and CEL rules, strict field validation, a server-side dry run) and `draftgen run`'s
check (pydantic, and the same CEL rules evaluated by draftgen.cel_rules). Each manifest is a
mutation of the quickstart or the Kimi example (draftgen_dev.manifest_mutations); both must accept
it, or both refuse it naming a common field. Seeded; hypothesis shrinks a disagreement to a minimal
manifest. `make test SLOW=1` runs 10x more."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes import client

from draftgen import admission
from draftgen.local.spec_file import SpecError, parse_object
from draftgen_contracts import names
from draftgen_dev.manifest_mutations import BASES, mutated_manifests

EXAMPLES = 2000
UPDATES = 500


@pytest.fixture(scope="module")
def namespace(module_namespace):
    """One namespace for the module: its objects are refused, dry-run or named apart."""
    return module_namespace


def examples(request, n: int = EXAMPLES) -> int:
    return n * (10 if request.config.getoption("--slow") else 1)


UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


def server_verdict(custom: client.CustomObjectsApi, namespace: str, manifest: dict,
                   resource_version: str | None = None) -> set[str] | None:
    """None when the API server admits the manifest (created, or with `resource_version` an update
    of the object of its name), else the fields its refusal names."""
    try:
        if resource_version is None:
            custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest,
                                                   dry_run="All", field_validation="Strict")
        else:
            manifest = {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": resource_version}}
            custom.replace_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL,
                                                    manifest["metadata"]["name"], manifest, dry_run="All",
                                                    field_validation="Strict")
        return None
    except client.ApiException as e:
        if e.status not in (400, 422):
            raise
        body = json.loads(e.body)
    causes = (body.get("details") or {}).get("causes") or []
    fields = {c["field"] for c in causes if c.get("field")}
    fields |= set(UNKNOWN_FIELD.findall(body.get("message", "")))
    return fields or {body.get("message", "")}


def local_verdict(manifest: dict, applied: dict | None = None) -> set[str] | None:
    """None when `draftgen run` accepts the manifest (with `applied`, as a rerun of that one: an
    update), else the fields its refusal names."""
    try:
        _, spec = parse_object(manifest)
        changes = admission.immutable_changes(parse_object(applied)[1], spec) if applied else []
        if changes:
            raise SpecError("\n  ".join(changes))
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


def test_updates_are_refused_alike_by_the_api_server_and_by_a_rerun_of_draftgen_run(k8s, crd, namespace, request):
    """Each base applied once; generated changes of it (immutable fields among them) sent as updates
    to the API server and as reruns to `draftgen run`."""
    custom = client.CustomObjectsApi(k8s)
    versions = {b["metadata"]["name"]: custom.create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, b)["metadata"]["resourceVersion"] for b in BASES}
    applied = {b["metadata"]["name"]: b for b in BASES}
    seen = {"accepted": 0, "refused": 0, "immutable": 0}

    @settings(max_examples=examples(request, UPDATES), derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_manifests(keep_name=True))
    def same_verdict(case):
        manifest, mutations = case
        name = manifest["metadata"]["name"]
        server = server_verdict(custom, namespace, manifest, versions[name])
        local = local_verdict(manifest, applied[name])
        seen["accepted" if server is None else "refused"] += 1
        seen["immutable"] += local is not None and local_verdict(manifest) is None  # only the update refused
        assert agree(server, local), (f"updating {name} by {mutations}: the API server says "
                                      f"{server or 'admitted'}, draftgen run {local or 'admitted'}")

    same_verdict()
    # Updates refused for an immutable field alone are among them.
    assert seen["accepted"] >= examples(request, UPDATES) // 20 and seen["immutable"] >= 10, seen
