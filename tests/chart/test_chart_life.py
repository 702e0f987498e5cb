"""The chart's whole life on the real control plane: `helm test` proves the installed operator answers,
`helm upgrade` from the previous chart version (with its CRD change applied as docs/chart.md says),
and `helm uninstall` leaves the CRD, the DatasetGenerations and the data volumes, and nothing else."""

from __future__ import annotations

import io
import subprocess
import tarfile
import time

import pytest
import yaml
from kubernetes import client

from draftgen_contracts import names
from draftgen_dev.cluster.controlplane import LOCAL_KUBELET_LABEL
from tests.chart.conftest import CHART, IMAGE_REPOSITORY, SHARED_CRD, helm, set_args, tool
from tests.conftest import REPO, wait_for
from tests.manifests import manifest

# The upgrade puts the previous chart's CRD on the cluster for a while: no other test runs meanwhile.
pytestmark = pytest.mark.cluster_alone

# The chart as last released before this version: 0.1.0, with the CRD before its admission rules on
# paths (no `..` segments). Read from the repository's own history.
PREVIOUS_VERSION, PREVIOUS_COMMIT = "0.1.0", "4ae4c4bfe00aeba7987114b17f09e3693cc57ac8"
CRD_NAME = f"{names.PLURAL}.{names.GROUP}"
CRD_FILE = CHART / "files" / f"{CRD_NAME}.yaml"


def chart_version(chart) -> str:
    return yaml.safe_load((chart / "Chart.yaml").read_text())["version"]


def previous_chart(destination):
    """The chart folder at PREVIOUS_COMMIT (git archive), unpacked under `destination`."""
    shallow = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone has no previous chart version to upgrade from")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", PREVIOUS_COMMIT, "charts/draftgen"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")
    chart = destination / "charts" / "draftgen"
    assert chart_version(chart) == PREVIOUS_VERSION
    return chart


def kubectl(cluster, *args: str) -> str:
    proc = subprocess.run([tool("kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def apply_crd(cluster, path) -> None:
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "--field-manager=draftgen-chart", "-f", str(path))


def adopt_crd(cluster, release: str, namespace: str) -> None:
    """The one step before upgrading from 0.1.0, whose CRD came from crds/ and so belongs to no
    release: mark it as the release's, so Helm takes it over (docs/chart.md#upgrade)."""
    kubectl(cluster, "label", "--overwrite", "crd", CRD_NAME, "app.kubernetes.io/managed-by=Helm")
    kubectl(cluster, "annotate", "--overwrite", "crd", CRD_NAME, f"meta.helm.sh/release-name={release}",
            f"meta.helm.sh/release-namespace={namespace}")


def namespace_named(k8s, prefix: str) -> str:
    name = f"{prefix}-{int(time.time() * 1000) % 10**8}"
    client.CoreV1Api(k8s).create_namespace({"metadata": {"name": name}})
    return name


def test_helm_test_proves_the_installed_operator_answers(cluster, k8s, crd, release_namespace, draftgen_image):
    """The operator's pod and the test pod run for real (the local kubelet), from draftgen's image as
    the chart names it, the test pod reaching the operator through its Service's name."""
    watched = namespace_named(k8s, "answers-watched")
    label = LOCAL_KUBELET_LABEL.replace(".", "\\.")  # a dot in a --set key is a path separator
    local = [arg for key in ("podLabels", "test.podLabels") for arg in ("--set-string", f"{key}.{label}=true")]
    cluster.load_image(draftgen_image.ref, draftgen_image.as_json())
    repository, tag = draftgen_image.ref.rsplit(":", 1)
    values = {"watchNamespaces": f"{{{watched}}}", "listenAddress": "$(POD_IP)", "image.repository": repository,
              "image.tag": tag}
    helm("install", "answers", str(CHART), "--namespace", release_namespace, "--wait", "--timeout", "90s",
         *set_args(values), *local, *SHARED_CRD, kubeconfig=cluster.kubeconfig)
    try:
        proc = helm("test", "answers", "--namespace", release_namespace, "--timeout", "300s",
                    kubeconfig=cluster.kubeconfig, check=False)
        said = "".join(p.read_text() for p in (cluster.state_dir / "pods").glob("*/answers.log"))
        assert proc.returncode == 0, proc.stdout + proc.stderr + said
        assert "TEST SUITE:     answers-draftgen-test-answers" in proc.stdout and "Phase:          Succeeded" in proc.stdout
        assert "/healthz: answers" in said and "/metrics: answers" in said, said
        # Two replicas from the image, as the chart runs them: one holds the leader Lease.
        selector = "app.kubernetes.io/instance=answers,app.kubernetes.io/name=draftgen"
        pods = {p.metadata.name for p in client.CoreV1Api(k8s).list_namespaced_pod(
            release_namespace, label_selector=selector).items}
        assert len(pods) == 2, pods

        def holder():
            lease = client.CoordinationV1Api(k8s).read_namespaced_lease("answers-draftgen", release_namespace)
            return lease.spec.holder_identity
        wait_for(lambda: (holder() or "").split("_")[0] in pods, 60, "one operator pod holding the Lease", cluster)
    finally:
        helm("uninstall", "answers", "--namespace", release_namespace, "--wait", kubeconfig=cluster.kubeconfig)


def test_upgrade_from_the_previous_version_upgrades_its_crd_and_uninstall_keeps_it_and_the_data(
        cluster, k8s, crd, release_namespace, tmp_path):
    old = previous_chart(tmp_path)
    assert chart_version(CHART) != PREVIOUS_VERSION
    watched = namespace_named(k8s, "life-watched")
    data = cluster.create_local_volume(watched, "data", "1Gi")
    custom = client.CustomObjectsApi(k8s)
    create = lambda body: custom.create_namespaced_custom_object(  # noqa: E731
        names.GROUP, names.VERSION, watched, names.PLURAL, body)
    values = set_args({"watchNamespaces": f"{{{watched}}}", **IMAGE_REPOSITORY})
    apply_crd(cluster, old / "crds")  # the cluster as version 0.1.0 left it
    try:
        helm("install", "life", str(old), "--namespace", release_namespace, *values, kubeconfig=cluster.kubeconfig)
        climbing = manifest("climbing")
        climbing["spec"]["output"]["path"] = "../elsewhere"
        create(climbing)  # the old CRD has no rule against it

        adopt_crd(cluster, "life", release_namespace)
        # --force-conflicts: Helm 4 applies server-side, and the CRD's fields are whoever created it's.
        helm("upgrade", "life", str(CHART), "--namespace", release_namespace, "--force-conflicts", *values,
             kubeconfig=cluster.kubeconfig)
        history = yaml.safe_load(helm("history", "life", "--namespace", release_namespace, "--output", "yaml",
                                      kubeconfig=cluster.kubeconfig).stdout)
        assert [h["chart"] for h in history] == [f"draftgen-{PREVIOUS_VERSION}", f"draftgen-{chart_version(CHART)}"]
        deployment = client.AppsV1Api(k8s).read_namespaced_deployment("life-draftgen", release_namespace)
        assert deployment.metadata.labels["helm.sh/chart"] == f"draftgen-{chart_version(CHART)}"
        # The new CRD is in force: the same object is refused now, naming the field.
        climbing["metadata"]["name"] = "climbing-again"
        with pytest.raises(client.ApiException) as refused:
            create(climbing)
        assert refused.value.status == 422 and "output.path must not climb out of the volume" in refused.value.body
        # The object made under the old CRD is still there and readable.
        custom.get_namespaced_custom_object(names.GROUP, names.VERSION, watched, names.PLURAL, "climbing")

        (data / "keep.txt").write_text("a run's data")
        helm("uninstall", "life", "--namespace", release_namespace, "--wait", kubeconfig=cluster.kubeconfig)
    finally:
        apply_crd(cluster, CRD_FILE)  # whatever happened, the other tests' CRD is this version's
    # Left: the CRD (helm.sh/resource-policy: keep), the DatasetGenerations, the volumes and their data.
    kept = client.ApiextensionsV1Api(k8s).read_custom_resource_definition(CRD_NAME)
    assert kept.metadata.annotations["helm.sh/resource-policy"] == "keep"
    custom.get_namespaced_custom_object(names.GROUP, names.VERSION, watched, names.PLURAL, "climbing")
    client.CoreV1Api(k8s).read_namespaced_persistent_volume_claim("data", watched)
    assert (data / "keep.txt").read_text() == "a run's data"
    # And nothing else of the release.
    selector = "app.kubernetes.io/instance=life"
    core, apps, rbac = client.CoreV1Api(k8s), client.AppsV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    left = [*apps.list_namespaced_deployment(release_namespace, label_selector=selector).items,
            *core.list_namespaced_service(release_namespace, label_selector=selector).items,
            *core.list_namespaced_service_account(release_namespace, label_selector=selector).items,
            *core.list_namespaced_secret(release_namespace, label_selector="owner=helm,name=life").items,
            *rbac.list_cluster_role(label_selector=selector).items,
            *rbac.list_cluster_role_binding(label_selector=selector).items,
            *rbac.list_namespaced_role(watched, label_selector=selector).items,
            *rbac.list_namespaced_role_binding(watched, label_selector=selector).items]
    assert not left, [f"{o.kind} {o.metadata.name}" for o in left]
    wait_for(lambda: not core.list_namespaced_pod(release_namespace, label_selector=selector).items, 60,
             "the operator's pod gone", cluster)
