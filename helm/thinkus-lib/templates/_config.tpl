{{/*
The config file of a component (TOML), and the environment that carries what must not be in it.
*/}}

{{- define "thinkus-lib.addr" -}}
{{- $bind := index . 0 -}}
{{- $port := index . 1 | int -}}
{{- if contains ":" $bind -}}[{{ $bind }}]:{{ $port }}{{- else -}}{{ $bind }}:{{ $port }}{{- end -}}
{{- end -}}

{{/* Whether the database URI comes from the environment (a Secret). */}}
{{- define "thinkus-lib.databaseFromEnv" -}}
{{- $db := .v.storage.database -}}
{{- if or $db.uriSecret.name $db.postgres.host -}}true{{- end -}}
{{- end -}}

{{/* Refuses values that would give a broken system. */}}
{{- define "thinkus-lib.validate" -}}
{{- $v := .v -}}
{{- $needs := .info.needs -}}
{{- if not (has $v.auth.mode (list "dev" "api_key")) -}}
{{- fail (printf "auth.mode %q: use api_key (or dev, which serves loopback peers only)" $v.auth.mode) -}}
{{- end -}}
{{- if and (eq $v.auth.mode "api_key") (not $v.auth.keysSecret.name) (not (dig "auth" "keys" list ($v.config | default dict))) -}}
{{- fail "auth.keysSecret.name: api_key mode needs a Secret with the keys file (or config.auth.keys)" -}}
{{- end -}}
{{- if and $v.storage.database.postgres.host (not $v.storage.database.postgres.passwordSecret.name) (not $v.storage.database.uriSecret.name) -}}
{{- fail "storage.database.postgres.passwordSecret.name: the PostgreSQL password must come from a Secret" -}}
{{- end -}}
{{- if and (ne .component "all") (not $v.storage.allowEmbedded) -}}
{{- if and $needs.store (not (include "thinkus-lib.databaseFromEnv" .)) (not (hasPrefix "postgres" $v.storage.database.uri)) -}}
{{- fail (printf "%s: storage.database is SQLite in the pod, not shared with the other services; set storage.database.postgres.host or uriSecret (or storage.allowEmbedded=true)" .component) -}}
{{- end -}}
{{- if and $needs.vectors (not (regexMatch "^qdrants?://" $v.storage.vectors.uri)) -}}
{{- fail (printf "%s: storage.vectors is qdrant-edge in the pod, not shared; set storage.vectors.uri=qdrant://HOST:6334 (or storage.allowEmbedded=true)" .component) -}}
{{- end -}}
{{- end -}}
{{- if ne .component "all" -}}
{{- range $dep := .info.dependsOn -}}
{{- if not (index $v.endpoints $dep) -}}
{{- fail (printf "endpoints.%s: the %s calls it; set its address (http://HOST:50051)" $dep $.component) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $v.autoscaling.enabled $v.persistence.enabled (not $v.storage.allowEmbedded) -}}
{{- fail "autoscaling.enabled with persistence.enabled: replicas cannot share a ReadWriteOnce volume" -}}
{{- end -}}
{{- end -}}

{{/* The config file (TOML): config values, then the keys the chart manages. */}}
{{- define "thinkus-lib.configToml" -}}
{{- $v := .v -}}
{{- $needs := .info.needs -}}
{{- $cfg := deepCopy ($v.config | default dict) -}}
{{- $server := dict
      "grpc_addr" (include "thinkus-lib.addr" (list $v.server.bindAddress $v.server.grpcPort))
      "metrics_addr" (include "thinkus-lib.addr" (list $v.server.bindAddress $v.server.metricsPort))
      "data_dir" $v.server.dataDir
      "models_dir" $v.server.modelsDir -}}
{{- $managed := dict "server" $server -}}
{{- $storage := dict -}}
{{- if $needs.store -}}
{{- $_ := set $storage "database_max_connections" ($v.storage.database.maxConnections | int) -}}
{{- if and $v.storage.database.uri (not (include "thinkus-lib.databaseFromEnv" .)) -}}
{{- $_ := set $storage "database" $v.storage.database.uri -}}
{{- end -}}
{{- end -}}
{{- if and $needs.vectors $v.storage.vectors.uri -}}
{{- $uri := $v.storage.vectors.uri -}}
{{- if $v.storage.vectors.apiKeySecret.name -}}
{{- $uri = printf "%s%sapi_key_env=THINKUS_QDRANT_API_KEY" $uri (ternary "&" "?" (contains "?" $uri)) -}}
{{- end -}}
{{- $_ := set $storage "vectors" $uri -}}
{{- end -}}
{{- if and $needs.blobs $v.storage.blobs.uri -}}
{{- $_ := set $storage "blobs" $v.storage.blobs.uri -}}
{{- end -}}
{{- if $storage -}}{{- $_ := set $managed "storage" $storage -}}{{- end -}}
{{- if ne .component "all" -}}
{{- $endpoints := dict "connect_timeout_ms" ($v.endpoints.connect_timeout_ms | int) -}}
{{- range $dep := .info.dependsOn -}}
{{- $_ := set $endpoints $dep (index $v.endpoints $dep) -}}
{{- end -}}
{{- $_ := set $managed "endpoints" $endpoints -}}
{{- end -}}
{{- $auth := dict "mode" $v.auth.mode -}}
{{- if $v.auth.keysSecret.name -}}
{{- $_ := set $auth "keys_file" (printf "/etc/thinkus/keys/%s" $v.auth.keysSecret.key) -}}
{{- end -}}
{{- $_ := set $managed "auth" $auth -}}
{{- if $v.llm.apiKeySecret.name -}}
{{- $_ := set $managed "llm" (dict "api_key_env" "THINKUS_LLM_API_KEY") -}}
{{- end -}}
{{- if and $needs.embedder $v.embedder.apiKeySecret.name -}}
{{- $_ := set $managed "embedder" (dict "api_key_env" "THINKUS_EMBEDDER_API_KEY") -}}
{{- end -}}
{{- if $v.telemetry.otlpEndpoint -}}
{{- $_ := set $managed "telemetry" (dict "otlp_endpoint" $v.telemetry.otlpEndpoint) -}}
{{- end -}}
{{- $gateway := dict -}}
{{- if and $needs.rest $v.rest.enabled -}}
{{- $_ := set $gateway "rest_listen" (include "thinkus-lib.addr" (list $v.server.bindAddress $v.rest.port)) -}}
{{- end -}}
{{- if and $needs.rest $v.ui.enabled -}}
{{- $_ := set $gateway "ui_listen" (include "thinkus-lib.addr" (list $v.server.bindAddress $v.ui.port)) -}}
{{- end -}}
{{- if $gateway -}}
{{- $_ := set $managed "gateway" $gateway -}}
{{- end -}}
{{- include "thinkus-lib.deepMerge" (list $cfg $managed) -}}
{{- include "thinkus-lib.toml" $cfg -}}
{{- end -}}

{{/* Environment variables from Secrets and the downward API. */}}
{{- define "thinkus-lib.env" -}}
{{- $v := .v -}}
{{- $needs := .info.needs -}}
{{- $db := $v.storage.database -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),service.instance.id=$(POD_NAME)"
{{- if $needs.store }}
{{- if $db.uriSecret.name }}
- name: THINKUS__STORAGE__DATABASE
  valueFrom:
    secretKeyRef:
      name: {{ $db.uriSecret.name }}
      key: {{ $db.uriSecret.key }}
{{- else if $db.postgres.host }}
- name: THINKUS_PG_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $db.postgres.passwordSecret.name }}
      key: {{ $db.postgres.passwordSecret.key }}
- name: THINKUS__STORAGE__DATABASE
  value: {{ printf "postgres://%s:$(THINKUS_PG_PASSWORD)@%s:%d/%s%s" $db.postgres.user $db.postgres.host ($db.postgres.port | int) $db.postgres.database (ternary (printf "?%s" $db.postgres.params) "" (ne $db.postgres.params "")) | quote }}
{{- end }}
{{- end }}
{{- if and $needs.vectors $v.storage.vectors.apiKeySecret.name }}
- name: THINKUS_QDRANT_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $v.storage.vectors.apiKeySecret.name }}
      key: {{ $v.storage.vectors.apiKeySecret.key }}
{{- end }}
{{- if and $needs.blobs $v.storage.blobs.credentialsSecret.name }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ $v.storage.blobs.credentialsSecret.name }}
      key: {{ $v.storage.blobs.credentialsSecret.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $v.storage.blobs.credentialsSecret.name }}
      key: {{ $v.storage.blobs.credentialsSecret.secretAccessKeyKey }}
{{- end }}
{{- if $v.llm.apiKeySecret.name }}
- name: THINKUS_LLM_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $v.llm.apiKeySecret.name }}
      key: {{ $v.llm.apiKeySecret.key }}
{{- end }}
{{- if and $needs.embedder $v.embedder.apiKeySecret.name }}
- name: THINKUS_EMBEDDER_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $v.embedder.apiKeySecret.name }}
      key: {{ $v.embedder.apiKeySecret.key }}
{{- end }}
{{- if and $needs.rest $v.ui.enabled $v.ui.sessionSecret.name }}
- name: THINKUS__GATEWAY__UI_SESSION_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $v.ui.sessionSecret.name }}
      key: {{ $v.ui.sessionSecret.key }}
{{- end }}
{{- if and $v.auth.clientKeySecret.name (or .info.dependsOn $v.args) }}
- name: THINKUS_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $v.auth.clientKeySecret.name }}
      key: {{ $v.auth.clientKeySecret.key }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
