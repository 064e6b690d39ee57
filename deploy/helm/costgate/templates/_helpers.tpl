{{- define "costgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "costgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "costgate.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "costgate.secretName" -}}
{{- default (printf "%s-secrets" (include "costgate.fullname" .)) .Values.existingSecret -}}
{{- end -}}

{{/* Whether /metrics needs a key: COSTGATE_METRICS_KEY in the chart's Secret or the user's. */}}
{{- define "costgate.metricsKeyed" -}}
{{- if or .Values.metrics.key (and .Values.existingSecret .Values.metrics.keyInExistingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "costgate.usesSqlite" -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.database.url) (not .Values.existingSecret) -}}true{{- end -}}
{{- end -}}

{{- define "costgate.databaseUrl" -}}
{{- if .Values.database.url -}}
{{- .Values.database.url -}}
{{- else if .Values.postgresql.enabled -}}
{{- $pg := .Values.postgresql -}}
{{- printf "postgresql://%s:%s@%s-postgresql:5432/%s" $pg.username (required "postgresql.password is required when postgresql.enabled" $pg.password | urlquery) (include "costgate.fullname" .) $pg.database -}}
{{- end -}}
{{- end -}}

{{- define "costgate.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "costgate.fullname" .) -}}
{{- else -}}
{{- .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/* The gateway's config file: the user's config, the chart's wiring, the engine's model. */}}
{{- define "costgate.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "admin_key" "env:COSTGATE_ADMIN_KEY" -}}
{{- if include "costgate.usesSqlite" . -}}
{{- $_ := set $cfg "database_url" "sqlite:////data/costgate.db" -}}
{{- else -}}
{{- $_ := set $cfg "database_url" "env:COSTGATE_DATABASE_URL" -}}
{{- end -}}
{{- $_ := set $cfg "data_dir" "/data" -}}
{{- if include "costgate.metricsKeyed" . -}}
{{- $_ := set $cfg "metrics_key" "env:COSTGATE_METRICS_KEY" -}}
{{- end -}}
{{- if include "costgate.redisUrl" . -}}
{{- $_ := set $cfg "redis_url" (include "costgate.redisUrl" .) -}}
{{- end -}}
{{- if .Values.engine.enabled -}}
{{- $engine := dict "name" .Values.engine.servedModelName "provider" "openai" "model" .Values.engine.servedModelName "api_base" (printf "http://%s-engine:8000/v1" (include "costgate.fullname" .)) "api_key" "unused" "price" .Values.engine.price -}}
{{- $_ := set $cfg "models" (append (default list $cfg.models) $engine) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
