//go:build apiserver

package apiserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// The mutation suite takes the generated objects of one target, changes one
// field the way a person could in values or a patch, and asks both the real
// kube-apiserver (server-side dry-run apply, strict field validation) and
// `gvisorgen vet --manifests FILE` about the result.
//
// Two figures are reported apart:
//   - schema parity: every mutation the server rejects, vet rejects; every
//     mutation the server accepts, vet accepts;
//   - policy: mutations vet rejects on purpose although Kubernetes allows them,
//     each with its reason (mutation.policy).
//
// Set APISERVER_PARITY=report to print the table without failing on a
// mismatch (the generated objects must still be accepted),
// APISERVER_VERBOSE=1 to log both sides' full messages for every mutation, and
// APISERVER_REPORT=FILE to write the table, the policy list and every full
// message to FILE.

const mutationTarget = "kind"

// Files of generated/<mutationTarget>/ the mutations edit.
const (
	ds = "daemonset-runsc-installer.yaml"
	rc = "runtimeclass-gvisor.yaml"
	sc = "storageclass-gvisor-workspace.yaml"
	ns = "namespace-gvisor-system.yaml"
	sa = "serviceaccount-runsc-installer.yaml"
	cm = "configmap-runsc-installer-scripts.yaml"
	// The readiness gate's (gate_test.go names them too).
	vap   = gatePolicy
	vapb  = gateBinding
	crole = gateRole
	crb   = gateGrant
)

// Files of smoke/<mutationTarget>/, delivery/<mutationTarget>/ and delivery/.
const (
	spod   = "pod-gvisor-smoke.yaml"
	pvc    = "persistentvolumeclaim-gvisor-smoke.yaml"
	app    = "application-gvisor-kind.yaml"
	gitrep = "gitrepository-gvisor-kind.yaml"
	fluxks = "kustomization-gvisor-kind.yaml"
	appset = "applicationset-gvisor.yaml"
)

// op sets (or deletes) the value at a path of map keys (string) and list
// indexes (int).
type op struct {
	path  []any
	value any
	del   bool
}

func set(path []any, v any) op { return op{path: path, value: v} }
func del(path []any) op        { return op{path: path, del: true} }
func p(steps ...any) []any     { return steps }

// pod and ctr build paths into the DaemonSet's pod template.
func pod(steps ...any) []any { return append([]any{"spec", "template", "spec"}, steps...) }
func ctr(steps ...any) []any { return pod(append([]any{"containers", 0}, steps...)...) }
func ini(steps ...any) []any { return pod(append([]any{"initContainers", 0}, steps...)...) }

type mutation struct {
	name   string
	file   string
	ops    []op
	policy string // non-empty: vet rejects on purpose, Kubernetes allows it; the reason
}

// mutations are field-level changes a person could make in values or a patch.
// The server is the oracle: the suite does not say what it expects it to do.
func mutations() []mutation {
	tol := func(t map[string]any) op { return set(pod("tolerations"), []any{t}) }
	long63 := strings.Repeat("a", 64)
	return []mutation{
		// RuntimeClass
		{name: "handler: uppercase (bad DNS label)", file: rc, ops: []op{set(p("handler"), "Runsc")}},
		{name: "handler: underscore", file: rc, ops: []op{set(p("handler"), "run_sc")}},
		{name: "handler: empty", file: rc, ops: []op{set(p("handler"), "")}},
		{name: "handler: missing", file: rc, ops: []op{del(p("handler"))}},
		{name: "handler: other valid name", file: rc, ops: []op{set(p("handler"), "kata")},
			policy: "the installer configures containerd's runtime \"runsc\"; any other handler leaves every gVisor pod unstartable"},
		{name: "runtimeclass name: uppercase", file: rc, ops: []op{set(p("metadata", "name"), "gVisor")}},
		{name: "overhead: bad quantity", file: rc, ops: []op{set(p("overhead"), map[string]any{"podFixed": map[string]any{"memory": "64MB"}})}},
		{name: "overhead: negative quantity", file: rc, ops: []op{set(p("overhead"), map[string]any{"podFixed": map[string]any{"memory": "-64Mi"}})}},
		{name: "overhead: valid", file: rc, ops: []op{set(p("overhead"), map[string]any{"podFixed": map[string]any{"memory": "64Mi", "cpu": "100m"}})}},
		{name: "scheduling.tolerations: effect typo", file: rc, ops: []op{set(p("scheduling"), map[string]any{
			"tolerations": []any{map[string]any{"key": "sandbox", "operator": "Exists", "effect": "NoSchedul"}}})}},
		{name: "scheduling.nodeSelector: bad label key", file: rc, ops: []op{set(p("scheduling"), map[string]any{
			"nodeSelector": map[string]any{"-sandbox": "true"}})}},
		{name: "runtimeclass: unknown field", file: rc, ops: []op{set(p("handlr"), "runsc")}},

		// DaemonSet metadata, selector, strategy
		{name: "label key: space", file: ds, ops: []op{set(p("metadata", "labels", "app.kubernetes.io/na me"), "x")}},
		{name: "label key: name part over 63", file: ds, ops: []op{set(p("metadata", "labels", "example.com/"+long63), "x")}},
		{name: "label value: over 63 characters", file: ds, ops: []op{set(p("metadata", "labels", "app.kubernetes.io/part-of"), long63)}},
		{name: "label value: space", file: ds, ops: []op{set(p("metadata", "labels", "app.kubernetes.io/part-of"), "g visor")}},
		{name: "label value: number", file: ds, ops: []op{set(p("metadata", "labels", "app.kubernetes.io/part-of"), 1)}},
		{name: "annotation key: space", file: ds, ops: []op{set(p("spec", "template", "metadata", "annotations", "gvisorgen.dev/scripts sha256"), "x")}},
		{name: "annotation value: number", file: ds, ops: []op{set(p("spec", "template", "metadata", "annotations", "gvisorgen.dev/scripts-sha256"), 1)}},
		{name: "name: underscore", file: ds, ops: []op{set(p("metadata", "name"), "runsc_installer")}},
		{name: "namespace: uppercase", file: ds, ops: []op{set(p("metadata", "namespace"), "gVisor-system")}},
		{name: "selector: does not match template labels", file: ds, ops: []op{set(p("spec", "selector", "matchLabels", "app.kubernetes.io/name"), "other")}},
		{name: "selector: missing", file: ds, ops: []op{del(p("spec", "selector"))}},
		{name: "updateStrategy.type: typo", file: ds, ops: []op{set(p("spec", "updateStrategy", "type"), "Rolling")}},
		{name: "maxUnavailable: 0", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), 0)}},
		{name: "maxUnavailable: -1", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), -1)}},
		{name: "maxUnavailable: 150%", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), "150%")}},
		{name: "maxUnavailable: 10%", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), "10%")}},
		{name: "maxUnavailable: word", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), "one")}},
		{name: "minReadySeconds: negative", file: ds, ops: []op{set(p("spec", "minReadySeconds"), -5)}},
		{name: "revisionHistoryLimit: string number", file: ds, ops: []op{set(p("spec", "revisionHistoryLimit"), "10")}},
		{name: "daemonset: unknown field spec.replicas", file: ds, ops: []op{set(p("spec", "replicas"), 1)}},
		{name: "apiVersion: apps/v1beta2", file: ds, ops: []op{set(p("apiVersion"), "apps/v1beta2")}},
		{name: "kind: wrong case", file: ds, ops: []op{set(p("kind"), "Daemonset")}},

		// Pod spec
		{name: "toleration: effect typo", file: ds, ops: []op{tol(map[string]any{"operator": "Exists", "effect": "NoSchedulee"})}},
		{name: "toleration: operator lower case", file: ds, ops: []op{tol(map[string]any{"key": "sandbox", "operator": "exists"})}},
		{name: "toleration: Exists with a value", file: ds, ops: []op{tol(map[string]any{"key": "sandbox", "operator": "Exists", "value": "gvisor"})}},
		{name: "toleration: Equal without key", file: ds, ops: []op{tol(map[string]any{"operator": "Equal", "value": "gvisor"})}},
		{name: "toleration: tolerationSeconds with NoSchedule", file: ds, ops: []op{tol(map[string]any{"operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30})}},
		{name: "toleration: bad key", file: ds, ops: []op{tol(map[string]any{"key": "bad key", "operator": "Exists"})}},
		{name: "toleration: tolerate everything", file: ds, ops: []op{tol(map[string]any{"operator": "Exists"})}},
		{name: "nodeSelector: bad value", file: ds, ops: []op{set(pod("nodeSelector", "kubernetes.io/os"), "linux!")}},
		{name: "terminationGracePeriodSeconds: negative", file: ds, ops: []op{set(pod("terminationGracePeriodSeconds"), -1)},
			policy: "the server only warns (\"negative values are invalid and will be treated as 1\"): the value is never what was meant"},
		{name: "terminationGracePeriodSeconds: string", file: ds, ops: []op{set(pod("terminationGracePeriodSeconds"), "5")}},
		{name: "priorityClassName: underscore", file: ds, ops: []op{set(pod("priorityClassName"), "system_node_critical")}},
		{name: "serviceAccountName: uppercase", file: ds, ops: []op{set(pod("serviceAccountName"), "Runsc-Installer")}},
		{name: "restartPolicy: Never in a DaemonSet", file: ds, ops: []op{set(pod("restartPolicy"), "Never")}},
		{name: "dnsPolicy: typo", file: ds, ops: []op{set(pod("dnsPolicy"), "ClusterFirstt")}},
		{name: "hostPID: string", file: ds, ops: []op{set(pod("hostPID"), "true")}},

		// Containers
		{name: "container name: missing", file: ds, ops: []op{del(ctr("name"))}},
		{name: "container name: uppercase", file: ds, ops: []op{set(ctr("name"), "Runsc-Ready")}},
		{name: "container name: same as an init container", file: ds, ops: []op{set(ctr("name"), "install-runsc")}},
		{name: "container image: empty", file: ds, ops: []op{set(ctr("image"), "")}},
		{name: "container image: leading space", file: ds, ops: []op{set(ctr("image"), " busybox:1.37.0-glibc")}},
		{name: "container image: latest", file: ds, ops: []op{set(ctr("image"), "busybox:latest")},
			policy: "a mutable tag: nodes would run different installers, and Argo CD / Flux could not see a change"},
		{name: "container image: no tag", file: ds, ops: []op{set(ctr("image"), "busybox")},
			policy: "no tag means latest: a mutable tag"},
		{name: "imagePullPolicy: typo", file: ds, ops: []op{set(ctr("imagePullPolicy"), "Sometimes")}},
		{name: "env: name with '='", file: ds, ops: []op{set(ctr("env", 0, "name"), "GVISOR=SCRIPTS")}},
		{name: "env: name starting with a digit", file: ds, ops: []op{set(ctr("env", 0, "name"), "1GVISORGEN_SCRIPTS")}},
		{name: "env: name missing", file: ds, ops: []op{del(ctr("env", 0, "name"))}},
		{name: "env: value as a number", file: ds, ops: []op{set(ctr("env", 0, "value"), 60)}},
		{name: "resources: bad cpu quantity", file: ds, ops: []op{set(ctr("resources", "requests", "cpu"), "10 m")}},
		{name: "resources: memory in MB", file: ds, ops: []op{set(ctr("resources", "limits", "memory"), "256MB")}},
		{name: "resources: negative cpu", file: ds, ops: []op{set(ctr("resources", "requests", "cpu"), "-10m")}},
		{name: "resources: request above limit", file: ds, ops: []op{set(ctr("resources", "requests", "memory"), "512Mi")}},
		{name: "resources: memory as a bare number", file: ds, ops: []op{set(ctr("resources", "limits", "memory"), 268435456)}},
		{name: "resources: hugepages request", file: ds, ops: []op{
			set(ctr("resources", "requests", "hugepages-2Mi"), "64Mi"), set(ctr("resources", "limits", "hugepages-2Mi"), "64Mi")}},
		{name: "resources: extended resource without limit", file: ds, ops: []op{set(ctr("resources", "requests", "example.com/gpu"), "1")}},
		{name: "readinessProbe: periodSeconds negative", file: ds, ops: []op{set(ctr("readinessProbe", "periodSeconds"), -1)}},
		{name: "readinessProbe: failureThreshold 0", file: ds, ops: []op{set(ctr("readinessProbe", "failureThreshold"), 0)}},
		{name: "readinessProbe: no handler", file: ds, ops: []op{del(ctr("readinessProbe", "exec"))}},
		{name: "readinessProbe: two handlers", file: ds, ops: []op{set(ctr("readinessProbe", "tcpSocket"), map[string]any{"port": 8080})}},
		{name: "initContainer: readinessProbe", file: ds, ops: []op{set(ini("readinessProbe"), map[string]any{"exec": map[string]any{"command": []any{"true"}}})}},
		{name: "container port: out of range", file: ds, ops: []op{set(ctr("ports"), []any{map[string]any{"containerPort": 70000}})}},
		{name: "securityContext.privileged: string", file: ds, ops: []op{set(ctr("securityContext", "privileged"), "true")}},
		{name: "securityContext.runAsUser: negative", file: ds, ops: []op{set(ctr("securityContext", "runAsUser"), -1)}},
		{name: "container: unknown field", file: ds, ops: []op{set(ctr("imagePullPolicyy"), "Always")}},

		// Volumes and mounts
		{name: "hostPath type: typo", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "type"), "Directroy")}},
		{name: "hostPath type: lower case", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "type"), "directory")}},
		{name: "hostPath path: empty", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "path"), "")}},
		{name: "hostPath path: with ..", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "path"), "/usr/local/../bin")}},
		{name: "hostPath path: relative", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "path"), "usr/local/bin")},
			policy: "the kubelet would resolve a relative host path against its own working directory: never the host folder meant"},
		{name: "volume: duplicate name", file: ds, ops: []op{set(pod("volumes", 2, "name"), "host-install-dir")}},
		{name: "volume name: uppercase", file: ds, ops: []op{set(pod("volumes", 0, "name"), "Scripts")}},
		{name: "volumeMount: unknown volume", file: ds, ops: []op{set(ctr("volumeMounts", 0, "name"), "scripts2")}},
		{name: "volumeMount: empty mountPath", file: ds, ops: []op{set(ctr("volumeMounts", 0, "mountPath"), "")}},
		{name: "configMap defaultMode: 1000 (above 0777)", file: ds, ops: []op{set(pod("volumes", 0, "configMap", "defaultMode"), 1000)}},
		{name: "configMap defaultMode: string", file: ds, ops: []op{set(pod("volumes", 0, "configMap", "defaultMode"), "0555")}},

		// StorageClass
		{name: "volumeBindingMode: typo", file: sc, ops: []op{set(p("volumeBindingMode"), "Immediately")}},
		{name: "reclaimPolicy: Keep", file: sc, ops: []op{set(p("reclaimPolicy"), "Keep")}},
		{name: "reclaimPolicy: Recycle", file: sc, ops: []op{set(p("reclaimPolicy"), "Recycle")}},
		{name: "provisioner: empty", file: sc, ops: []op{set(p("provisioner"), "")}},
		{name: "provisioner: space", file: sc, ops: []op{set(p("provisioner"), "rancher.io/local path")}},
		{name: "allowVolumeExpansion: string", file: sc, ops: []op{set(p("allowVolumeExpansion"), "yes")}},
		{name: "parameters: number value", file: sc, ops: []op{set(p("parameters"), map[string]any{"replicas": 3})}},
		{name: "parameters: empty key", file: sc, ops: []op{set(p("parameters"), map[string]any{"": "x"})}},
		{name: "parameters: 513 keys", file: sc, ops: []op{set(p("parameters"), manyParams(513))}},
		{name: "parameters: 256 KiB and one byte", file: sc, ops: []op{set(p("parameters"), map[string]any{"k": strings.Repeat("x", 256*1024)})}},
		{name: "ok: parameters: 512 keys", file: sc, ops: []op{set(p("parameters"), manyParams(512))}},
		{name: "ok: parameters: 256 KiB", file: sc, ops: []op{set(p("parameters"), map[string]any{"k": strings.Repeat("x", 256*1024-1)})}},
		{name: "storageclass name: managed by kind", file: sc, ops: []op{set(p("metadata", "name"), "standard")},
			policy: "kind (standard), GKE (standard-rwo) and EKS (gp2) manage these classes; their parameters are immutable, so applying over them fails or fights the cloud"},

		// Valid changes: the server accepts them, so vet must too (or list a policy).
		{name: "ok: label value empty", file: ds, ops: []op{set(p("metadata", "labels", "example.com/empty"), "")}},
		{name: "ok: label key with upper case name", file: ds, ops: []op{set(p("metadata", "labels", "example.com/MyTeam"), "Infra_1")}},
		{name: "ok: annotation with a long value", file: ds, ops: []op{set(p("metadata", "annotations", "example.com/note"), strings.Repeat("x ", 2000))}},
		{name: "ok: toleration NoExecute with seconds", file: ds, ops: []op{tol(map[string]any{"key": "sandbox", "operator": "Equal", "value": "gvisor", "effect": "NoExecute", "tolerationSeconds": 30})}},
		{name: "ok: extra nodeSelector label", file: ds, ops: []op{set(pod("nodeSelector", "sandbox.example.com/gvisor"), "true")}},
		{name: "ok: image by digest", file: ds, ops: []op{set(ctr("image"), "busybox@sha256:"+strings.Repeat("ab", 32))}},
		{name: "ok: image from a registry with a port", file: ds, ops: []op{set(ctr("image"), "registry.example.com:5000/mirror/busybox:1.37.0-glibc")}},
		{name: "ok: cpu as a decimal", file: ds, ops: []op{set(ctr("resources", "requests", "cpu"), "0.5")}},
		{name: "ok: cpu as a bare integer", file: ds, ops: []op{set(ctr("resources", "requests", "cpu"), 1)}},
		{name: "ok: memory in exponent form", file: ds, ops: []op{set(ctr("resources", "requests", "memory"), "32e6")}},
		{name: "ok: maxUnavailable 100%", file: ds, ops: []op{set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), "100%")}},
		{name: "ok: maxSurge 1 with maxUnavailable 0", file: ds, ops: []op{
			set(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), 0), set(p("spec", "updateStrategy", "rollingUpdate", "maxSurge"), 1)}},
		{name: "ok: updateStrategy OnDelete", file: ds, ops: []op{set(p("spec", "updateStrategy"), map[string]any{"type": "OnDelete"})}},
		{name: "ok: hostPath type empty", file: ds, ops: []op{set(pod("volumes", 1, "hostPath", "type"), "")}},
		{name: "ok: volumeMount with subPath", file: ds, ops: []op{set(ctr("volumeMounts", 0, "subPath"), "lib")}},
		{name: "ok: env from fieldRef", file: ds, ops: []op{set(ctr("env", 0), map[string]any{"name": "NODE_NAME",
			"valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}})}},
		{name: "ok: env name with dots", file: ds, ops: []op{set(ctr("env", 0, "name"), "gvisor.scripts")}},
		{name: "ok: configMap defaultMode 0", file: ds, ops: []op{set(pod("volumes", 0, "configMap", "defaultMode"), 0)}},
		{name: "ok: priorityClassName system-cluster-critical", file: ds, ops: []op{set(pod("priorityClassName"), "system-cluster-critical")}},
		{name: "ok: terminationGracePeriodSeconds 0", file: ds, ops: []op{set(pod("terminationGracePeriodSeconds"), 0)}},
		{name: "ok: storageclass mountOptions", file: sc, ops: []op{set(p("mountOptions"), []any{"noatime"})}},
		{name: "ok: storageclass allowedTopologies", file: sc, ops: []op{set(p("allowedTopologies"), []any{map[string]any{
			"matchLabelExpressions": []any{map[string]any{"key": "topology.kubernetes.io/zone", "values": []any{"zone-a"}}}}})}},
		{name: "ok: runtimeclass scheduling", file: rc, ops: []op{set(p("scheduling"), map[string]any{
			"nodeSelector": map[string]any{"sandbox.example.com/gvisor": "true"},
			"tolerations":  []any{map[string]any{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}}})}},

		// More rejections
		{name: "annotations: over 256 KiB in all", file: ds, ops: []op{set(p("metadata", "annotations", "example.com/blob"), strings.Repeat("x", 270000))}},
		{name: "name: 254 characters", file: sc, ops: []op{set(p("metadata", "name"), strings.Repeat("a", 254))}},
		{name: "label value: leading dash", file: ds, ops: []op{set(p("metadata", "labels", "app.kubernetes.io/part-of"), "-gvisor")}},
		{name: "runtimeclass overhead: unknown resource", file: rc, ops: []op{set(p("overhead"), map[string]any{"podFixed": map[string]any{"memroy": "64Mi"}})}},

		// The readiness gate: the policy, its binding and the RBAC grant.
		{name: "policy: failurePolicy typo", file: vap, ops: []op{set(p("spec", "failurePolicy"), "Failure")}},
		{name: "policy: operation PATCH", file: vap, ops: []op{set(p("spec", "matchConstraints", "resourceRules", 0, "operations"), []any{"PATCH"})}},
		{name: "policy: empty expression", file: vap, ops: []op{set(p("spec", "validations", 0, "expression"), "")}},
		{name: "policy: reason Denied", file: vap, ops: []op{set(p("spec", "validations", 0, "reason"), "Denied")}},
		{name: "ok: policy reason Invalid", file: vap, ops: []op{set(p("spec", "validations", 0, "reason"), "Invalid")}},
		{name: "policy binding: validationActions Block", file: vapb, ops: []op{set(p("spec", "validationActions"), []any{"Block"})}},
		{name: "policy binding: no policyName", file: vapb, ops: []op{del(p("spec", "policyName"))}},
		{name: "clusterrole: no verbs", file: crole, ops: []op{set(p("rules", 0, "verbs"), []any{})}},
		{name: "clusterrolebinding: roleRef kind typo", file: crb, ops: []op{set(p("roleRef", "kind"), "ClusterRol")}},
		{name: "clusterrolebinding: roleRef apiGroup typo", file: crb, ops: []op{set(p("roleRef", "apiGroup"), "rbac.authorization.k8s.io/v1")}},

		// Namespace, ServiceAccount, ConfigMap
		{name: "namespace name: underscore", file: ns, ops: []op{set(p("metadata", "name"), "gvisor_system")}},
		{name: "namespace: pod-security level typo", file: ns, ops: []op{set(p("metadata", "labels", "pod-security.kubernetes.io/enforce"), "privilegd")}},
		{name: "serviceaccount: automount as string", file: sa, ops: []op{set(p("automountServiceAccountToken"), "false")}},
		{name: "configmap: bad data key", file: cm, ops: []op{set(p("data", "bad key.sh"), "echo")}},
		{name: "configmap: number value", file: cm, ops: []op{set(p("data", "answer"), 42)}},

		// Smoke test (smoke/): the Pod and its PVC.
		{name: "smoke pod: restartPolicy typo", file: spod, ops: []op{set(p("spec", "restartPolicy"), "Sometimes")}},
		{name: "smoke pod: runtimeClassName uppercase", file: spod, ops: []op{set(p("spec", "runtimeClassName"), "gVisor")}},
		{name: "smoke pod: image latest", file: spod, ops: []op{set(p("spec", "containers", 0, "image"), "busybox:latest")},
			policy: "a mutable tag: the smoke test would not test the same image twice"},
		{name: "smoke pod: claimName uppercase", file: spod, ops: []op{set(p("spec", "volumes", 0, "persistentVolumeClaim", "claimName"), "Gvisor-smoke")}},
		{name: "smoke pod: mount of an unknown volume", file: spod, ops: []op{set(p("spec", "containers", 0, "volumeMounts", 0, "name"), "work")}},
		{name: "smoke pod: memory limit below request", file: spod, ops: []op{set(p("spec", "containers", 0, "resources", "limits"), map[string]any{"memory": "8Mi"})}},
		{name: "ok: smoke pod restartPolicy OnFailure", file: spod, ops: []op{set(p("spec", "restartPolicy"), "OnFailure")}},
		{name: "pvc: accessMode typo", file: pvc, ops: []op{set(p("spec", "accessModes"), []any{"ReadWriteOnly"})}},
		{name: "pvc: no accessModes", file: pvc, ops: []op{del(p("spec", "accessModes"))}},
		{name: "pvc: storage in GB", file: pvc, ops: []op{set(p("spec", "resources", "requests", "storage"), "1GB")}},
		{name: "pvc: no storage request", file: pvc, ops: []op{del(p("spec", "resources", "requests", "storage"))}},
		{name: "pvc: storageClassName uppercase", file: pvc, ops: []op{set(p("spec", "storageClassName"), "Gvisor-workspace")}},
		{name: "pvc: volumeMode typo", file: pvc, ops: []op{set(p("spec", "volumeMode"), "File")}},
		{name: "ok: pvc storage as a bare number", file: pvc, ops: []op{set(p("spec", "resources", "requests", "storage"), 1073741824)}},

		// Delivery (delivery/): Argo CD Application and ApplicationSet, Flux
		// GitRepository and Kustomization (the CRDs' OpenAPI schemas decide).
		{name: "application: name uppercase", file: app, ops: []op{set(p("metadata", "name"), "Gvisor-kind")}},
		{name: "application: destination missing", file: app, ops: []op{del(p("spec", "destination"))}},
		{name: "application: retry limit as a string", file: app, ops: []op{set(p("spec", "syncPolicy", "retry", "limit"), "5")}},
		{name: "application: unknown field", file: app, ops: []op{set(p("spec", "sourc"), map[string]any{"path": "x"})}},
		{name: "application: automated prune as a string", file: app, ops: []op{set(p("spec", "syncPolicy", "automated", "prune"), "true")}},
		{name: "ok: application without automated sync", file: app, ops: []op{del(p("spec", "syncPolicy", "automated"))}},
		{name: "applicationset: goTemplate as a string", file: appset, ops: []op{set(p("spec", "goTemplate"), "true")}},
		{name: "gitrepository: interval in words", file: gitrep, ops: []op{set(p("spec", "interval"), "10 minutes")}},
		{name: "gitrepository: url missing", file: gitrep, ops: []op{del(p("spec", "url"))}},
		{name: "gitrepository: url not a URL", file: gitrep, ops: []op{set(p("spec", "url"), "github.com/gvisorgen/gvisorgen")}},
		{name: "ok: gitrepository ref by tag", file: gitrep, ops: []op{set(p("spec", "ref"), map[string]any{"tag": "v1.0.0"})}},
		{name: "flux kustomization: prune as a string", file: fluxks, ops: []op{set(p("spec", "prune"), "yes")}},
		{name: "flux kustomization: sourceRef kind typo", file: fluxks, ops: []op{set(p("spec", "sourceRef", "kind"), "GitRepo")}},
		{name: "flux kustomization: interval missing", file: fluxks, ops: []op{del(p("spec", "interval"))}},
		{name: "ok: flux kustomization without wait", file: fluxks, ops: []op{del(p("spec", "wait"))}},
	}
}

// apply runs the ops on a decoded object.
func (m mutation) apply(obj map[string]any) error {
	for _, o := range m.ops {
		if err := setPath(obj, o.path, o.value, o.del); err != nil {
			return fmt.Errorf("%v: %w", o.path, err)
		}
	}
	return nil
}

func setPath(cur any, path []any, v any, remove bool) error {
	for i, step := range path {
		last := i == len(path)-1
		switch s := step.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return fmt.Errorf("step %q: not a map", s)
			}
			if last {
				if remove {
					if _, ok := m[s]; !ok {
						return fmt.Errorf("delete %q: no such field", s)
					}
					delete(m, s)
				} else {
					m[s] = v
				}
				return nil
			}
			next, ok := m[s]
			if !ok || next == nil {
				next = map[string]any{}
				m[s] = next
			}
			cur = next
		case int:
			l, ok := cur.([]any)
			if !ok || s >= len(l) {
				return fmt.Errorf("step [%d]: not a list or out of range", s)
			}
			if last {
				if remove {
					return errors.New("deleting list items is not supported")
				}
				l[s] = v
				return nil
			}
			cur = l[s]
		default:
			return fmt.Errorf("bad step %v", step)
		}
	}
	return nil
}

// leaf is the last field name the mutation changes (for "does vet's message
// name the field" in the report).
func (m mutation) leaf() string {
	for i := len(m.ops) - 1; i >= 0; i-- {
		for j := len(m.ops[i].path) - 1; j >= 0; j-- {
			if k, ok := m.ops[i].path[j].(string); ok {
				return k
			}
		}
	}
	return ""
}

// verdict is what one side said.
type verdict struct {
	ok   bool
	warn bool   // accepted with a warning
	kc   bool   // rejected by kubectl itself, before the server
	code int    // vet's exit code
	msg  string // full output
	err  string // could not get a verdict
}

func (v verdict) String() string {
	switch {
	case v.err != "":
		return "ERROR"
	case v.ok && v.warn:
		return "accept+W"
	case v.ok:
		return "accept"
	case v.kc:
		return "reject/k"
	default:
		return "reject"
	}
}

type result struct {
	m      mutation
	file   string // the mutated file, once written (vetAll judges every one in one run)
	server verdict
	vet    verdict
}

// vetter runs `gvisorgen vet --manifests`.
type vetter struct {
	root    string
	bin     string
	missing string // why vet --manifests cannot be used
}

func buildVet(t *testing.T, root string) *vetter {
	t.Helper()
	bin := filepath.Join(tempDir(t), "gvisorgen")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gvisorgen")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return &vetter{missing: fmt.Sprintf("go build ./cmd/gvisorgen: %v\n%s", err, out)}
	}
	out, _ := exec.Command(bin, "vet", "--help").CombinedOutput()
	if !strings.Contains(string(out), "--manifests") {
		return &vetter{missing: "`gvisorgen vet --help` lists no --manifests flag: `vet --manifests` is not implemented yet"}
	}
	return &vetter{root: root, bin: bin}
}

func (v *vetter) vet(ctx context.Context, file string) verdict {
	if v.bin == "" {
		return verdict{err: "vet --manifests unavailable"}
	}
	cmd := exec.CommandContext(ctx, v.bin, "vet", "--manifests", file)
	cmd.Dir = v.root
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return verdict{err: err.Error(), msg: string(out)}
	}
	switch code {
	case 0:
		return verdict{ok: true, code: 0, msg: string(out)}
	case 1:
		return verdict{ok: false, code: 1, msg: string(out)}
	default:
		return verdict{err: fmt.Sprintf("exit %d", code), code: code, msg: string(out)}
	}
}

// vetAll judges every written mutation with one `gvisorgen vet --manifests DIR` (DIR holds them alone) instead of one
// run per file (~0.3 s of CPU each, 172 of them). Without --target, vet checks each document on its own, so a file's
// verdict is the same in the batch: rejected when the report names it (each problem is an "error: FILE: document
// N ..." line and the lines under it, up to the next "error: ", "warning: " or "gvisorgen: " line), accepted
// otherwise. A batch that ends in anything but 0 or 1 (a file vet cannot read as YAML makes the whole run invalid) is
// judged again one file at a time. A result without a file (its mutation failed before writing it) keeps its verdict.
func (v *vetter) vetAll(ctx context.Context, dir string, results []result) string {
	var pending []int
	for i := range results {
		if results[i].file != "" {
			pending = append(pending, i)
		}
	}
	if len(pending) == 0 {
		return "no file to vet"
	}
	batch := v.vet(ctx, dir)
	if batch.err != "" || (batch.code != 0 && batch.code != 1) {
		for _, i := range pending {
			results[i].vet = v.vet(ctx, results[i].file)
		}
		return fmt.Sprintf("%d files, one run each (the batch ended: %s, exit %d)", len(pending), batch.err, batch.code)
	}
	blocks := map[string][]string{} // file → its problems' lines
	cur := ""
	for _, l := range strings.Split(batch.msg, "\n") {
		if rest, ok := strings.CutPrefix(l, "error: "); ok {
			cur = ""
			for _, i := range pending {
				if strings.HasPrefix(rest, results[i].file+":") {
					cur = results[i].file
					break
				}
			}
		} else if strings.HasPrefix(l, "gvisorgen: ") || strings.HasPrefix(l, "warning: ") {
			cur = ""
		}
		if cur != "" {
			blocks[cur] = append(blocks[cur], l)
		}
	}
	for _, i := range pending {
		if b, ok := blocks[results[i].file]; ok {
			results[i].vet = verdict{ok: false, code: 1, msg: strings.Join(b, "\n")}
		} else {
			results[i].vet = verdict{ok: true, code: 0}
		}
	}
	return fmt.Sprintf("%d files in one run, %d rejected", len(pending), len(blocks))
}

func serverVerdict(ctx context.Context, c *cluster, file string) verdict {
	out, err := c.dryRun(ctx, file)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return verdict{err: err.Error(), msg: out}
	}
	return verdict{ok: err == nil, warn: err == nil && strings.Contains(out, "Warning:"),
		kc: err != nil && strings.HasPrefix(strings.TrimSpace(out), "error:"), msg: out}
}

func testMutations(t *testing.T, c *cluster, root string) {
	ctx := context.Background()
	srcDir := filepath.Join(root, "generated", mutationTarget)
	// the mutated files alone in their folder: one vet --manifests run judges them all (vetAll)
	work := filepath.Join(tempDir(t), "mutations")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	vt := buildVet(t, root)
	if vt.missing != "" {
		t.Errorf("vet verdicts unavailable: %s", vt.missing)
	}

	// Baseline: every unmutated file is accepted by both, and vet accepts
	// every target folder as a whole.
	ensureNamespaces(t, c, manifestFiles(t, srcDir))
	srcFiles := manifestFiles(t, srcDir)
	// smoke/ and delivery/ of the same target. The delivery objects need
	// their CRDs; the smoke pod needs its RuntimeClass and the namespace's
	// default ServiceAccount for real (admission looks both up; no
	// controller-manager creates the account), which the second phase below
	// creates once every RuntimeClass mutation has run (a real RuntimeClass
	// would make its handler immutable).
	smokeFiles := manifestFiles(t, filepath.Join(root, "smoke", mutationTarget))
	ensureNamespaces(t, c, smokeFiles)
	var smokePod string
	for _, f := range smokeFiles {
		if filepath.Base(f) == spod {
			smokePod = f
		} else {
			srcFiles = append(srcFiles, f)
		}
	}
	if files := deliveryFiles(t, root); len(files) > 0 {
		if !crdsInstalled {
			installCRDs(t, c, root)
		}
		ensureNamespaces(t, c, files)
		srcFiles = append(srcFiles, files...)
	}
	if vt.bin != "" {
		for _, target := range targets(t, root) {
			dir := filepath.Join(root, "generated", target)
			if v := vt.vet(ctx, dir); !v.ok {
				t.Errorf("gvisorgen vet --manifests generated/%s (%s):\n%s", target, v, v.msg)
			}
		}
	}
	originals := map[string][]byte{}
	baseline := func(files ...string) {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			originals[filepath.Base(f)] = b
			if s := serverVerdict(ctx, c, f); !s.ok {
				t.Errorf("baseline %s rejected by kube-apiserver:\n%s", filepath.Base(f), s.msg)
			}
			if vt.bin != "" {
				if v := vt.vet(ctx, f); !v.ok {
					t.Errorf("baseline %s rejected by gvisorgen vet --manifests (%s):\n%s", filepath.Base(f), v, v.msg)
				}
			}
		}
	}
	baseline(srcFiles...)

	ms := mutations()
	if len(ms) < 40 {
		t.Fatalf("only %d mutations: at least 40 are required", len(ms))
	}
	results := make([]result, len(ms))
	run := func(smoke bool) {
		jobs := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					results[i] = runMutation(ctx, t, c, work, originals, i, ms[i])
				}
			}()
		}
		for i := range ms {
			if (ms[i].file == spod) == smoke {
				jobs <- i
			}
		}
		close(jobs)
		wg.Wait()
	}
	run(false)
	if smokePod != "" {
		if out, err := c.apply(ctx, filepath.Join(srcDir, rc)); err != nil {
			t.Fatalf("create RuntimeClass for the smoke pod: %v\n%s", err, out)
		}
		if out, err := c.kubectl(ctx, "-n", "gvisor-smoke", "create", "serviceaccount", "default"); err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatalf("create the smoke namespace's default ServiceAccount: %v\n%s", err, out)
		}
		baseline(smokePod)
		run(true)
	}
	t.Logf("vet --manifests: %s", vt.vetAll(ctx, work, results))

	report(t, results, vt.bin != "")
}

// deliveryFiles are the delivery objects of mutationTarget and the fleet's.
func deliveryFiles(t *testing.T, root string) []string {
	var out []string
	for _, f := range []string{filepath.Join("delivery", appset), filepath.Join("delivery", mutationTarget, app),
		filepath.Join("delivery", mutationTarget, gitrep), filepath.Join("delivery", mutationTarget, fluxks)} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			out = append(out, filepath.Join(root, f))
		}
	}
	return out
}

func runMutation(ctx context.Context, t *testing.T, c *cluster, work string, originals map[string][]byte, i int, m mutation) result {
	r := result{m: m}
	src, ok := originals[m.file]
	if !ok {
		r.server.err = "no such generated file " + m.file
		r.vet.err = r.server.err
		return r
	}
	var obj map[string]any
	if err := yaml.Unmarshal(src, &obj); err != nil {
		r.server.err = err.Error()
		r.vet.err = r.server.err
		return r
	}
	if err := m.apply(obj); err != nil {
		r.server.err = "mutation: " + err.Error()
		r.vet.err = r.server.err
		return r
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		r.server.err = err.Error()
		r.vet.err = r.server.err
		return r
	}
	// Keep the generated header line: the object is otherwise what a patch
	// would produce.
	header, _, _ := strings.Cut(string(src), "\n")
	if strings.HasPrefix(header, "#") {
		out = append([]byte(header+"\n"), out...)
	}
	file := filepath.Join(work, fmt.Sprintf("m%03d-%s", i+1, m.file))
	if err := os.WriteFile(file, out, 0o644); err != nil {
		r.server.err = err.Error()
		r.vet.err = r.server.err
		return r
	}
	r.file = file
	r.server = serverVerdict(ctx, c, file)
	return r
}

// firstLine shortens a message for the table.
func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Warning:") && strings.Contains(s, "Error") {
			continue
		}
		s = l
		break
	}
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}

func report(t *testing.T, results []result, haveVet bool) {
	var (
		serverRejects, serverAccepts int
		vetRejectsToo, vetAcceptsToo int
		policyTotal, policyHeld      int
		mismatches, policyProblems   []string
		errs                         []string
		namesField                   int
	)
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%-3s %-48s %-40s %-8s %-7s %-9s %s\n", "#", "mutation", "file", "server", "vet", "verdict", "server says")
	for i, r := range results {
		status := ""
		switch {
		case r.server.err != "" || (haveVet && r.vet.err != ""):
			status = "ERROR"
			errs = append(errs, fmt.Sprintf("#%d %s: server: %s %s / vet: %s %s", i+1, r.m.name,
				r.server.err, strings.TrimSpace(r.server.msg), r.vet.err, strings.TrimSpace(r.vet.msg)))
		case r.m.policy != "":
			policyTotal++
			switch {
			case !r.server.ok:
				status = "POLICY?"
				policyProblems = append(policyProblems, fmt.Sprintf("#%d %s: listed as policy, but the server rejects it too: %s",
					i+1, r.m.name, strings.TrimSpace(r.server.msg)))
			case !haveVet:
				status = "-"
			case r.vet.ok:
				status = "POLICY!"
				policyProblems = append(policyProblems, fmt.Sprintf("#%d %s: policy not enforced: vet accepts it (reason for the policy: %s)",
					i+1, r.m.name, r.m.policy))
			default:
				status = "policy"
				policyHeld++
			}
		default:
			if r.server.ok {
				serverAccepts++
			} else {
				serverRejects++
			}
			switch {
			case !haveVet:
				status = "-"
			case r.server.ok == r.vet.ok:
				status = "parity"
				if r.server.ok {
					vetAcceptsToo++
				} else {
					vetRejectsToo++
					if leaf := r.m.leaf(); leaf != "" && strings.Contains(r.vet.msg, leaf) {
						namesField++
					} else {
						status = "parity*"
					}
				}
			case r.server.ok:
				status = "MISMATCH"
				mismatches = append(mismatches, fmt.Sprintf("#%d %s (%s): server ACCEPTS, vet rejects:\n    vet: %s",
					i+1, r.m.name, r.m.file, indent(r.vet.msg)))
			default:
				status = "MISMATCH"
				mismatches = append(mismatches, fmt.Sprintf("#%d %s (%s): server REJECTS, vet accepts:\n    server: %s",
					i+1, r.m.name, r.m.file, indent(r.server.msg)))
			}
		}
		fmt.Fprintf(&tbl, "%-3d %-48s %-40s %-8s %-7s %-9s %s\n", i+1, trunc(r.m.name, 48), r.m.file,
			r.server, vetCol(r.vet, haveVet), status, firstLine(r.server.msg, 160))
	}
	t.Logf("mutation table (target %s; reject/k: kubectl refused it before the server; accept+W: accepted with a warning; parity*: both reject, but vet's message does not name the changed field):\n%s", mutationTarget, tbl.String())

	var detail strings.Builder
	for i, r := range results {
		fmt.Fprintf(&detail, "#%d %s [%s]\n  server (%s): %s\n", i+1, r.m.name, r.m.file, r.server, indent(r.server.msg))
		if haveVet {
			fmt.Fprintf(&detail, "  vet    (%s, exit %d): %s\n", r.vet, r.vet.code, indent(r.vet.msg))
		}
		if r.m.policy != "" {
			fmt.Fprintf(&detail, "  policy: %s\n", r.m.policy)
		}
	}
	if os.Getenv("APISERVER_VERBOSE") != "" {
		t.Logf("full messages:\n%s", detail.String())
	}

	var pol strings.Builder
	for _, r := range results {
		if r.m.policy != "" {
			fmt.Fprintf(&pol, "  - %s: %s\n", r.m.name, r.m.policy)
		}
	}
	t.Logf("policy (vet rejects on purpose, Kubernetes allows):\n%s", pol.String())

	parityN := serverRejects + serverAccepts
	summary := fmt.Sprintf("SUMMARY mutations=%d | schema parity: %d/%d (server rejects %d: vet rejects %d; server accepts %d: vet accepts %d) | policy: %d/%d enforced | vet's rejection names the changed field: %d/%d",
		len(results), vetRejectsToo+vetAcceptsToo, parityN, serverRejects, vetRejectsToo, serverAccepts, vetAcceptsToo, policyHeld, policyTotal, namesField, vetRejectsToo)
	if !haveVet {
		summary += " | vet --manifests unavailable: parity not measured"
	}
	t.Log(summary)
	fmt.Println(summary) // also in non-verbose output
	if path := os.Getenv("APISERVER_REPORT"); path != "" {
		rep := fmt.Sprintf("%s\n\n%s\npolicy (vet rejects on purpose, Kubernetes allows):\n%s\nfull messages:\n%s",
			summary, tbl.String(), pol.String(), detail.String())
		if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
			t.Errorf("APISERVER_REPORT: %v", err)
		} else {
			t.Logf("report written to %s", path)
		}
	}

	for _, e := range errs {
		t.Errorf("no verdict: %s", e)
	}
	enforce := os.Getenv("APISERVER_PARITY") != "report"
	for _, m := range mismatches {
		if enforce {
			t.Errorf("schema parity: %s", m)
		} else {
			t.Logf("schema parity: %s", m)
		}
	}
	for _, m := range policyProblems {
		if enforce {
			t.Errorf("policy: %s", m)
		} else {
			t.Logf("policy: %s", m)
		}
	}
}

func vetCol(v verdict, haveVet bool) string {
	if !haveVet {
		return "n/a"
	}
	return v.String()
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}

// manyParams is a StorageClass parameters map of n short keys.
func manyParams(n int) map[string]any {
	m := map[string]any{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}
