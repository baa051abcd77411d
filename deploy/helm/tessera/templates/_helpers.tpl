{{/* Names and labels shared by every template. */}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tessera.fullname" -}}
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

{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The tessera/model label value: model.name, or model.file made a valid label value. */}}
{{- define "tessera.modelLabel" -}}
{{- if .Values.model.name -}}
{{- .Values.model.name -}}
{{- else -}}
{{- regexReplaceAll "[^-_.A-Za-z0-9]" (trimSuffix ".gguf" .Values.model.file) "-" | trunc 63 | trimAll "-_." -}}
{{- end -}}
{{- end -}}

{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "tessera.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tessera.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tessera.modelPath" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.model.mountPath) .Values.model.file -}}
{{- end -}}

{{/* preStop sleep + drain: the least grace that lets running requests finish. */}}
{{- define "tessera.minGrace" -}}
{{- add .Values.router.preStopSleepSeconds .Values.router.drainTimeoutSeconds -}}
{{- end -}}

{{- define "tessera.terminationGrace" -}}
{{- $min := include "tessera.minGrace" . | int -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $min 15 -}}
{{- else -}}
{{- $grace := .Values.terminationGracePeriodSeconds | int -}}
{{- if lt $grace $min -}}
{{- fail (printf "terminationGracePeriodSeconds=%d is below router.preStopSleepSeconds + router.drainTimeoutSeconds = %d: Kubernetes would kill requests the router is still draining" $grace $min) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}
{{- end -}}

{{/* Cross-field checks the schema cannot express; rendered by deployment.yaml. */}}
{{- define "tessera.validate" -}}
{{- if and (eq .Values.model.source "pvc") (not .Values.model.pvc.claimName) -}}
{{- fail "model.source=pvc needs model.pvc.claimName (an existing PersistentVolumeClaim holding model.file)" -}}
{{- end -}}
{{- if and (eq .Values.model.source "download") (not .Values.model.download.url) -}}
{{- fail "model.source=download needs model.download.url" -}}
{{- end -}}
{{- $workers := int .Values.parallelism.workers -}}
{{- $ports := list (int .Values.router.grpcPort) (int .Values.router.metricsPort) -}}
{{- if gt (int .Values.router.httpPort) 0 -}}
{{- $ports = append $ports (int .Values.router.httpPort) -}}
{{- end -}}
{{- range $base := list .Values.worker.grpcPort .Values.worker.metricsPort -}}
{{- if gt (add $base $workers -1) 65535 -}}
{{- fail (printf "worker.grpcPort and worker.metricsPort + parallelism.workers - 1 must be at most 65535: worker i listens on worker.grpcPort + i and serves metrics on worker.metricsPort + i, got base %d with %d workers" (int $base) $workers) -}}
{{- end -}}
{{- range $i := until $workers -}}
{{- $ports = append $ports (int (add $base $i)) -}}
{{- end -}}
{{- end -}}
{{- if ne (len (uniq $ports)) (len $ports) -}}
{{- fail (printf "router.grpcPort, router.httpPort (unless 0), router.metricsPort, worker.grpcPort .. worker.grpcPort + workers - 1 and worker.metricsPort .. worker.metricsPort + workers - 1 must differ (one pod network namespace; worker i uses base + i), got %v" $ports) -}}
{{- end -}}
{{- if .Values.tls.existingSecret -}}
{{- if not .Values.podSecurityContext.fsGroup -}}
{{- fail "tls.existingSecret needs podSecurityContext.fsGroup: the certificate and key files are mode 0440, readable by the router only through the group fsGroup gives them" -}}
{{- end -}}
{{- if .Values.inferencePool.enabled -}}
{{- fail "tls.existingSecret cannot be combined with inferencePool.enabled: the endpoint picker scrapes /metrics on router.httpPort over plain HTTP and the gateway sends plain HTTP to it; terminate TLS at the gateway instead" -}}
{{- end -}}
{{- end -}}
{{- $device := include "tessera.workerDevice" . -}}
{{- if and (gt (int .Values.parallelism.tensorParallel) 1) (ne $device "cuda") -}}
{{- fail (printf "parallelism.tensorParallel=%d needs worker.device cuda (or \"\", which then means cuda): tessera-worker accepts --tensor-parallel only with --device cuda; got worker.device=%q" (int .Values.parallelism.tensorParallel) .Values.worker.device) -}}
{{- end -}}
{{- if and .Values.parallelism.gpu (eq $device "cpu") -}}
{{- fail "parallelism.gpu requests GPUs for the workers, but worker.device=cpu would leave them unused" -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) -}}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" -}}
{{- end -}}
{{- end -}}

{{/* Where the router container mounts tls.existingSecret. */}}
{{- define "tessera.tlsDir" -}}
/etc/tessera/tls
{{- end -}}

{{/* The workers' --device value, "" for no flag (the worker's default, auto): worker.device, or
cuda when parallelism.gpu is true or parallelism.tensorParallel > 1. */}}
{{- define "tessera.workerDevice" -}}
{{- if .Values.worker.device -}}
{{- .Values.worker.device -}}
{{- else if or .Values.parallelism.gpu (gt (int .Values.parallelism.tensorParallel) 1) -}}
cuda
{{- end -}}
{{- end -}}

{{/* The model volume, read-only, in the router and worker containers. */}}
{{- define "tessera.modelMount" -}}
- name: model
  mountPath: {{ .Values.model.mountPath }}
  readOnly: true
  {{- if and (eq .Values.model.source "pvc") .Values.model.pvc.subPath }}
  subPath: {{ .Values.model.pvc.subPath }}
  {{- end }}
{{- end -}}

{{/* $TESSERA_WORKER_SECRET from workerSecret's Secret, for both containers (empty when unset). */}}
{{- define "tessera.workerSecretEnv" -}}
{{- with .Values.workerSecret.existingSecret }}
- name: TESSERA_WORKER_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.workerSecret.key }}
{{- end }}
{{- end -}}

{{/* The endpoint picker (EPP) of the InferencePool: rendered here, or an existing Service. */}}
{{- define "tessera.eppName" -}}
{{- if .Values.inferencePool.endpointPicker.name -}}
{{- .Values.inferencePool.endpointPicker.name -}}
{{- else -}}
{{- printf "%s-epp" (include "tessera.fullname" . | trunc 59 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{- define "tessera.eppSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}-epp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tessera.eppLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tessera.eppSelectorLabels" . }}
app.kubernetes.io/component: endpoint-picker
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The InferencePool's target port is the OpenAI HTTP port: it must exist. */}}
{{- define "tessera.validateInferencePool" -}}
{{- if le (int .Values.router.httpPort) 0 -}}
{{- fail "inferencePool.enabled needs router.httpPort > 0: the pool's target port is the router's OpenAI HTTP port (the endpoint picker also scrapes /metrics there)" -}}
{{- end -}}
{{- if and (not .Values.inferencePool.endpointPicker.create) (not .Values.inferencePool.endpointPicker.name) -}}
{{- fail "inferencePool.endpointPicker.create=false needs inferencePool.endpointPicker.name (the Service of an existing endpoint picker)" -}}
{{- end -}}
{{- end -}}

{{/* worker.resources of one worker container, plus nvidia.com/gpu = tensorParallel when
parallelism.gpu (so the pod asks for workers x tensorParallel GPUs in all). */}}
{{- define "tessera.workerResources" -}}
{{- $resources := deepCopy .Values.worker.resources -}}
{{- if .Values.parallelism.gpu -}}
{{- $gpus := int .Values.parallelism.tensorParallel -}}
{{- range $kind := list "requests" "limits" -}}
{{- $quantities := get $resources $kind | default dict -}}
{{- if hasKey $quantities "nvidia.com/gpu" -}}
{{- fail (printf "worker.resources.%s names nvidia.com/gpu while parallelism.gpu is true: the chart sets it (tensorParallel = %d per worker container, workers x tensorParallel = %d per pod)" $kind $gpus (mul $gpus (int $.Values.parallelism.workers))) -}}
{{- end -}}
{{- $_ := set $quantities "nvidia.com/gpu" $gpus -}}
{{- $_ := set $resources $kind $quantities -}}
{{- end -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/* Worker i of parallelism.workers (dict "root" $ "i" i): its container name and the name of
its metrics port. One worker keeps "worker" / "worker-metrics"; several are worker-0, worker-1,
... with ports worker0-metrics, worker1-metrics, ... (a port name has at most 15 characters). */}}
{{- define "tessera.workerName" -}}
{{- if eq (int .root.Values.parallelism.workers) 1 -}}
worker
{{- else -}}
{{- printf "worker-%d" (int .i) -}}
{{- end -}}
{{- end -}}

{{- define "tessera.workerMetricsPortName" -}}
{{- if eq (int .root.Values.parallelism.workers) 1 -}}
worker-metrics
{{- else -}}
{{- printf "worker%d-metrics" (int .i) -}}
{{- end -}}
{{- end -}}
