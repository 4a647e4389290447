{{/* spark.json for the roles that run Spark (zync's Spark settings: master and conf). */}}
{{- define "zync.sparkSettings" -}}
{{- $conf := dict "spark.driver.memory" .Values.spark.driverMemory }}
{{- if ne .Values.spark.mode "local" }}
{{- /* fixed ports, so a NetworkPolicy can let the executors reach the driver */}}
{{- $_ := set $conf "spark.driver.port" "7078" }}
{{- $_ := set $conf "spark.driver.blockManager.port" "7079" }}
{{- end }}
{{- if eq .Values.spark.mode "kubernetes" }}
{{- $k := .Values.spark.kubernetes }}
{{- $_ := set $conf "spark.submit.deployMode" "client" }}
{{- $_ := set $conf "spark.kubernetes.namespace" .Release.Namespace }}
{{- $_ := set $conf "spark.kubernetes.container.image" (include "zync.image" .) }}
{{- $_ := set $conf "spark.kubernetes.container.image.pullPolicy" .Values.image.pullPolicy }}
{{- with .Values.imagePullSecrets }}
{{- $names := list }}{{ range . }}{{ $names = append $names .name }}{{ end }}
{{- $_ := set $conf "spark.kubernetes.container.image.pullSecrets" (join "," $names) }}
{{- end }}
{{- $_ := set $conf "spark.kubernetes.executor.podTemplateFile" (printf "%s/executor-pod.yaml" (include "zync.sparkDir" .)) }}
{{- $_ := set $conf "spark.kubernetes.executor.podTemplateContainerName" "spark-executor" }}
{{- $_ := set $conf "spark.kubernetes.executor.podNamePrefix" (printf "%s-etl" (include "zync.fullname" .)) }}
{{- $_ := set $conf "spark.executor.instances" ($k.executors | toString) }}
{{- $_ := set $conf "spark.executor.cores" ($k.executorCores | toString) }}
{{- $_ := set $conf "spark.executor.memory" $k.executorMemory }}
{{- end }}
{{- $conf = merge (dict) .Values.spark.conf $conf }}
{{- toPrettyJson (dict "master" (include "zync.sparkMaster" .) "conf" $conf) }}
{{- end }}

{{/* The executor pods of Spark on Kubernetes: the same image, its executor launcher,
the same security context; Spark adds their resources, environment and scratch. */}}
{{- define "zync.executorPod" -}}
apiVersion: v1
kind: Pod
metadata:
  labels:
    {{- include "zync.labels" . | nindent 4 }}
    app.kubernetes.io/component: spark-executor
  {{- with .Values.spark.kubernetes.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  automountServiceAccountToken: false
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.spark.kubernetes.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.spark.kubernetes.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: spark-executor
      command: ["zync-spark-executor"]
      env:
        - name: HOME
          value: {{ include "zync.home" . }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: home
          mountPath: {{ include "zync.home" . }}
        - name: tmp
          mountPath: /tmp
        {{- if .Values.lake.volume.claimName }}
        - name: lake
          mountPath: {{ .Values.lake.url }}
        {{- end }}
  volumes:
    - name: home
      emptyDir:
        sizeLimit: {{ .Values.scratch.sizeLimit }}
    - name: tmp
      emptyDir:
        sizeLimit: {{ .Values.scratch.sizeLimit }}
    {{- with .Values.lake.volume.claimName }}
    - name: lake
      persistentVolumeClaim:
        claimName: {{ . }}
    {{- end }}
{{- end }}
