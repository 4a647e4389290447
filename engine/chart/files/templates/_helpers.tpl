{{/* Names, labels and the pieces every role's Deployment shares. */}}

{{- define "zync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: at most 40 characters, so that "<fullname>-to-kafka-<group>"
and Spark's executor pod names stay within Kubernetes' limits. */}}
{{- define "zync.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "zync.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "zync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "zync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "zync.labels" -}}
helm.sh/chart: {{ include "zync.chart" . }}
{{ include "zync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: zync
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "zync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "zync.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "zync.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The ETL configuration's text: pipeline.config, else the file `zync build` copied. */}}
{{- define "zync.pipelineConfig" -}}
{{- if .Values.pipeline.config }}
{{- .Values.pipeline.config }}
{{- else }}
{{- .Files.Get "files/etl.yaml" }}
{{- end }}
{{- end }}

{{/* The ETL configuration, parsed; fails with one line when it is not a mapping. */}}
{{- define "zync.pipeline" -}}
{{- $config := include "zync.pipelineConfig" . | fromYaml }}
{{- if or (hasKey $config "Error") (not (hasKey $config "name")) }}
{{- fail (printf "pipeline.config: not an ETL configuration with a name (%s)" (get $config "Error" | default "no name:")) }}
{{- end }}
{{- toJson $config }}
{{- end }}

{{/* Where the pods find things (the image's user writes only to the emptyDirs). */}}
{{- define "zync.configDir" -}}/etc/zync/pipeline{{- end }}
{{- define "zync.home" -}}/var/lib/zync{{- end }}
{{- define "zync.kafkaTlsDir" -}}/etc/zync/kafka-tls{{- end }}
{{- define "zync.sparkDir" -}}/etc/zync/spark{{- end }}

{{/* Spark's master for spark.mode. */}}
{{- define "zync.sparkMaster" -}}
{{- if .Values.spark.master }}
{{- .Values.spark.master }}
{{- else if eq .Values.spark.mode "kubernetes" }}
{{- print "k8s://https://kubernetes.default.svc:443" }}
{{- else }}
{{- print "local[*]" }}
{{- end }}
{{- end }}

{{/* The environment every role's container gets: the connection profiles as zync's
ZYNC_* and AWS_* variables, secrets only as references to existing Secrets. */}}
{{- define "zync.env" -}}
- name: ZYNC_HOME
  value: {{ include "zync.home" . }}
- name: HOME
  value: {{ include "zync.home" . }}
- name: ZYNC_KAFKA_BOOTSTRAP_SERVERS
  value: {{ .Values.kafka.bootstrapServers | quote }}
- name: ZYNC_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- if hasPrefix "SASL_" .Values.kafka.securityProtocol }}
- name: ZYNC_KAFKA_SASL_MECHANISMS
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: ZYNC_KAFKA_SASL_USERNAME
  value: {{ .Values.kafka.sasl.username | quote }}
- name: ZYNC_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.passwordSecret.name }}
      key: {{ .Values.kafka.sasl.passwordSecret.key }}
{{- end }}
{{- if .Values.kafka.tls.secretName }}
- name: ZYNC_KAFKA_TLS_SERVER_CA_CERT_FILE
  value: {{ include "zync.kafkaTlsDir" . }}/{{ .Values.kafka.tls.caKey }}
{{- if .Values.kafka.tls.clientAuth }}
- name: ZYNC_KAFKA_TLS_CLIENT_CERT_FILE
  value: {{ include "zync.kafkaTlsDir" . }}/{{ .Values.kafka.tls.certKey }}
- name: ZYNC_KAFKA_TLS_CLIENT_KEY_FILE
  value: {{ include "zync.kafkaTlsDir" . }}/{{ .Values.kafka.tls.keyKey }}
{{- end }}
{{- end }}
{{- with .Values.schemaRegistry }}
{{- if .url }}
- name: ZYNC_REGISTRY_URL
  value: {{ .url | quote }}
{{- if .user }}
- name: ZYNC_REGISTRY_USER
  value: {{ .user | quote }}
- name: ZYNC_REGISTRY_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .passwordSecret.name }}
      key: {{ .passwordSecret.key }}
{{- end }}
{{- end }}
{{- end }}
- name: ZYNC_LAKE
  value: {{ .Values.lake.url | quote }}
{{- with .Values.lake.s3 }}
{{- if .region }}
- name: AWS_REGION
  value: {{ .region | quote }}
{{- end }}
{{- if .endpoint }}
- name: AWS_ENDPOINT_URL
  value: {{ .endpoint | quote }}
{{- end }}
{{- if .allowHttp }}
- name: AWS_ALLOW_HTTP
  value: "true"
{{- end }}
{{- if .credentialsSecret.name }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .credentialsSecret.name }}
      key: {{ .credentialsSecret.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .credentialsSecret.name }}
      key: {{ .credentialsSecret.secretAccessKeyKey }}
{{- end }}
{{- end }}
{{- if .Values.api.controlTokenSecret.name }}
- name: ZYNC_CONTROL_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.api.controlTokenSecret.name }}
      key: {{ .Values.api.controlTokenSecret.key }}
{{- end }}
{{- end }}
