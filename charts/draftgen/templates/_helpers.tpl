{{- define "draftgen.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draftgen.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "draftgen.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "draftgen.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "draftgen.selectorLabels" -}}
app.kubernetes.io/name: {{ include "draftgen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draftgen.labels" -}}
{{ include "draftgen.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "draftgen.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "draftgen.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "draftgen.image" -}}
{{- $repository := required "image.repository is required: the repository you pushed draftgen's image to (docs/image.md says how to build and push it)" .Values.image.repository -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
What the operator does through the API, and nothing else (draftgen_operator/handlers.py,
apply.py, and kopf 1.45's own calls). Shared by the ClusterRole and the per-namespace Roles.
*/}}
{{- define "draftgen.operatorRules" -}}
# kopf watches DatasetGenerations, keeps handler progress in their annotations (patch) and writes
# status through the subresource. `get` is granted to the runner Roles the operator creates, and
# RBAC lets one grant only what one holds (escalation prevention).
- apiGroups: [draftgen.io]
  resources: [datasetgenerations]
  verbs: [get, list, watch, patch]
- apiGroups: [draftgen.io]
  resources: [datasetgenerations/status]
  verbs: [patch]
# Children carry ownerReferences with blockOwnerDeletion; clusters running the
# OwnerReferencesPermissionEnforcement admission plugin (e.g. OpenShift) require this for it.
- apiGroups: [draftgen.io]
  resources: [datasetgenerations/finalizers]
  verbs: [update]
# Indexed (list, watch); created; deleted on suspend, on a spec change and for retries.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [list, watch, create, delete]
# Reports and generate configs: indexed and created. get, patch and update are granted to the
# runners on their own reports, so the operator must hold them (escalation prevention again).
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch, create, get, patch, update]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [list, watch, create]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [list, watch, create]
# Each run's server keys (docs/security.md): created once, with fresh values, before its first
# generation Job; never read back, so create is all the operator holds on Secrets.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
# Each run's NetworkPolicy over its generation pods: created once, before its first generation Job.
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create]
# Each run's headless Service, when its replicas span nodes: the ranks find their leader under it.
- apiGroups: [""]
  resources: [services]
  verbs: [create]
# Missing volumes are reported in status instead of creating Jobs that cannot start.
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [list, watch]
# A queued Job's Workload says why Kueue has not admitted it (quota, preemption); read only while
# the Job is suspended. Harmless where Kueue is not installed.
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [list]
# kopf posts core v1 events on the DatasetGeneration; a generation Job's FailedCreate events are
# read while it has no pod (pods refused by a quota or Pod Security), and the generation pods are
# watched (scheduling, image pulls, crash loops): the DatasetGeneration says why a replica does not run.
- apiGroups: [""]
  resources: [events]
  verbs: [create, list]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
{{- end -}}

{{/* A map as "k1=v1,k2=v2", sorted: the format of DRAFTGEN_EXTRA_POD_LABELS. */}}
{{- define "draftgen.commaPairs" -}}
{{- $pairs := list -}}
{{- range $key, $value := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/*
kopf's own cluster-scope reads (kopf/_core/reactor/observation.py): it watches CRDs to notice the
DatasetGeneration CRD being (re)installed while it runs, and, when given namespaces, lists and
watches namespaces. Refused, kopf retries the namespace list for about a minute before it falls
back to the names it was given, and then keeps logging 403s.
*/}}
{{- define "draftgen.scanningRules" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- if .Values.watchNamespaces }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- end -}}

{{/* The NetworkPolicy peers that may scrape the generation pods, as JSON: metricsFrom, and the
cluster's Prometheus by its namespace (and pod labels). */}}
{{- define "draftgen.metricsPeers" -}}
{{- $peers := .Values.networkPolicy.metricsFrom | default list -}}
{{- $prometheus := .Values.networkPolicy.prometheus | default dict -}}
{{- if $prometheus.namespace -}}
{{- $peer := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" $prometheus.namespace)) -}}
{{- if $prometheus.podLabels -}}
{{- $_ := set $peer "podSelector" (dict "matchLabels" $prometheus.podLabels) -}}
{{- end -}}
{{- $peers = append $peers $peer -}}
{{- end -}}
{{- toJson $peers -}}
{{- end -}}
