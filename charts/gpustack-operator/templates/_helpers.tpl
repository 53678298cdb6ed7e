{{/* Names. The webhook Service and the cert-manager Certificate keep the worker's default names
(gpustack-operator-worker-webhook), since the worker's webhook configurations name them. */}}
{{- define "gpustack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpustack.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpustack.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "gpustack.worker" -}}{{ include "gpustack.fullname" . }}-worker{{- end -}}
{{- define "gpustack.deviceManager" -}}{{ include "gpustack.fullname" . }}-device-manager{{- end -}}
{{- define "gpustack.webhookService" -}}gpustack-operator-worker-webhook{{- end -}}

{{- define "gpustack.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpustack.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpustack-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gpustack.selector" -}}
app.kubernetes.io/name: {{ include "gpustack.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpustack.annotations" -}}
{{- with .Values.commonAnnotations }}
annotations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{- define "gpustack.image" -}}
{{- $registry := .Values.global.imageRegistry -}}
{{- $tag := default (printf "v%s" .Chart.AppVersion) .Values.image.tag -}}
{{- if $registry -}}{{ printf "%s/%s:%s" $registry .Values.image.repository $tag }}{{- else -}}{{ printf "%s:%s" .Values.image.repository $tag }}{{- end -}}
{{- end -}}

{{- define "gpustack.pullPolicy" -}}
{{- default .Values.global.imagePullPolicy .Values.image.pullPolicy -}}
{{- end -}}

{{/* An image reference from {repository, tag}, under global.imageRegistry. */}}
{{- define "gpustack.imageOf" -}}
{{- $registry := .root.Values.global.imageRegistry -}}
{{- if $registry -}}{{ printf "%s/%s:%s" $registry .image.repository .image.tag }}{{- else -}}{{ printf "%s:%s" .image.repository .image.tag }}{{- end -}}
{{- end -}}

{{/* Does the cluster use cert-manager? global.certmanager.enabled: auto|true|false. */}}
{{- define "gpustack.certManager" -}}
{{- $mode := toString .Values.global.certmanager.enabled -}}
{{- if eq $mode "true" -}}true
{{- else if eq $mode "false" -}}
{{- else if lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "certificates.cert-manager.io" -}}true
{{- end -}}
{{- end -}}

{{/* --enable for the plugins this release does not ship: never loaded, whatever a node says. */}}
{{- define "gpustack.unshipped" -}}
{{- $off := list -}}
{{- range $name := list "amd" "ascend" "cambricon" "hygon" "iluvatar" "metax" "mthreads" "nvidia" "thead" -}}
{{- $p := index $.Values.plugins $name -}}
{{- if not $p.enabled -}}{{- $off = append $off (printf "%s=off" $name) -}}{{- end -}}
{{- end -}}
{{- join "," $off -}}
{{- end -}}

{{/* GPUSTACK_<MFR>_* for the worker and the device manager (docs/behaviour.md §10.2). */}}
{{- define "gpustack.manufacturerEnv" -}}
{{- range $key, $row := .Values.global.manufacturers }}
{{- if $row }}
{{- $upper := upper (replace "-" "_" $key) }}
{{- with $row.pciVendorID }}
- {name: GPUSTACK_{{ $upper }}_PCI_VENDOR_ID, value: {{ . | quote }}}
{{- end }}
{{- with $row.resourceName }}
- {name: GPUSTACK_{{ $upper }}_ACCELERATABLE_RESOURCE_NAME, value: {{ . | quote }}}
{{- end }}
{{- with $row.runtimeName }}
- {name: GPUSTACK_{{ $upper }}_ACCELERATABLE_RUNTIME_NAME, value: {{ . | quote }}}
{{- end }}
{{- with $row.partitionKind }}
- {name: GPUSTACK_{{ $upper }}_PARTITION_KIND, value: {{ . | quote }}}
{{- end }}
{{- end }}
{{- end }}
- {name: GPUSTACK_LEDGER_RELEASE_TERMINATED_PODS, value: {{ .Values.ledgerReleaseTerminatedPods | quote }}}
{{- end -}}

{{/* Init containers that copy the third-party plugins into the plugins.d volume. */}}
{{- define "gpustack.pluginInstallers" -}}
{{- range .Values.plugins.thirdParty }}
- name: plugin-{{ .name }}
  image: {{ include "gpustack.imageOf" (dict "root" $ "image" .image) }}
  imagePullPolicy: {{ default $.Values.global.imagePullPolicy .image.pullPolicy }}
  args: ["--to", "/target"]
  securityContext:
    # root, so the files are root's: the loader trusts root's files or its own user's.
    runAsUser: 0
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities: {drop: [ALL], add: [CHOWN, FOWNER]}
  volumeMounts:
    - {name: plugins-d, mountPath: /target}
{{- end }}
{{- end -}}

{{- /* One init container per enforcer delivered as an image: it copies the image's directory
(plugins.config.<name>.enforcer.path) into the volume the device manager stages from. The image
needs a shell and cp. */}}
{{- define "gpustack.enforcerCopiers" -}}
{{- range $name, $settings := .Values.plugins.config }}
{{- with $settings.enforcer }}
{{- if .image }}
- name: enforcer-{{ $name }}
  image: {{ include "gpustack.imageOf" (dict "root" $ "image" .image) }}
  imagePullPolicy: {{ default $.Values.global.imagePullPolicy .image.pullPolicy }}
  command: ["/bin/sh", "-c", "cp -R \"$0\"/. /target/", {{ .path | quote }}]
  securityContext:
    runAsUser: 0
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities: {drop: [ALL]}
  volumeMounts:
    - {name: enforcer-{{ $name }}, mountPath: /target}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "gpustack.metricsAnnotations" -}}
{{- if .root.Values.metrics.annotations }}
prometheus.io/scrape: "true"
prometheus.io/scheme: https
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
