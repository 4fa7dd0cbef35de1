{{/* Names and labels, as helm create lays them out. */}}
{{- define "bc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "bc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "bc.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "bc.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "bc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{ include "bc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "bc.secretName" -}}
{{- default (include "bc.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "bc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "bc.engine" -}}
{{- $store := default (dict) (index .Values.config "store") -}}
{{- default "sqlite" (index $store "engine") -}}
{{- end -}}

{{/* The config file: the user's config with the listeners the pod needs (both on every interface). */}}
{{- define "bc.configYaml" -}}
{{- $cfg := deepCopy (default (dict) .Values.config) -}}
{{- $wh := default (dict) (index $cfg "webhooks") -}}
{{- $_ := set $wh "host" "0.0.0.0" -}}
{{- $_ := set $wh "port" .Values.ports.webhook -}}
{{- $_ := set $cfg "webhooks" $wh -}}
{{- $admin := default (dict) (index $cfg "admin") -}}
{{- $_ := set $admin "host" "0.0.0.0" -}}
{{- $_ := set $admin "port" .Values.ports.admin -}}
{{- $_ := set $admin "allowedHosts" (concat (list "localhost" "127.0.0.1" "::1") (default (list) .Values.adminAllowedHosts)) -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* shutdownTimeoutMs in whole seconds (rounded up). */}}
{{- define "bc.shutdownSeconds" -}}
{{- $boarding := default (dict) (index .Values.config "boarding") -}}
{{- $ms := int (default 30000 (index $boarding "shutdownTimeoutMs")) -}}
{{- div (add $ms 999) 1000 -}}
{{- end -}}

{{- define "bc.grace" -}}
{{- $min := add (int (include "bc.shutdownSeconds" .)) 10 -}}
{{- if .Values.terminationGracePeriodSeconds -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) $min -}}
{{- fail (printf "terminationGracePeriodSeconds %v is below config.boarding.shutdownTimeoutMs/1000 + 10 (%d): the kubelet would SIGKILL a replica while loans are in flight" .Values.terminationGracePeriodSeconds $min) -}}
{{- end -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add (int (include "bc.shutdownSeconds" .)) 30 -}}
{{- end -}}
{{- end -}}

{{/* Refusals that keep a release safe (secrets in config, SQLite with several replicas). */}}
{{- define "bc.validate" -}}
{{- $cfg := default (dict) .Values.config -}}
{{- $platform := default (dict) (index $cfg "platform") -}}
{{- $store := default (dict) (index $cfg "store") -}}
{{- $pg := default (dict) (index $store "postgres") -}}
{{- $wh := default (dict) (index $cfg "webhooks") -}}
{{- $core := default (dict) (index $cfg "core") -}}
{{- $http := default (dict) (index $core "http") -}}
{{- $customers := default (dict) (index $cfg "customers") -}}
{{- if index $platform "apiKey" }}{{ fail "config.platform.apiKey: a secret in the ConfigMap; set secrets.apiKey or secrets.existingSecret (BOARDING_API_KEY)" }}{{ end -}}
{{- if index $wh "secrets" }}{{ fail "config.webhooks.secrets: a secret in the ConfigMap; set secrets.webhookSecrets or secrets.existingSecret (BOARDING_WEBHOOK_SECRETS)" }}{{ end -}}
{{- if index $pg "password" }}{{ fail "config.store.postgres.password: a secret in the ConfigMap; set secrets.storePassword or secrets.existingSecret (BOARDING_STORE_PASSWORD)" }}{{ end -}}
{{- if index $http "password" }}{{ fail "config.core.http.password: a secret in the ConfigMap; set secrets.corePassword or secrets.existingSecret (BOARDING_CORE_PASSWORD)" }}{{ end -}}
{{- if index $http "apiKey" }}{{ fail "config.core.http.apiKey: a secret in the ConfigMap; set secrets.coreApiKey or secrets.existingSecret (BOARDING_CORE_API_KEY)" }}{{ end -}}
{{- if index $customers "tinHashKey" }}{{ fail "config.customers.tinHashKey: a secret in the ConfigMap; set secrets.tinHashKey or secrets.existingSecret (BOARDING_TIN_HASH_KEY)" }}{{ end -}}
{{- if eq (include "bc.engine" .) "sqlite" -}}
{{- if gt (int .Values.replicaCount) 1 }}{{ fail (printf "replicaCount %v with config.store.engine sqlite: SQLite is one pod on one volume; use store.engine postgres for replicas" .Values.replicaCount) }}{{ end -}}
{{- if not .Values.persistence.enabled }}{{ fail "config.store.engine sqlite needs persistence.enabled: the state (idempotency keys, strike ledger) must outlive the pod" }}{{ end -}}
{{- end -}}
{{- if and (eq (default "" (index $core "adapter")) "file") (gt (int .Values.replicaCount) 1) (not .Values.persistence.existingClaim) -}}
{{- fail "config.core.adapter file with several replicas: every replica writes one core directory; give a ReadWriteMany claim in persistence.existingClaim" -}}
{{- end -}}
{{- end -}}
