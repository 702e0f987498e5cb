"""The Helm chart: lint, schema, rendered RBAC, and installs on the session's real control plane,
up to the real operator reconciling a DatasetGeneration with nothing but the chart's ServiceAccount."""

from __future__ import annotations

import json

import re
import subprocess
import tarfile
from dataclasses import dataclass

import pytest
import yaml
from kubernetes import client

from draftgen import api, plan
from draftgen_contracts import names
from tests.chart.conftest import (CHART, OUR_IMAGE, SHARED_CRD, helm, render, service_account_token, set_args, token_client,
                                  token_kubeconfig, tool)
from tests.conftest import REPO, wait_for
from tests.manifests import manifest
from tests.operator.conftest import Operator

# What the API server says when RBAC refuses a ServiceAccount (a missing verb, or a Role granting more
# than its creator holds), and what kopf logs when a watch of its own is refused.
RBAC_REFUSAL = re.compile(r'forbidden: user \\?"system:serviceaccount:|Not enough permissions', re.IGNORECASE)


def assert_no_rbac_refusal(operator: Operator) -> None:
    operator.check_alive()
    refused = [line for line in operator.log.read_text().splitlines() if RBAC_REFUSAL.search(line)]
    assert not refused, "RBAC refused the operator:\n" + "\n".join(line[:600] for line in refused[:5])


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def operator_roles(objects: list[dict], kind: str) -> list[dict]:
    """The operator's own Roles or ClusterRoles: not the Lease's, not the users' (userroles.yaml)."""
    return [o for o in by_kind(objects, kind)
            if not o["metadata"]["name"].endswith(("-leader-election", "-edit", "-view"))]


def covers(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               and not r.get("resourceNames") for r in rules)


# --- without a cluster -------------------------------------------------------------------------------

def test_chart_crd_is_the_generated_crd():
    chart_crd = CHART / "files" / "datasetgenerations.draftgen.io.yaml"
    source = REPO / "crds" / "datasetgenerations.draftgen.io.yaml"
    assert chart_crd.read_bytes() == source.read_bytes(), (
        f"the chart's CRD differs from {source.relative_to(REPO)}; copy it: cp {source.relative_to(REPO)} "
        f"{chart_crd.relative_to(REPO)}")


@pytest.mark.parametrize("values", [{}, {"watchNamespaces": "{team-a,team-b}"},
                                    {"metrics.serviceMonitor.enabled": "true", "jobPodLabels.team": "a"},
                                    {"metrics.podMonitor.enabled": "true", "metrics.prometheusRule.enabled": "true",
                                     "networkPolicy.prometheus.namespace": "monitoring", "logFormat": "json",
                                     "replicas": "1", "leaderElection.enabled": "false"}])
def test_lint(values):
    helm("lint", "--strict", str(CHART), *OUR_IMAGE, *set_args(values))


@pytest.mark.parametrize("values, says", [
    ({"replicas": "two"}, "/replicas"),
    ({"replicas": "9"}, "/replicas"),
    ({"logFormat": "xml"}, "/logFormat"),
    ({"leaderElection.retryPeriodSeconds": "0"}, "/leaderElection/retryPeriodSeconds"),
    ({"fullnameOverride": "Draft_Gen"}, "/fullnameOverride"),
    ({"watchNamespaces": "{Team_A}"}, "/watchNamespaces/0"),
    ({"image.pullPolicy": "Sometimes"}, "/image/pullPolicy"),
    ({"metrics.port": "0"}, "/metrics/port"),
    ({"replica": "1"}, "'replica' not allowed"),  # a typo is refused, not ignored
])
def test_schema_refuses_bad_values(values, says):
    proc = helm("template", "draftgen", str(CHART), *OUR_IMAGE, *set_args(values), check=False)
    assert proc.returncode != 0 and "schema" in proc.stderr and says in proc.stderr, proc.stderr


def test_the_metrics_peers_reach_the_operator_as_the_network_policys_json():
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    [deployment] = by_kind(render(**{"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels"
                                     ".kubernetes\\.io/metadata\\.name": "monitoring"}), "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["DRAFTGEN_METRICS_FROM"]) == [monitoring]
    [default] = by_kind(render(), "Deployment")
    assert "DRAFTGEN_METRICS_FROM" not in {e["name"] for e in default["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_the_runs_pull_secrets_reach_the_operators_settings(monkeypatch):
    [deployment] = by_kind(render(**{"runImagePullSecrets[0].name": "mirror"}), "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    monkeypatch.setenv("DRAFTGEN_RUN_IMAGE_PULL_SECRETS", env["DRAFTGEN_RUN_IMAGE_PULL_SECRETS"])
    from draftgen_operator.handlers import settings_from_env

    assert settings_from_env().image_pull_secrets == ("mirror",)


def test_deployment_runs_two_operators_one_leading_with_its_settings():
    objects = render(watchNamespaces="{team-a,team-b}", runnerImage="runner:1", foldIntervalSeconds="5",
                     **{"jobPodLabels.b": "y", "jobPodLabels.a": "x"})
    [deployment] = by_kind(objects, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["type"] == "RollingUpdate"
    [container] = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert container["command"] == ["draftgen", "operator"]
    assert container["args"] == ["--liveness=http://0.0.0.0:8080/healthz", "--namespace=team-a", "--namespace=team-b",
                                 "--leader-election", "--lease-name=draftgen", "--lease-duration=15",
                                 "--renew-deadline=10", "--retry-period=2", "--log-format=text"]
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    assert (env["DRAFTGEN_RUNNER_IMAGE"], env["DRAFTGEN_FOLD_INTERVAL"], env["DRAFTGEN_EXTRA_POD_LABELS"]) == (
        "runner:1", "5", "a=x,b=y")
    assert env["DRAFTGEN_VOLUME_FULL_RETRY"] == "300"  # a stage a full volume stopped is tried again every 5 minutes
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert container["readinessProbe"]["tcpSocket"] == {"port": "metrics"}  # a standby's too: it is ready
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    spread = spec["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spread[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    [budget] = by_kind(objects, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_one_operator_without_leader_election_is_recreated_and_two_are_refused():
    objects = render(replicas="1", **{"leaderElection.enabled": "false"})
    [deployment] = by_kind(objects, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(a.startswith("--lease") for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"])
    assert not by_kind(objects, "PodDisruptionBudget") and "affinity" not in deployment["spec"]["template"]["spec"]
    proc = helm("template", "draftgen", str(CHART), *OUR_IMAGE, check=False,
                *set_args({"leaderElection.enabled": "false"}))
    assert proc.returncode != 0 and "replicas above 1 need leaderElection.enabled" in proc.stderr, proc.stderr


def test_names_extra_env_args_and_json_logs():
    objects = render(nameOverride="dg", logFormat="json", **{
        "extraArgs[0]": "--verbose", "extraEnv[0].name": "HTTPS_PROXY", "extraEnv[0].value": "http://proxy:3128"})
    [deployment] = by_kind(objects, "Deployment")
    assert deployment["metadata"]["name"] == "draftgen-dg"
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "dg"
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--log-format=json", "--verbose"]
    assert {"name": "HTTPS_PROXY", "value": "http://proxy:3128"} in container["env"]
    renamed = render(fullnameOverride="drafter")
    assert {o["metadata"]["name"] for o in renamed if o["kind"] in ("Deployment", "ClusterRole")} == {
        "drafter", "drafter-edit", "drafter-view"}
    [renamed_deployment] = by_kind(renamed, "Deployment")
    assert "--lease-name=drafter" in renamed_deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_runner_image_defaults_to_the_operators_image():
    [deployment] = by_kind(render(**{"image.repository": "registry.example/ml/draftgen", "image.tag": "1.2.3"}),
                           "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert container["image"] == env["DRAFTGEN_RUNNER_IMAGE"] == "registry.example/ml/draftgen:1.2.3"


@pytest.mark.parametrize("values, says", [
    ({}, "`helm uninstall` keeps it"),
    ({"crds.keep": "false"}, "`helm uninstall` deletes it"),
    ({"crds.install": "false"}, "apply it yourself"),
])
def test_the_notes_say_what_the_chart_did_with_the_crd_and_name_only_files_that_exist(values, says):
    notes = helm("install", "x", str(CHART), "--dry-run=client", *OUR_IMAGE, *set_args(values)).stdout
    notes = notes[notes.index("NOTES:"):]
    assert says in notes
    for path in re.findall(r"[\w./-]+\.ya?ml", notes):
        assert (REPO / path).is_file(), f"NOTES.txt names {path}, which does not exist"


def test_the_image_repository_is_required_and_the_error_names_the_value():
    """No default image: one naming a repository nobody here owns would run its owner's code."""
    proc = helm("template", "draftgen", str(CHART), check=False)
    assert proc.returncode != 0 and "image.repository is required" in proc.stderr, proc.stderr
    [deployment] = by_kind(render(), "Deployment")  # the tag defaults to the appVersion, the package's version
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"localhost/draftgen:{version}"


def test_rbac_is_cluster_wide_by_default_and_per_namespace_when_namespaces_are_given():
    [cluster_role] = operator_roles(render(), "ClusterRole")
    assert covers(cluster_role["rules"], "batch", "jobs", "create")
    namespaced = render(watchNamespaces="{team-a,team-b}")
    [scanning] = operator_roles(namespaced, "ClusterRole")
    assert sorted((r["resources"], r["verbs"]) for r in scanning["rules"]) == [
        (["customresourcedefinitions"], ["list", "watch"]), (["namespaces"], ["list", "watch"])]
    assert sorted(r["metadata"]["namespace"] for r in by_kind(namespaced, "Role")) == [
        "draftgen-system", "team-a", "team-b"]  # the release's own namespace: the leader Lease's Role
    [sa] = by_kind(namespaced, "ServiceAccount")
    subject = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "draftgen-system"}]
    bindings = by_kind(namespaced, "RoleBinding") + by_kind(namespaced, "ClusterRoleBinding")
    assert [b["subjects"] for b in bindings] == [subject] * 4
    assert sorted(b["roleRef"]["name"] for b in bindings) == sorted(
        r["metadata"]["name"] for r in by_kind(namespaced, "Role") + [scanning])


@pytest.mark.parametrize("values", [{}, {"watchNamespaces": "{team-a}"}])
def test_operator_holds_what_it_grants_and_nothing_broad(values):
    """RBAC lets a ServiceAccount create a Role only with permissions it holds itself."""
    objects = render(**values)
    # Where the operator creates the runners' Roles: the watched namespace's Role, or cluster-wide.
    [granting] = operator_roles(objects, "Role") or operator_roles(objects, "ClusterRole")
    runner_role = next(o for o in plan.rbac_objects("x", api.DatasetGenerationSpec.model_validate(manifest()["spec"]))
                       if o["kind"] == "Role")
    missing = [(g, res, v) for rule in runner_role["rules"] for g in rule["apiGroups"] for res in rule["resources"]
               for v in rule["verbs"] if not covers(granting["rules"], g, res, v)]
    assert not missing, f"the operator grants the runners what it does not hold: {missing}"
    for rule in (r for role in by_kind(objects, "Role") + by_kind(objects, "ClusterRole") for r in role["rules"]):
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), rule
        assert not {"pods/exec", "nodes"} & set(rule["resources"]), rule
        # Secrets: the runs' server keys are created, never read (no get, list or watch).
        assert "secrets" not in rule["resources"] or (rule["resources"], rule["verbs"]) == (["secrets"], ["create"]), rule
        # Leases: the leader Lease only, in the release's namespace.
        assert "leases" not in rule["resources"] or (rule["apiGroups"], rule["verbs"]) == (
            ["coordination.k8s.io"], ["get", "create", "update"]), rule
        # Pods are watched (why a replica does not run, docs/operator.md), never written.
        assert "pods" not in rule["resources"] or set(rule["verbs"]) <= {"list", "watch"}, rule


def test_service_monitor_scrapes_the_metrics_service():
    objects = render(**{"metrics.serviceMonitor.enabled": "true", "metrics.port": "9191"})
    [service], [monitor] = by_kind(objects, "Service"), by_kind(objects, "ServiceMonitor")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9191, "targetPort": "metrics"},
                                        {"name": "healthz", "port": 8080, "targetPort": "healthz"}]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert not by_kind(render(), "ServiceMonitor")
    proc = helm("template", "draftgen", str(CHART), *OUR_IMAGE, check=False,
                *set_args({"metrics.serviceMonitor.enabled": "true", "metrics.service.enabled": "false"}))
    assert proc.returncode != 0 and "metrics.service.enabled" in proc.stderr


def test_the_packaged_chart_lints_and_renders_as_its_folder(tmp_path):
    """`helm package` makes what a chart repository or an OCI registry serves (`helm push`)."""
    helm("package", str(CHART), "--destination", str(tmp_path))
    [package] = tmp_path.glob("*.tgz")
    assert package.name == f"draftgen-{yaml.safe_load((CHART / 'Chart.yaml').read_text())['version']}.tgz"
    with tarfile.open(package) as tar:
        packed = {name.removeprefix("draftgen/") for name in tar.getnames()}
    assert {"Chart.yaml", "values.yaml", "values.schema.json", "files/alerts.yaml",
            "files/datasetgenerations.draftgen.io.yaml", "templates/crd.yaml"} <= packed, packed
    helm("lint", "--strict", str(package), *OUR_IMAGE)
    assert (helm("template", "x", str(package), *OUR_IMAGE).stdout
            == helm("template", "x", str(CHART), *OUR_IMAGE).stdout)


# --- on the session's control plane ------------------------------------------------------------------

@pytest.mark.parametrize("watch_own_namespace", [False, True], ids=["cluster-wide", "namespaced"])
def test_rendered_chart_passes_server_side_dry_run(cluster, crd, release_namespace, watch_own_namespace):
    values = {"watchNamespaces": f"{{{release_namespace}}}"} if watch_own_namespace else {}
    rendered = helm("template", "dry-run", str(CHART), "--include-crds", "--namespace", release_namespace, *OUR_IMAGE,
                    *set_args(values)).stdout
    proc = subprocess.run([tool("kubectl"), "--kubeconfig", str(cluster.kubeconfig), "apply", "--server-side",
                           "--dry-run=server", "--force-conflicts", "--field-manager=chart-test", "-f", "-"],
                          input=rendered, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    kinds = {line.split()[0].split("/")[0] for line in proc.stdout.splitlines()}
    assert {"customresourcedefinition.apiextensions.k8s.io", "deployment.apps", "serviceaccount",
            "service"} <= kinds, proc.stdout


@dataclass
class Release:
    name: str
    namespace: str
    service_account: str


@pytest.fixture(scope="module")
def release(cluster, crd, release_namespace):
    name = "draftgen"
    helm("install", name, str(CHART), "--namespace", release_namespace, *OUR_IMAGE, *SHARED_CRD,
         kubeconfig=cluster.kubeconfig)
    yield Release(name, release_namespace, service_account=name)
    helm("uninstall", name, "--namespace", release_namespace, kubeconfig=cluster.kubeconfig)


def test_install_creates_the_operator_and_its_rbac(cluster, k8s, release):
    apps, core, rbac = client.AppsV1Api(k8s), client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    deployment = apps.read_namespaced_deployment(release.name, release.namespace)
    assert deployment.spec.replicas == 2 and deployment.spec.strategy.type == "RollingUpdate"
    client.PolicyV1Api(k8s).read_namespaced_pod_disruption_budget(release.name, release.namespace)
    rbac.read_namespaced_role_binding(f"{release.name}-leader-election", release.namespace)
    core.read_namespaced_service_account(release.service_account, release.namespace)
    core.read_namespaced_service(f"{release.name}-metrics", release.namespace)
    rbac.read_cluster_role(release.name)
    binding = rbac.read_cluster_role_binding(release.name)
    assert [(s.kind, s.name, s.namespace) for s in binding.subjects] == [
        ("ServiceAccount", release.service_account, release.namespace)]
    # The namespace enforces the `restricted` Pod Security Standard: a pod exists only if admitted.
    selector = f"app.kubernetes.io/instance={release.name}"
    wait_for(lambda: core.list_namespaced_pod(release.namespace, label_selector=selector).items, 30,
             "the operator's pod, admitted under the restricted Pod Security Standard", cluster)


def test_namespace_users_with_edit_create_datasetgenerations_and_with_view_only_read_them(cluster, k8s, release,
                                                                                       namespace):
    """The chart's user roles, folded into Kubernetes' `edit` and `view` by the clusterrole-aggregation
    controller: no RBAC written for the users beyond binding the default roles, as any namespace has."""
    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    for user, role in (("alice", "edit"), ("bob", "view")):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": user}})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": user}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                    "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": namespace}]})

    def as_user(user: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(token_client(cluster, service_account_token(k8s, namespace, user)))

    def aggregated(role: str, verb: str) -> bool:
        rules = rbac.read_cluster_role(role).rules or []
        return any("datasetgenerations" in (r.resources or []) and verb in r.verbs for r in rules)
    wait_for(lambda: aggregated("edit", "create") and aggregated("view", "list"), 30,
             "the chart's user roles folded into edit and view", cluster)
    alice, bob = as_user("alice"), as_user("bob")
    alice.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest("mine"))
    alice.patch_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "mine",
                                         {"spec": {"suspend": True}})
    assert [o["metadata"]["name"] for o in bob.list_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL)["items"]] == ["mine"]
    with pytest.raises(client.ApiException) as refused:
        bob.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest("theirs"))
    assert refused.value.status == 403
    with pytest.raises(client.ApiException) as refused:
        bob.delete_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "mine")
    assert refused.value.status == 403
    alice.delete_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "mine")


def test_install_refuses_a_bad_value_and_creates_nothing(cluster, k8s, release_namespace):
    proc = helm("install", "refused", str(CHART), "--namespace", release_namespace, *OUR_IMAGE, "--set", "replicas=two",
                kubeconfig=cluster.kubeconfig, check=False)
    assert proc.returncode != 0 and "/replicas" in proc.stderr, proc.stderr
    status = helm("status", "refused", "--namespace", release_namespace, kubeconfig=cluster.kubeconfig, check=False)
    assert status.returncode != 0 and "not found" in status.stderr, status.stderr
    with pytest.raises(client.ApiException) as refused:
        client.AppsV1Api(k8s).read_namespaced_deployment("refused-draftgen", release_namespace)
    assert refused.value.status == 404


@pytest.fixture
def operator_identity(request, cluster, k8s, release, namespace):
    """(ServiceAccount namespace, name, the --namespace the operator watches) for the chart's two modes:
    the module's cluster-wide release, or a release watching only the test's namespace."""
    if request.param == "cluster-wide":
        yield release.namespace, release.service_account, None
        return
    helm("install", "scoped", str(CHART), "--namespace", release.namespace, *OUR_IMAGE, *SHARED_CRD,
         "--set", f"watchNamespaces={{{namespace}}}",
         kubeconfig=cluster.kubeconfig)
    yield release.namespace, "scoped-draftgen", namespace
    helm("uninstall", "scoped", "--namespace", release.namespace, kubeconfig=cluster.kubeconfig)


@pytest.mark.parametrize("operator_identity", ["cluster-wide", "namespaced"], indirect=True)
def test_operator_with_only_the_charts_service_account_reconciles(cluster, k8s, operator_identity, namespace,
                                                                   tmp_path):
    """The real operator, authenticated as the chart's ServiceAccount, creates every child (the runner
    Role and RoleBinding included, which RBAC allows only for permissions the operator holds), writes
    status, deletes Jobs and posts an event; its log shows no RBAC refusal."""
    sa_namespace, service_account, watched = operator_identity
    token = service_account_token(k8s, sa_namespace, service_account)
    kubeconfig = token_kubeconfig(cluster, token, tmp_path / "operator.kubeconfig")
    for claim in ("models", "data"):
        cluster.create_local_volume(namespace, claim, "1Gi")
    custom = client.CustomObjectsApi(k8s)
    custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest("demo"))
    core, batch, rbac = client.CoreV1Api(k8s), client.BatchV1Api(k8s), client.RbacAuthorizationV1Api(k8s)

    def names_of(items):
        return {i.metadata.name for i in items}

    def reconciled():
        assert_no_rbac_refusal(operator)
        dg = custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "demo")
        return ({"demo-gen-r000", "demo-gen-r001"} <= names_of(batch.list_namespaced_job(namespace).items)
                and "demo-runner" in names_of(core.list_namespaced_service_account(namespace).items)
                and "demo-runner" in names_of(rbac.list_namespaced_role(namespace).items)
                and "demo-runner" in names_of(rbac.list_namespaced_role_binding(namespace).items)
                and {"demo-report-r000", "demo-report-r001"} <= names_of(core.list_namespaced_config_map(namespace).items)
                and (dg.get("status") or {}).get("phase"))

    # No local-kubelet label: KWOK plays the generation pods, nothing is run on this machine. With the
    # leader Lease, as the chart runs it: its Role lets the ServiceAccount take the Lease.
    operator = Operator(cluster, tmp_path, extra_env={"KUBECONFIG": str(kubeconfig), "DRAFTGEN_EXTRA_POD_LABELS": ""},
                        args=("--leader-election", "--lease-namespace", sa_namespace, "--lease-name", service_account,
                              "--log-format", "json"))
    operator.start(watched)
    try:
        wait_for(reconciled, 60, "the operator to create demo's children and set its phase", cluster)
        custom.patch_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "demo",
                                              {"spec": {"suspend": True}})

        def suspended():
            assert_no_rbac_refusal(operator)
            jobs = batch.list_namespaced_job(namespace).items
            events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=demo").items
            return (all(j.metadata.deletion_timestamp for j in jobs if not j.status.succeeded)
                    and any(e.reason == "Suspended" for e in events))

        wait_for(suspended, 30, "the operator to delete demo's Jobs and post a Suspended event", cluster)
        assert_no_rbac_refusal(operator)
        # The chart's logFormat json: every line one JSON object, kopf's and the Lease's included.
        entries = [json.loads(line) for line in operator.log.read_text().splitlines() if line.strip()]
        assert {"draftgen.lease", "kopf.activities.startup"} <= {e["logger"] for e in entries}
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- the operator's log ends:\n{operator.log.read_text()[-3000:]}") from None
    finally:
        operator.stop()



@pytest.mark.parametrize("operator_identity", ["namespaced"], indirect=True)
def test_a_permission_taken_away_and_given_back_heals_without_a_restart(cluster, k8s, operator_identity, namespace,
                                                                         tmp_path):
    """The chart's Role in the watched namespace loses `create` on Jobs: the operator's Job creates are
    refused (403), which the object says in condition Blocked while the operator retries; once the
    permission is back, the Jobs are created and Blocked clears, with no restart."""
    sa_namespace, service_account, watched = operator_identity
    kubeconfig = token_kubeconfig(cluster, service_account_token(k8s, sa_namespace, service_account),
                                  tmp_path / "operator.kubeconfig")
    for claim in ("models", "data"):
        cluster.create_local_volume(namespace, claim, "1Gi")
    rbac, batch = client.RbacAuthorizationV1Api(k8s), client.BatchV1Api(k8s)
    custom = client.CustomObjectsApi(k8s)
    original = k8s.sanitize_for_serialization(rbac.read_namespaced_role(service_account, namespace).rules)
    granted = [{**rule, "verbs": [v for v in rule["verbs"] if not ("jobs" in rule["resources"] and v == "create")]}
               for rule in original]
    rbac.patch_namespaced_role(service_account, namespace, {"rules": granted})
    custom.create_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, manifest("demo"))

    def blocked():
        dg = custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "demo")
        c = {c["type"]: c for c in (dg.get("status") or {}).get("conditions") or []}.get("Blocked") or {}
        return c.get("status") == "True" and c["reason"] == "Forbidden" and "create Job demo-preflight" in c["message"]

    def healed():
        dg = custom.get_namespaced_custom_object(names.GROUP, names.VERSION, namespace, names.PLURAL, "demo")
        c = {c["type"]: c for c in (dg.get("status") or {}).get("conditions") or []}.get("Blocked") or {}
        jobs = {j.metadata.name for j in batch.list_namespaced_job(namespace).items}
        return {"demo-gen-r000", "demo-gen-r001"} <= jobs and c.get("status") == "False"

    operator = Operator(cluster, tmp_path, extra_env={"KUBECONFIG": str(kubeconfig), "DRAFTGEN_EXTRA_POD_LABELS": ""})
    operator.start(watched)
    try:
        wait_for(blocked, 60, "condition Blocked, Forbidden, naming the Job", cluster)
        rbac.patch_namespaced_role(service_account, namespace, {"rules": original})
        wait_for(healed, 90, "the Jobs created and Blocked cleared", cluster)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- the operator's log ends:\n{operator.log.read_text()[-3000:]}") from None
    finally:
        operator.stop()
