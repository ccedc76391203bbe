{{- define "gvisor.commonLabels" -}}
app.kubernetes.io/managed-by: gvisorgen
app.kubernetes.io/part-of: gvisor
{{- end }}

{{- define "gvisor.installerLabels" -}}
app.kubernetes.io/component: node-installer
app.kubernetes.io/name: runsc-installer
{{- end }}

{{- define "gvisor.image" -}}
{{- $i := .Values.gvisor.installer.image -}}
{{- if $i.digest }}{{ $i.repository }}:{{ $i.tag }}@{{ $i.digest }}{{ else }}{{ $i.repository }}:{{ $i.tag }}{{ end -}}
{{- end }}

{{/* The installer scripts by base name, from files/ (copied from cue/installer by run.sh). */}}
{{- define "gvisor.scripts" -}}
{{- $data := dict -}}
{{- range $path, $_ := .Files.Glob "files/*.sh" }}{{ $_ := set $data (base $path) ($.Files.Get $path) }}{{ end -}}
{{- /* CUE json.Marshal does not HTML-escape; sprig toJson does */ -}}
{{- toJson $data | replace "\\u003c" "<" | replace "\\u003e" ">" | replace "\\u0026" "&" -}}
{{- end }}

{{- define "gvisor.hostDirs" -}}
{{- $h := .Values.gvisor.host -}}
- {name: host-install-dir, path: {{ $h.installDir | quote }}, type: Directory}
- {name: host-containerd, path: {{ dir $h.containerdConfig | quote }}, type: Directory}
- {name: host-state, path: {{ $h.stateDir | quote }}, type: DirectoryOrCreate}
{{- end }}

{{- define "gvisor.container" -}}
{{- $G := .Values.gvisor -}}
{{- $I := $G.installer -}}
{{- $pins := list -}}
{{- range $arch, $a := $G.release.sha512 }}{{ range $artifact, $sum := $a }}{{ $pins = append $pins (printf "%s/%s %s" $arch $artifact $sum) }}{{ end }}{{ end -}}
{{- $lines := list -}}
{{- range $k, $v := $G.runsc.config }}{{ if kindIs "string" $v }}{{ $lines = append $lines (printf "%s = %s" $k (toJson $v)) }}{{ else }}{{ $lines = append $lines (printf "%s = %v" $k $v) }}{{ end }}{{ end -}}
image: {{ include "gvisor.image" . }}
imagePullPolicy: {{ $I.image.pullPolicy }}
env:
- {name: GVISORGEN_SCRIPTS, value: /gvisorgen}
- {name: GVISOR_MODE, value: {{ $I.mode | quote }}}
- {name: GVISOR_VERSION, value: {{ $G.version | quote }}}
- {name: GVISOR_BASE_URL, value: {{ $G.release.baseURL | quote }}}
- {name: GVISOR_LAYOUT, value: {{ $G.release.layout | quote }}}
- {name: GVISOR_SHA512_PINS, value: {{ join "\n" $pins | quote }}}
- {name: GVISOR_CA_BUNDLE, value: {{ $G.release.caBundle | quote }}}
- {name: CONTAINERD_MIN_VERSION, value: {{ $G.release.containerdFloor | default "" | quote }}}
- {name: HOST_ROOT, value: /host}
- {name: INSTALL_DIR, value: {{ $G.host.installDir | quote }}}
- {name: INSTALL_DIR_ON_PATH, value: {{ $G.host.installDirOnPath | toString | quote }}}
- {name: CONTAINERD_CONFIG, value: {{ $G.host.containerdConfig | quote }}}
- {name: CONTAINERD_CONFIG_MODE, value: {{ $G.host.containerdConfigMode | quote }}}
- {name: CONTAINERD_SERVICE, value: {{ join " " $G.host.containerdService | quote }}}
- {name: RUNSC_CONFIG, value: {{ $G.host.runscConfig | quote }}}
- {name: RUNSC_CONFIG_TOML, value: {{ join "\n" $lines | quote }}}
- {name: ADOPT_FOREIGN_RUNSC, value: {{ $G.host.adoptForeignRunsc | toString | quote }}}
- {name: STATE_DIR, value: {{ $G.host.stateDir | quote }}}
- {name: DOWNLOAD_TIMEOUT_SECONDS, value: {{ $G.release.downloadTimeoutSeconds | toString | quote }}}
- {name: DOWNLOAD_RETRIES, value: {{ $G.release.downloadRetries | toString | quote }}}
- {name: KEEP_OLD_RELEASES, value: {{ $G.release.keepOld | toString | quote }}}
- {name: RESTART_TIMEOUT_SECONDS, value: {{ $I.restartTimeoutSeconds | toString | quote }}}
- {name: HOST_PATH, value: {{ $G.host.commandPath | quote }}}
resources: {{ toJson $I.resources }}
volumeMounts:
- {name: scripts, mountPath: /gvisorgen, readOnly: true}
{{- range (include "gvisor.hostDirs" . | fromYamlArray) }}
- {name: {{ .name }}, mountPath: {{ printf "/host%s" .path | quote }}}
{{- end }}
securityContext: {privileged: true}
{{- end }}
