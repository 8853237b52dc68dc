{{/* ConfigMap: the TOML config file, mounted at /etc/thinkus/config/thinkus.toml. */}}
{{- define "thinkus-lib.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
data:
  thinkus.toml: |
    {{- include "thinkus-lib.configToml" . | nindent 4 }}
{{- end -}}

{{- define "thinkus-lib.grpcProbe" -}}
{{- $ctx := index . 0 -}}
{{- $p := index . 1 -}}
{{- $service := include "thinkus-lib.probeService" (list $ctx $p) -}}
grpc:
  port: {{ $ctx.v.server.grpcPort | int }}
  {{- if $service }}
  service: {{ $service }}
  {{- end }}
periodSeconds: {{ $p.periodSeconds | int }}
failureThreshold: {{ $p.failureThreshold | int }}
timeoutSeconds: {{ $p.timeoutSeconds | int }}
{{- end -}}

{{/* Deployment. */}}
{{- define "thinkus-lib.deployment" -}}
{{- $v := .v -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicaCount | int }}
  {{- end }}
  revisionHistoryLimit: {{ $v.revisionHistoryLimit | int }}
  {{- if $v.persistence.enabled }}
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "thinkus-lib.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      annotations:
        checksum/config: {{ include "thinkus-lib.configToml" . | sha256sum }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      labels:
        {{- include "thinkus-lib.labels" . | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "thinkus-lib.serviceAccountName" . }}
      automountServiceAccountToken: {{ $v.serviceAccount.automountServiceAccountToken }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds | int }}
      containers:
        - name: thinkus
          image: {{ include "thinkus-lib.image" . | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args:
            - --config
            - /etc/thinkus/config/thinkus.toml
            {{- range (default .info.command $v.args) }}
            - {{ . | quote }}
            {{- end }}
          ports:
            - name: grpc
              containerPort: {{ $v.server.grpcPort | int }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $v.server.metricsPort | int }}
              protocol: TCP
            {{- if and .info.needs.rest $v.rest.enabled }}
            - name: http
              containerPort: {{ $v.rest.port | int }}
              protocol: TCP
            {{- end }}
            {{- if and .info.needs.rest $v.ui.enabled }}
            - name: page
              containerPort: {{ $v.ui.port | int }}
              protocol: TCP
            {{- end }}
          env:
            {{- include "thinkus-lib.env" . | nindent 12 }}
          {{- with $v.extraEnvFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- if $v.probes.startup.enabled }}
          startupProbe:
            {{- include "thinkus-lib.grpcProbe" (list . $v.probes.startup) | nindent 12 }}
          {{- end }}
          {{- if $v.probes.readiness.enabled }}
          readinessProbe:
            {{- include "thinkus-lib.grpcProbe" (list . $v.probes.readiness) | nindent 12 }}
          {{- end }}
          {{- if $v.probes.liveness.enabled }}
          livenessProbe:
            {{- include "thinkus-lib.grpcProbe" (list . $v.probes.liveness) | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $v.securityContext | nindent 12 }}
          volumeMounts:
            - name: config
              mountPath: /etc/thinkus/config
              readOnly: true
            - name: data
              mountPath: {{ $v.server.dataDir }}
            - name: tmp
              mountPath: /tmp
            {{- if $v.auth.keysSecret.name }}
            - name: api-keys
              mountPath: /etc/thinkus/keys
              readOnly: true
            {{- end }}
            {{- with $v.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ .fullname }}
        - name: data
          {{- if $v.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default .fullname $v.persistence.existingClaim }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        - name: tmp
          emptyDir: {}
        {{- if $v.auth.keysSecret.name }}
        - name: api-keys
          secret:
            secretName: {{ $v.auth.keysSecret.name }}
            items:
              - key: {{ $v.auth.keysSecret.key }}
                path: {{ $v.auth.keysSecret.key }}
        {{- end }}
        {{- with $v.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* Service. */}}
{{- define "thinkus-lib.service" -}}
{{- $v := .v -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
    {{- with $v.service.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $v.service.type }}
  selector:
    {{- include "thinkus-lib.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $v.server.grpcPort | int }}
      targetPort: grpc
      protocol: TCP
      appProtocol: kubernetes.io/h2c
    - name: metrics
      port: {{ $v.server.metricsPort | int }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
    {{- if and .info.needs.rest $v.rest.enabled }}
    - name: http
      port: {{ $v.rest.port | int }}
      targetPort: http
      protocol: TCP
      appProtocol: http
    {{- end }}
    {{- if and .info.needs.rest $v.ui.enabled }}
    - name: page
      port: {{ $v.ui.port | int }}
      targetPort: page
      protocol: TCP
      appProtocol: http
    {{- end }}
{{- end -}}

{{/* ServiceAccount. */}}
{{- define "thinkus-lib.serviceaccount" -}}
{{- if .v.serviceAccount.create -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "thinkus-lib.serviceAccountName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
  {{- with .v.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ .v.serviceAccount.automountServiceAccountToken }}
{{- end -}}
{{- end -}}

{{/* PersistentVolumeClaim for server.dataDir. */}}
{{- define "thinkus-lib.pvc" -}}
{{- $p := .v.persistence -}}
{{- if and $p.enabled (not $p.existingClaim) -}}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
  annotations:
    helm.sh/resource-policy: keep
    {{- with $p.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  accessModes:
    {{- toYaml $p.accessModes | nindent 4 }}
  {{- with $p.storageClass }}
  storageClassName: {{ . | quote }}
  {{- end }}
  resources:
    requests:
      storage: {{ $p.size }}
{{- end -}}
{{- end -}}

{{/* PodDisruptionBudget. */}}
{{- define "thinkus-lib.pdb" -}}
{{- $b := .v.podDisruptionBudget -}}
{{- if $b.enabled -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
spec:
  {{- if hasKey $b "minAvailable" }}
  minAvailable: {{ $b.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $b.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "thinkus-lib.selectorLabels" . | nindent 6 }}
{{- end -}}
{{- end -}}

{{/* HorizontalPodAutoscaler. */}}
{{- define "thinkus-lib.hpa" -}}
{{- $a := .v.autoscaling -}}
{{- if $a.enabled -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ .fullname }}
  minReplicas: {{ $a.minReplicas | int }}
  maxReplicas: {{ $a.maxReplicas | int }}
  metrics:
    {{- if $a.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage | int }}
    {{- end }}
    {{- if $a.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ $a.targetMemoryUtilizationPercentage | int }}
    {{- end }}
  {{- with $a.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/* ServiceMonitor (prometheus-operator CRD). */}}
{{- define "thinkus-lib.servicemonitor" -}}
{{- $m := .v.serviceMonitor -}}
{{- if $m.enabled -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "thinkus-lib.selectorLabels" . | nindent 6 }}
  namespaceSelector:
    matchNames:
      - {{ .root.Release.Namespace }}
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ $m.interval }}
      scrapeTimeout: {{ $m.scrapeTimeout }}
{{- end -}}
{{- end -}}

{{/* NetworkPolicy. */}}
{{- define "thinkus-lib.networkpolicy" -}}
{{- $n := .v.networkPolicy -}}
{{- if $n.enabled -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ .fullname }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "thinkus-lib.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "thinkus-lib.selectorLabels" . | nindent 6 }}
  policyTypes:
    - Ingress
    {{- if kindIs "slice" $n.egress }}
    - Egress
    {{- end }}
  ingress:
    - from:
        - podSelector:
            matchLabels:
              app.kubernetes.io/part-of: thinkus
        {{- with $n.ingressFrom }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - port: grpc
          protocol: TCP
        {{- if and .info.needs.rest .v.rest.enabled }}
        - port: http
          protocol: TCP
        {{- end }}
        {{- if and .info.needs.rest .v.ui.enabled }}
        - port: page
          protocol: TCP
        {{- end }}
    {{- with $n.metricsFrom }}
    - from:
        {{- toYaml . | nindent 8 }}
      ports:
        - port: metrics
          protocol: TCP
    {{- end }}
  {{- if kindIs "slice" $n.egress }}
  egress:
    {{- toYaml $n.egress | nindent 4 }}
  {{- end }}
{{- end -}}
{{- end -}}

{{/*
Every object of one component: (dict "root" $ "v" values "component" name).
*/}}
{{- define "thinkus-lib.component" -}}
{{- $catalog := include "thinkus-lib.catalog" . | fromYaml -}}
{{- if not (hasKey $catalog .component) -}}
{{- fail (printf "component %q: use one of memory-controller, retriever, knowledge-manager, artifact, summary, gateway, all" .component) -}}
{{- end -}}
{{- $ctx := dict "root" .root "v" .v "component" .component "info" (index $catalog .component) -}}
{{- $_ := set $ctx "fullname" (include "thinkus-lib.fullname" $ctx) -}}
{{- include "thinkus-lib.validate" $ctx -}}
{{- range $kind := list "serviceaccount" "configmap" "pvc" "service" "deployment" "pdb" "hpa" "servicemonitor" "networkpolicy" }}
{{- $doc := include (printf "thinkus-lib.%s" $kind) $ctx | trim }}
{{- if $doc }}
---
{{ $doc }}
{{- end }}
{{- end }}
{{- end -}}
