{{/* The chart's name, at most 63 characters (a DNS label). */}}
{{- define "runpod-reconciler.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name alone when it already contains the chart's. */}}
{{- define "runpod-reconciler.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "runpod-reconciler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runpod-reconciler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: reconciler
{{- end }}

{{- define "runpod-reconciler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "runpod-reconciler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "runpod-reconciler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runpod-reconciler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the RunPod API key: ours, the user's, or one expected by name. */}}
{{- define "runpod-reconciler.apiKeySecret" -}}
{{- if .Values.runpod.apiKey }}
{{- include "runpod-reconciler.fullname" . }}
{{- else }}
{{- default (include "runpod-reconciler.fullname" .) .Values.runpod.existingSecret }}
{{- end }}
{{- end }}

{{/* The leader election Lease, named after the release so that two releases never share it. */}}
{{- define "runpod-reconciler.leaderLease" -}}
{{- printf "%s-leader" (include "runpod-reconciler.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "runpod-reconciler.sqlite" -}}
{{- not (or .Values.database.url .Values.database.existingSecret) }}
{{- end }}

{{/* Refuses configurations that cannot work, with the reason. */}}
{{- define "runpod-reconciler.validate" -}}
{{- if not (has .Values.mode (list "deployment" "cronjob")) }}
{{- fail (printf "mode must be deployment or cronjob, not %q" .Values.mode) }}
{{- end }}
{{- if and (eq (include "runpod-reconciler.sqlite" .) "true") (not .Values.persistence.enabled) }}
{{- fail "persistence.enabled=false needs database.url or database.existingSecret: the SQLite file must outlive the pod" }}
{{- end }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- if eq (include "runpod-reconciler.sqlite" .) "true" }}
{{- fail "replicaCount > 1 needs database.url or database.existingSecret (PostgreSQL): SQLite has one writer" }}
{{- end }}
{{- if not .Values.leaderElection.enabled }}
{{- fail "replicaCount > 1 needs leaderElection.enabled" }}
{{- end }}
{{- end }}
{{- if and (or .Values.monitoring.serviceMonitor.enabled .Values.monitoring.prometheusRule.enabled) (or (ne .Values.mode "deployment") (not .Values.metrics.service.enabled)) }}
{{- fail "monitoring.serviceMonitor and monitoring.prometheusRule need mode=deployment and metrics.service.enabled: only the loop serves /metrics" }}
{{- end }}
{{- end }}

{{/* The container's environment: the key, the database and every non-null setting. */}}
{{- define "runpod-reconciler.env" -}}
- name: RUNPOD_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "runpod-reconciler.apiKeySecret" . }}
      key: {{ .Values.runpod.existingSecretKey }}
{{- if .Values.database.existingSecret }}
- name: RECONCILER_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.existingSecretKey }}
{{- else }}
- name: RECONCILER_DATABASE_URL
  value: {{ .Values.database.url | default "sqlite:////var/lib/reconciler/reconciler.db" | quote }}
{{- end }}
- name: RECONCILER_NODE_NAME
  value: {{ required "nodeName is required" .Values.nodeName | quote }}
{{- /* The virtual node's InternalIP: where this pod can be reached. */}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: RECONCILER_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: RECONCILER_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
{{- if .Values.ssh.enabled }}
{{- /* kubectl exec over SSH: the key pair's Secret, made on first start (rbac.yaml). */}}
- name: RECONCILER_SSH_KEY_SECRET
  value: {{ printf "%s-ssh-key" (include "runpod-reconciler.fullname" .) | quote }}
{{- end }}
{{- if .Values.datacenterIds }}
- name: RECONCILER_DATACENTER_IDS
  value: {{ join "," .Values.datacenterIds | quote }}
{{- end }}
{{- /* Numbers from values are float64: integers go through int64, or 1e6 prints as 1e+06. */}}
{{- $integers := dict
  "RECONCILER_MAX_INSTANCES" .Values.maxInstances
  "RECONCILER_NODE_GPUS" .Values.nodeCapacity.gpus
  "RECONCILER_NODE_PODS" .Values.nodeCapacity.pods
  "RECONCILER_PENDING_THRESHOLD" .Values.offload.pendingThreshold }}
{{- range $name, $value := $integers }}
{{- if not (kindIs "invalid" $value) }}
- name: {{ $name }}
  value: {{ $value | int64 | toString | quote }}
{{- end }}
{{- end }}
{{- $others := dict
  "RECONCILER_MAX_GPU_PRICE" .Values.maxGpuPrice
  "RECONCILER_MAX_HOURLY_SPEND" .Values.maxHourlySpend
  "RECONCILER_NODE_CPU" .Values.nodeCapacity.cpu
  "RECONCILER_NODE_MEMORY" .Values.nodeCapacity.memory
  "RECONCILER_MAX_PENDING_TIME_BEFORE_OFFLOAD" .Values.offload.maxPendingTimeBeforeOffload }}
{{- if eq .Values.mode "deployment" }}
{{- /* The kubelet endpoint (kubectl logs), at POD_IP above. */}}
- name: RECONCILER_KUBELET_PORT
  value: {{ .Values.kubelet.port | int64 | toString | quote }}
{{- if .Values.kubelet.tlsSecret }}
- name: RECONCILER_KUBELET_TLS_SECRET
  value: {{ .Values.kubelet.tlsSecret | quote }}
{{- end }}
{{- $_ := set $others "RECONCILER_INTERVAL" .Values.interval }}
{{- $_ := set $others "RECONCILER_HEARTBEAT_INTERVAL" .Values.heartbeatInterval }}
{{- if .Values.leaderElection.enabled }}
{{- $_ := set $others "RECONCILER_LEADER_ELECT" "true" }}
{{- $_ := set $others "RECONCILER_LEADER_ELECT_LEASE_NAME" (include "runpod-reconciler.leaderLease" .) }}
{{- end }}
{{- end }}
{{- range $name, $value := $others }}
{{- if not (kindIs "invalid" $value) }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod spec both modes share. */}}
{{- define "runpod-reconciler.podSpec" -}}
serviceAccountName: {{ include "runpod-reconciler.serviceAccountName" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if eq .Values.mode "cronjob" }}
restartPolicy: Never
{{- end }}
# Service links would add *_PORT/*_SERVICE_HOST variables next to the RECONCILER_* ones.
enableServiceLinks: false
# SIGTERM lets the tick in progress finish.
terminationGracePeriodSeconds: 60
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
containers:
  - name: reconciler
    image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args: {{ if eq .Values.mode "cronjob" }}["sync", "--once", "--stay", {{ .Values.cronjob.stay | int64 | toString | quote }}]{{ else }}["sync"]{{ end }}
    env:
      {{- include "runpod-reconciler.env" . | nindent 6 }}
    {{- if eq .Values.mode "deployment" }}
    ports:
      - name: http
        containerPort: 8080
        protocol: TCP
      {{- if gt (int64 .Values.kubelet.port) 0 }}
      - name: kubelet
        containerPort: {{ .Values.kubelet.port | int64 }}
        protocol: TCP
      {{- end }}
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      initialDelaySeconds: 10
      periodSeconds: 20
      timeoutSeconds: 5
      failureThreshold: 3
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      periodSeconds: 10
      timeoutSeconds: 5
    {{- end }}
    resources:
      {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: data
        mountPath: /var/lib/reconciler
      - name: tmp
        mountPath: /tmp
volumes:
  - name: data
    {{- if .Values.persistence.enabled }}
    persistentVolumeClaim:
      claimName: {{ .Values.persistence.existingClaim | default (printf "%s-data" (include "runpod-reconciler.fullname" .)) }}
    {{- else }}
    emptyDir: {}
    {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "runpod-reconciler.podMetadata" -}}
labels:
  {{- include "runpod-reconciler.selectorLabels" . | nindent 2 }}
  {{- with .Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
