"""The runners' least privilege, checked by the real API server's RBAC authorizer: a DatasetGeneration's
pods may read their own DatasetGeneration and read and write their own report ConfigMaps, and nothing
of another DatasetGeneration's, nor Secrets, nor anything else."""

from __future__ import annotations

from urllib.error import HTTPError

import pytest
from kubernetes import client

from draftgen import api, plan
from draftgen_contracts import names
from jobrunner.shared.report_patch import patch_report
from tests.chart.conftest import service_account_token, token_client
from tests.manifests import manifest

SPEC = api.DatasetGenerationSpec.model_validate(manifest()["spec"])  # two replicas: two reports each


def create(k8s, namespace: str, obj: dict) -> None:
    kind = obj["kind"]
    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    creators = {"ServiceAccount": core.create_namespaced_service_account, "ConfigMap": core.create_namespaced_config_map,
                "Role": rbac.create_namespaced_role, "RoleBinding": rbac.create_namespaced_role_binding}
    creators[kind](namespace, obj)


@pytest.fixture
def two_generations(k8s, crd, namespace):
    """alpha and beta, each with the ServiceAccount, Role, RoleBinding and reports the operator creates."""
    custom = client.CustomObjectsApi(k8s)
    for name in ("alpha", "beta"):
        custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest(name))
        for obj in [*plan.rbac_objects(name, SPEC), *plan.report_objects(name, SPEC)]:
            create(k8s, namespace, obj)
    client.CoreV1Api(k8s).create_namespaced_secret(namespace, {"metadata": {"name": "hub-token"},
                                                               "stringData": {"token": "not for runners"}})
    return namespace


# (verb, group, resource, name or None, allowed) for alpha's ServiceAccount.
CHECKS = [
    ("get", "", "configmaps", "alpha-report-r000", True),
    ("patch", "", "configmaps", "alpha-report-r001", True),
    ("update", "", "configmaps", "alpha-report-r000", True),
    ("get", names.GROUP, names.PLURAL, "alpha", True),
    ("patch", "", "configmaps", "beta-report-r000", False),
    ("get", "", "configmaps", "beta-report-r000", False),
    ("get", names.GROUP, names.PLURAL, "beta", False),
    ("delete", "", "configmaps", "alpha-report-r000", False),
    ("get", "", "configmaps", "alpha-config-0123456789", False),  # the config arrives as a volume
    ("patch", names.GROUP, names.PLURAL, "alpha", False),
    ("list", names.GROUP, names.PLURAL, None, False),
    ("get", "", "secrets", "hub-token", False),
    ("get", "", "secrets", "alpha-server-keys", False),  # the keys reach the pod as a volume and variables
    ("list", "", "secrets", None, False),
    ("create", "", "pods", None, False),
    ("create", "", "configmaps", None, False),
    ("list", "", "configmaps", None, False),
    ("create", "rbac.authorization.k8s.io", "roles", None, False),
]


def test_runner_service_account_reaches_only_its_own_objects(k8s, two_generations):
    namespace = two_generations
    sa = names.service_account_name("alpha")
    authz = client.AuthorizationV1Api(k8s)

    def allowed(verb, group, resource, name):
        review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:{sa}",
            # The groups a ServiceAccount token carries: a grant to any of them would count too.
            groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(namespace=namespace, verb=verb, group=group,
                                                            resource=resource, name=name)))
        return authz.create_subject_access_review(review).status.allowed

    got = {check[:4]: allowed(*check[:4]) for check in CHECKS}
    want = {check[:4]: check[4] for check in CHECKS}
    assert got == want, {k: f"allowed={v}, want {want[k]}" for k, v in got.items() if v != want[k]}


def test_runner_token_is_allowed_its_report_and_refused_the_rest(cluster, k8s, two_generations):
    namespace = two_generations
    token = service_account_token(k8s, namespace, names.service_account_name("alpha"))
    with token_client(cluster, token) as as_alpha:
        core, custom = client.CoreV1Api(as_alpha), client.CustomObjectsApi(as_alpha)
        report = names.report_name("alpha", 0)
        core.patch_namespaced_config_map(report, namespace, {"data": {names.REPORT_KEY: '{"replica": 0}'}})
        assert custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "alpha")
        refused = [
            lambda: core.patch_namespaced_config_map(names.report_name("beta", 0), namespace, {"data": {"x": "y"}}),
            lambda: custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "beta"),
            lambda: core.read_namespaced_secret("hub-token", namespace),
        ]
        for call in refused:
            with pytest.raises(client.ApiException) as denied:
                call()
            assert denied.value.status == 403  # authenticated (not 401), then refused by RBAC
    written = client.CoreV1Api(k8s).read_namespaced_config_map(report, namespace)
    assert written.data == {names.REPORT_KEY: '{"replica": 0}'}


def test_a_report_patched_as_the_extraction_does_without_a_kubernetes_client(cluster, k8s, two_generations,
                                                                           tmp_path, monkeypatch):
    """jobrunner.shared.report_patch (the SGLang image has no Kubernetes client): the pod's mount and
    variables, its own extraction report written, another run's refused by RBAC."""
    namespace = two_generations
    spec = SPEC.model_copy(update={"extraction": SPEC.extraction.model_copy(update={"enabled": True})})
    for obj in plan.rbac_objects("gamma", spec) + plan.report_objects("gamma", spec):
        create(k8s, namespace, obj)
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(service_account_token(k8s, namespace, names.service_account_name("gamma")))
    (mount / "ca.crt").write_bytes(cluster.pki.ca_cert.read_bytes())
    (mount / "namespace").write_text(namespace)
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    patch_report(names.extraction_report_name("gamma"), names.EXTRACTION_KEY, '{"tokens": 1}', mount=mount)
    written = client.CoreV1Api(k8s).read_namespaced_config_map(names.extraction_report_name("gamma"), namespace)
    assert written.data == {names.EXTRACTION_KEY: '{"tokens": 1}'}
    with pytest.raises(HTTPError) as denied:
        patch_report(names.report_name("alpha", 0), names.REPORT_KEY, "{}", mount=mount)
    assert denied.value.code == 403
