{{/* The manager's image: the repository at the tag, or at the chart's appVersion. */}}
{{- define "kiln.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels every kiln object carries, and the manager pods' selector. */}}
{{- define "kiln.selector" -}}
app.kubernetes.io/name: kiln
app.kubernetes.io/component: manager
{{- end }}

{{- define "kiln.certManager" -}}
{{- if eq .Values.webhook.certMode "cert-manager" }}true{{ else if ne .Values.webhook.certMode "self-managed" }}
{{- fail (printf "webhook.certMode is %q: use self-managed or cert-manager" .Values.webhook.certMode) }}
{{- end }}
{{- end }}
