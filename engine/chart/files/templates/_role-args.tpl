{{/* Each role's own arguments to `zync run --only <role>`, from its values section
("zync.args.<key>" for each entry of templates/_roles.tpl; empty for a role without). */}}

{{- define "zync.args.fromKafka" -}}
- --workers-group
- {{ .values.workersGroup | default (printf "%s-from-kafka" .fullname) | quote }}
{{- end }}

{{- define "zync.args.etl" -}}
- --etl-interval
- {{ .values.interval | quote }}
{{- end }}

{{- define "zync.args.toKafka" -}}
{{- with .values.format }}
- --format
- {{ . }}
{{- end }}
- --partitions
- {{ .values.partitions | quote }}
- --replication
- {{ .values.replication | quote }}
{{- range .unit.outputs }}
- --output
- {{ . | quote }}
{{- end }}
{{- end }}

{{- define "zync.args.apply" -}}
{{- with .values.versionsPerCommit }}
- --versions-per-commit
- {{ . | quote }}
{{- end }}
{{- end }}
