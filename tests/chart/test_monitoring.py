"""The chart's monitoring: the runs' NetworkPolicy admitting the cluster's Prometheus (and SGLang's own
port), a PodMonitor of the generation pods, and the alerts, checked with Prometheus's own promtool
and applied against the Prometheus Operator's own CRDs on the session's control plane."""

from __future__ import annotations

import subprocess

import yaml

from draftgen import api, plan
from draftgen_contracts import names
from draftgen_dev.cluster.waiting import crd_established, wait_until
from tests.chart.conftest import CHART, IMAGE_REPOSITORY, helm, render, set_args, tool
from tests.chart.test_chart import by_kind
from tests.conftest import REPO
from tests.manifests import manifest

ALERTS = CHART / "files" / "alerts.yaml"
ALERT_CASES = REPO / "tests" / "chart" / "alerts_test.yaml"
EVERYTHING = {"metrics.serviceMonitor.enabled": "true", "metrics.podMonitor.enabled": "true",
              "metrics.prometheusRule.enabled": "true", "networkPolicy.serverMetrics": "true",
              "networkPolicy.prometheus.namespace": "monitoring"}


def monitoring(file: str) -> str:
    from draftgen_dev.cluster.binaries import MONITORING, ensure
    return str(ensure(MONITORING) / file)


def env_of(objects: list[dict]) -> dict[str, str]:
    [deployment] = by_kind(objects, "Deployment")
    return {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            if "value" in e}


def test_the_clusters_prometheus_and_sglangs_port_reach_each_runs_network_policy(monkeypatch):
    env = env_of(render(**{"networkPolicy.prometheus.namespace": "monitoring",
                           "networkPolicy.prometheus.podLabels.app": "prometheus",
                           "networkPolicy.serverMetrics": "true"}))
    for key in ("DRAFTGEN_METRICS_FROM", "DRAFTGEN_SERVER_METRICS"):
        monkeypatch.setenv(key, env[key])
    from draftgen_operator.handlers import settings_from_env

    spec = api.DatasetGenerationSpec.model_validate(manifest()["spec"])
    policy = plan.generation_network_policy("run", spec, settings_from_env())
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app": "prometheus"}}}
    assert policy["spec"]["ingress"] == [{"from": [prometheus], "ports": [
        {"protocol": "TCP", "port": names.GENERATE_METRICS_PORT}, {"protocol": "TCP", "port": spec.server.port}]}]
    assert "DRAFTGEN_METRICS_FROM" not in env_of(render())  # by default nobody from outside


def test_the_pod_monitor_selects_the_generation_pods_and_their_metrics_ports():
    spec = api.DatasetGenerationSpec.model_validate(manifest()["spec"])
    settings = plan.OperatorSettings()
    job = plan.generation_job("run", spec, 0, settings, plan.config_object("run", "ml", spec, settings))
    pod = job["spec"]["template"]
    [monitor] = by_kind(render(**{"metrics.podMonitor.enabled": "true", "networkPolicy.serverMetrics": "true"}),
                        "PodMonitor")
    selector = monitor["spec"]["selector"]
    assert selector["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert all(e["key"] in pod["metadata"]["labels"] for e in selector["matchExpressions"])
    containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]  # the server: a sidecar
    ports = {p["name"] for c in containers for p in c.get("ports", [])}
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics", "http"]
    assert {"metrics", "http"} <= ports
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    [scoped] = by_kind(render(watchNamespaces="{team-a}", **{"metrics.podMonitor.enabled": "true"}), "PodMonitor")
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
    assert [e["port"] for e in scoped["spec"]["podMetricsEndpoints"]] == ["metrics"]


def test_the_prometheus_rule_carries_the_alerts_file():
    [rule] = by_kind(render(**{"metrics.prometheusRule.enabled": "true"}), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())
    assert not by_kind(render(), "PrometheusRule")


def test_promtool_checks_the_alerts_and_each_fires_on_its_case_and_not_before():
    check = subprocess.run([monitoring("promtool"), "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    cases = subprocess.run([monitoring("promtool"), "test", "rules", str(ALERT_CASES)], capture_output=True,
                           text=True, cwd=ALERT_CASES.parent)
    assert cases.returncode == 0, cases.stdout + cases.stderr
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in yaml.safe_load(ALERT_CASES.read_text())["tests"]
              for t in case["alert_rule_test"] if t.get("exp_alerts")}
    assert alerts == tested, f"alerts with no case that fires them: {alerts - tested}"


def test_the_monitoring_objects_are_valid_for_the_prometheus_operators_crds(cluster, crd, release_namespace):
    kubectl = [tool("kubectl"), "--kubeconfig", str(cluster.kubeconfig)]
    subprocess.run([*kubectl, "apply", "--server-side", "--field-manager=chart-test", "-f", monitoring("crds")],
                   check=True, capture_output=True, timeout=120)
    admin = cluster.api_client()
    for kind in ("podmonitors", "servicemonitors", "prometheusrules"):
        name = f"{kind}.monitoring.coreos.com"
        wait_until(lambda: crd_established(admin, name), 60, f"the CRD {name} to be Established")
    rendered = helm("template", "monitored", str(CHART), "--namespace", release_namespace,
                    *set_args({**IMAGE_REPOSITORY, **EVERYTHING})).stdout
    proc = subprocess.run([*kubectl, "apply", "--server-side", "--dry-run=server", "--force-conflicts",
                           "--field-manager=chart-test", "-f", "-"], input=rendered, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    kinds = {line.split()[0].split("/")[0] for line in proc.stdout.splitlines()}
    assert {"podmonitor.monitoring.coreos.com", "servicemonitor.monitoring.coreos.com",
            "prometheusrule.monitoring.coreos.com"} <= kinds, proc.stdout
