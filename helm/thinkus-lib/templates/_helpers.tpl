{{/*
Thinkus Memory library chart: helpers.

Every template of this chart takes a context made by "thinkus-lib.context":
  root       the chart's top-level context ($)
  v          the component's values
  component  memory-controller | retriever | knowledge-manager | artifact | summary | gateway | all
  info       the component's entry in "thinkus-lib.catalog"
  fullname   the name of its objects
*/}}

{{/* What each component runs, answers health checks for, calls and opens. */}}
{{- define "thinkus-lib.catalog" -}}
memory-controller:
  command: [memory-controller]
  grpcService: thinkus.controller.v1.MemoryControllerService
  dependsOn: []
  needs: {store: false, vectors: false, blobs: false, embedder: true, rest: false}
retriever:
  command: [retriever]
  grpcService: thinkus.retriever.v1.RetrieverService
  dependsOn: []
  needs: {store: true, vectors: true, blobs: false, embedder: true, rest: false}
knowledge-manager:
  command: [knowledge-manager]
  grpcService: thinkus.knowledge.v1.KnowledgeManagerService
  dependsOn: []
  needs: {store: true, vectors: true, blobs: false, embedder: true, rest: false}
artifact:
  command: [artifact]
  grpcService: thinkus.artifact.v1.ArtifactService
  dependsOn: []
  needs: {store: true, vectors: false, blobs: true, embedder: false, rest: false}
summary:
  command: [summary]
  grpcService: thinkus.summary.v1.SummaryService
  dependsOn: [knowledge_manager]
  needs: {store: true, vectors: false, blobs: false, embedder: false, rest: false}
gateway:
  command: [gateway]
  grpcService: thinkus.gateway.v1.GatewayService
  dependsOn: [memory_controller, retriever, knowledge_manager, artifact, summary]
  needs: {store: true, vectors: false, blobs: false, embedder: true, rest: true}
all:
  command: [all]
  grpcService: ""
  dependsOn: []
  needs: {store: true, vectors: true, blobs: true, embedder: true, rest: true}
{{- end -}}

{{/* The components of the distributed mode, in start order. */}}
{{- define "thinkus-lib.services" -}}
[memory-controller, retriever, knowledge-manager, artifact, summary, gateway]
{{- end -}}

{{/*
Merges src into dst in place, recursively (maps merge, anything else in src replaces what dst
has, false and "" included, unlike mergeOverwrite). Call with (list dst src).
*/}}
{{- define "thinkus-lib.deepMerge" -}}
{{- $dst := index . 0 -}}
{{- $src := index . 1 -}}
{{- range $k, $val := $src -}}
{{- $cur := index $dst $k -}}
{{- if and (kindIs "map" $val) (kindIs "map" $cur) -}}
{{- include "thinkus-lib.deepMerge" (list $cur $val) -}}
{{- else -}}
{{- $_ := set $dst $k (deepCopy (list $val) | first) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The object name of a component: (dict "root" $ "v" values "component" name). */}}
{{- define "thinkus-lib.fullname" -}}
{{- $v := .v -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default (ternary "thinkus" .component (eq .component "all")) $v.nameOverride -}}
{{- if contains $name .root.Release.Name -}}
{{- .root.Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .root.Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "thinkus-lib.chart" -}}
{{- printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "thinkus-lib.selectorLabels" -}}
app.kubernetes.io/name: {{ ternary "thinkus" .component (eq .component "all") }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "thinkus-lib.labels" -}}
helm.sh/chart: {{ include "thinkus-lib.chart" . }}
{{ include "thinkus-lib.selectorLabels" . }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: thinkus
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .v.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "thinkus-lib.serviceAccountName" -}}
{{- if .v.serviceAccount.create -}}
{{- default .fullname .v.serviceAccount.name -}}
{{- else -}}
{{- default "default" .v.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "thinkus-lib.image" -}}
{{- $tag := default .root.Chart.AppVersion .v.image.tag -}}
{{- if .v.image.digest -}}
{{- printf "%s@%s" .v.image.repository .v.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .v.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The gRPC service a probe asks about. (list ctx probeValues) */}}
{{- define "thinkus-lib.probeService" -}}
{{- $ctx := index . 0 -}}
{{- $probe := index . 1 -}}
{{- if not $probe.wholeServer -}}
{{- default $ctx.info.grpcService $probe.service -}}
{{- end -}}
{{- end -}}
