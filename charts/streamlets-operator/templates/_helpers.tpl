{{/* Chart name, truncated to a DNS label. */}}
{{- define "streamlets-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name: the Deployment, ServiceAccount, roles and the peering object. */}}
{{- define "streamlets-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "streamlets-operator.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "streamlets-operator.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "streamlets-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "streamlets-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "streamlets-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamlets-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "streamlets-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamlets-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "streamlets-operator.sparkServiceAccountName" -}}
{{- default (printf "%s-spark" (include "streamlets-operator.fullname" .) | trunc 63 | trimSuffix "-") .Values.sparkServiceAccount.name }}
{{- end }}

{{/* The namespaces Spark drivers run in that get the driver ServiceAccount. */}}
{{- define "streamlets-operator.sparkNamespaces" -}}
{{- join "," (default .Values.watchNamespaces .Values.sparkServiceAccount.namespaces) }}
{{- end }}

{{- define "streamlets-operator.peeringName" -}}
{{- default (include "streamlets-operator.fullname" .) .Values.leaderElection.peeringName }}
{{- end }}

{{/*
What the operator does to applications and their children, in the namespaces it watches.
Verbs and resources are listed one by one: no wildcards.
*/}}
{{- define "streamlets-operator.appRules" -}}
- apiGroups: ["streamlets.io"]
  resources: ["streamletapplications"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["streamlets.io"]
  resources: ["streamletapplications/status"]
  verbs: ["get", "patch", "update"]
# ownerReferences with blockOwnerDeletion need update on the owner's finalizers
# (admission plugin OwnerReferencesPermissionEnforcement).
- apiGroups: ["streamlets.io"]
  resources: ["streamletapplications/finalizers"]
  verbs: ["update"]
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["create", "get", "list", "watch", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims", "secrets"]
  verbs: ["create", "get", "list", "watch", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.api.enabled }}
# The operations API reads each streamlet's driver pod (its IP) to scrape its metrics.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list"]
{{- end }}
{{- end }}
