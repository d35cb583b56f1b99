{{/* invledger.fullname is the prefix of every object's name. */}}
{{- define "invledger.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* invledger.selectorLabels selects one process kind's pods; call with (list . "api"). */}}
{{- define "invledger.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* invledger.labels are every object's labels; call with (list . "api"). */}}
{{- define "invledger.labels" -}}
{{ include "invledger.selectorLabels" . }}
{{- $ := index . 0 }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $.Chart.Name $.Chart.Version }}
{{- end -}}

{{- define "invledger.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* invledger.secretEnv is one variable read from the release's Secret; call with (list . "NAME" "keysField" optional). */}}
{{- define "invledger.secretEnv" -}}
{{- $ := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.existingSecret names the Secret with the URLs and tokens" $.Values.secrets.existingSecret }}
      key: {{ index $.Values.secrets.keys (index . 2) }}
      {{- if index . 3 }}
      optional: true
      {{- end }}
{{- end -}}

{{/* invledger.connectionEnv is what every invledger command needs: PostgreSQL, Redis and the partitions. */}}
{{- define "invledger.connectionEnv" -}}
{{ include "invledger.secretEnv" (list . "INVLEDGER_DATABASE_URL" "databaseURL" false) }}
{{- if eq .Values.redis.mode "cluster" }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_REDIS_CLUSTER" "redisCluster" false) }}
{{- else if eq .Values.redis.mode "sentinel" }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_REDIS_URL" "redisURL" false) }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_REDIS_SENTINELS" "redisSentinels" false) }}
- name: INVLEDGER_REDIS_SENTINEL_MASTER
  value: {{ required "redis.sentinelMaster is needed in sentinel mode" .Values.redis.sentinelMaster | quote }}
{{- else if eq .Values.redis.mode "single" }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_REDIS_URL" "redisURL" false) }}
{{- else }}
{{- fail (printf "redis.mode is %q: single, cluster or sentinel" .Values.redis.mode) }}
{{- end }}
- name: INVLEDGER_PARTITIONS
  value: {{ .Values.settings.partitions | quote }}
- name: INVLEDGER_LOG_LEVEL
  value: {{ .Values.settings.logLevel | quote }}
- name: INVLEDGER_LOG_FORMAT
  value: {{ .Values.settings.logFormat | quote }}
{{- end -}}

{{/* invledger.serveEnv is serve's environment shared by every pod (settings that must match across pods), then the per-pod ones. */}}
{{- define "invledger.serveEnv" -}}
{{ include "invledger.connectionEnv" . }}
- name: INVLEDGER_LISTEN
  value: "0.0.0.0:8080"
- name: INVLEDGER_DATA_DIR
  value: {{ .Values.dataDir | quote }}
- name: INVLEDGER_DURABILITY
  value: {{ .Values.settings.durability | quote }}
- name: INVLEDGER_REDIS_CONFIG
  value: {{ .Values.redis.config | quote }}
- name: INVLEDGER_REDIS_TIMEOUT
  value: {{ .Values.redis.timeout | quote }}
- name: INVLEDGER_HOLD_MAX_TTL
  value: {{ .Values.settings.holdMaxTTL | quote }}
{{- with .Values.settings.holdDefaultTTL }}
- name: INVLEDGER_HOLD_DEFAULT_TTL
  value: {{ . | quote }}
{{- end }}
- name: INVLEDGER_RECONCILE_INTERVAL
  value: {{ .Values.settings.reconcileInterval | quote }}
- name: INVLEDGER_ARCHIVE_AFTER
  value: {{ .Values.settings.archiveAfter | quote }}
- name: INVLEDGER_RETIRE_AFTER
  value: {{ .Values.settings.retireAfter | quote }}
- name: INVLEDGER_STREAM_RETENTION
  value: {{ .Values.settings.streamRetention | quote }}
- name: INVLEDGER_STREAM_ENTRIES
  value: {{ .Values.settings.streamEntries | quote }}
- name: INVLEDGER_SKU_LAYOUT
  value: {{ .Values.settings.skuLayout | quote }}
{{- with .Values.settings.webhookAllowNets }}
- name: INVLEDGER_WEBHOOK_ALLOW_NETS
  value: {{ . | quote }}
{{- end }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_ALERT_WEBHOOK" "alertWebhook" true) }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_ALERT_WEBHOOK_SECRET" "alertWebhookSecret" true) }}
{{- if .Values.export.enabled }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_EXPORT_NATS_URL" "exportNatsURL" true) }}
{{ include "invledger.secretEnv" (list . "INVLEDGER_EXPORT_AMQP_URL" "exportAmqpURL" true) }}
- name: INVLEDGER_EXPORT_NATS_STREAM
  value: {{ .Values.export.natsStream | quote }}
- name: INVLEDGER_EXPORT_NATS_CREATE_STREAM
  value: {{ .Values.export.natsCreateStream | quote }}
- name: INVLEDGER_EXPORT_NATS_DUPLICATE_WINDOW
  value: {{ .Values.export.natsDuplicateWindow | quote }}
- name: INVLEDGER_EXPORT_AMQP_EXCHANGE
  value: {{ .Values.export.amqpExchange | quote }}
- name: INVLEDGER_EXPORT_PREFIX
  value: {{ .Values.export.prefix | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* invledger.components is INVLEDGER_COMPONENTS of a process kind; call with (list . "api"). */}}
{{- define "invledger.components" -}}
{{- $ := index . 0 -}}
{{- $kind := index . 1 -}}
{{- if not (has $.Values.reconciler.placement (list "api" "projector")) -}}
{{- fail (printf "reconciler.placement is %q: api or projector" $.Values.reconciler.placement) -}}
{{- end -}}
{{- if not (has $.Values.export.placement (list "api" "projector")) -}}
{{- fail (printf "export.placement is %q: api or projector" $.Values.export.placement) -}}
{{- end -}}
{{ $kind }}{{ if eq $.Values.reconciler.placement $kind }},reconciler{{ end }}{{ if and $.Values.export.enabled (eq $.Values.export.placement $kind) }},export{{ end }}
{{- end -}}

{{/* invledger.podSpec is what the API and projector pods share; call with (list . "api" extraEnv extraArgs volumeMounts volumes). */}}
{{- define "invledger.podSpec" -}}
{{- $ := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $v := index $.Values $kind -}}
{{- if lt (int $.Values.terminationGracePeriodSeconds) (add $.Values.preStopSleepSeconds 20 | int) -}}
{{- fail "terminationGracePeriodSeconds must be at least preStopSleepSeconds + 20: serve's HTTP shutdown and the projector's last commit take up to 15 s, the trace flush up to 5 s" -}}
{{- end -}}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ $.Values.terminationGracePeriodSeconds }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ $kind }}
    image: {{ include "invledger.image" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args:
      - serve
      {{- if $.Values.settings.allowVolatileRedis }}
      - --allow-volatile-redis
      {{- end }}
      {{- range index . 3 }}
      - {{ . }}
      {{- end }}
    env:
      {{- include "invledger.serveEnv" $ | nindent 6 }}
      - name: INVLEDGER_COMPONENTS
        value: {{ include "invledger.components" (list $ $kind) }}
      {{- with index . 2 }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    ports:
      - name: http
        containerPort: 8080
        protocol: TCP
    livenessProbe:
      httpGet:
        path: /healthz
        port: http
      periodSeconds: 10
      timeoutSeconds: 2
      failureThreshold: 3
    readinessProbe:
      httpGet:
        path: /readyz
        port: http
      periodSeconds: 5
      timeoutSeconds: 3
      failureThreshold: 2
    lifecycle:
      preStop:
        sleep:
          seconds: {{ $.Values.preStopSleepSeconds }}
    resources:
      {{- toYaml $v.resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: data
        mountPath: {{ $.Values.dataDir }}
      {{- with index . 4 }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: data
    emptyDir: {}
  {{- with index . 5 }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}
