package vet

import (
	"github.com/gvisorgen/gvisorgen/internal/eval"

	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ds is a valid DaemonSet; each case of TestCheck edits it with a YAML
// fragment merged over it (or replaces it).
const dsBase = `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: x, namespace: ns}
spec:
  selector: {matchLabels: {app: x}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: x, extra: z}}
    spec:
      initContainers:
      - {name: init, image: "busybox:1.37.0", volumeMounts: [{name: data, mountPath: /data}]}
      containers:
      - name: main
        image: busybox:1.37.0
        resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 64Mi}}
        readinessProbe: {exec: {command: ["true"]}}
        volumeMounts: [{name: data, mountPath: /data}]
      tolerations: [{key: k, operator: Equal, value: v, effect: NoExecute, tolerationSeconds: 30}]
      volumes: [{name: data, emptyDir: {}}]
`

// merge overlays a YAML fragment on a YAML document (maps merge, everything
// else replaces).
func merge(t *testing.T, base, patch string) []byte {
	t.Helper()
	var b, p map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(patch), &p); err != nil {
		t.Fatal(err)
	}
	var rec func(dst, src map[string]any)
	rec = func(dst, src map[string]any) {
		for k, v := range src {
			if sm, ok := v.(map[string]any); ok {
				if dm, ok := dst[k].(map[string]any); ok {
					rec(dm, sm)
					continue
				}
			}
			if v == nil {
				delete(dst, k)
				continue
			}
			dst[k] = v
		}
	}
	rec(b, p)
	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// moduleFacts are the profiles' facts of the repository's CUE module.
func moduleFacts(t *testing.T) Facts {
	t.Helper()
	ev, err := eval.Load(eval.Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	f, err := FactsOf(ev)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCheck(t *testing.T) {
	facts := moduleFacts(t)
	tmpl := func(s string) string {
		return "spec: {template: {spec: " + s + "}}"
	}
	cases := []struct {
		name string
		base string // default dsBase
		kind string // apiVersion/kind, default apps/v1/DaemonSet
		edit string
		// want: "" for no problem, else "path: substring" of the only problem;
		// policy marks a policy problem.
		want   string
		policy string
	}{
		{name: "valid", edit: `{}`},
		{name: "selector missing", edit: `spec: {selector: null}`, want: "spec.selector: required"},
		{name: "selector empty", edit: `spec: {selector: {matchLabels: null}}`, want: "spec.selector: empty"},
		{name: "selector value differs", edit: `spec: {selector: {matchLabels: {app: other}}}`,
			want: `spec.selector.matchLabels.app: selects app=other, but the pod template's label is app=x`},
		{name: "selector key missing from template", edit: `spec: {selector: {matchLabels: {"example.com/k": v}}}`,
			want: `spec.selector.matchLabels."example.com/k": selects example.com/k=v, but the pod template has no label`},
		{name: "selector subset of template", edit: `spec: {selector: {matchLabels: {extra: z}}}`},
		{name: "matchExpressions In matches", edit: `spec: {selector: {matchExpressions: [{key: app, operator: In, values: [x, z]}]}}`},
		{name: "matchExpressions NotIn fails", edit: `spec: {selector: {matchExpressions: [{key: app, operator: NotIn, values: [x]}]}}`,
			want: "spec.selector.matchExpressions.0: app NotIn [x]"},
		{name: "maxUnavailable 0 without maxSurge", edit: `spec: {updateStrategy: {rollingUpdate: {maxUnavailable: 0}}}`,
			want: "spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0"},
		{name: "maxUnavailable 0% with maxSurge 0%", edit: `spec: {updateStrategy: {rollingUpdate: {maxUnavailable: "0%", maxSurge: "0%"}}}`,
			want: "maxUnavailable: cannot be 0"},
		{name: "maxUnavailable 0 with maxSurge 1", edit: `spec: {updateStrategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}}`},
		{name: "OnDelete ignores rollingUpdate", edit: `spec: {updateStrategy: {type: OnDelete, rollingUpdate: {maxUnavailable: 0}}}`},
		{name: "toleration Equal without key", edit: tmpl(`{tolerations: [{operator: Equal, value: v}]}`),
			want: "spec.template.spec.tolerations.0.operator: Equal without a key"},
		{name: "toleration no operator without key", edit: tmpl(`{tolerations: [{value: v}]}`),
			want: "operator: Equal (the default) without a key"},
		{name: "toleration Exists without key", edit: tmpl(`{tolerations: [{operator: Exists}]}`)},
		{name: "tolerationSeconds with NoSchedule", edit: tmpl(`{tolerations: [{operator: Exists, effect: NoSchedule, tolerationSeconds: 5}]}`),
			want: "spec.template.spec.tolerations.0.tolerationSeconds: only applies to effect NoExecute, but effect is NoSchedule"},
		{name: "duplicate volume", edit: tmpl(`{volumes: [{name: data, emptyDir: {}}, {name: data, emptyDir: {}}]}`),
			want: `spec.template.spec.volumes.1.name: duplicate volume name "data"`},
		{name: "mount of a missing volume", edit: tmpl(`{volumes: null, initContainers: null, containers: [{name: c, image: "b:1", volumeMounts: [{name: data, mountPath: /d}]}]}`),
			want: `spec.template.spec.containers.0.volumeMounts.0.name: volume "data" not found`},
		{name: "duplicate mountPath", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", volumeMounts: [{name: data, mountPath: /d}, {name: data, mountPath: /d}]}]}`),
			want: `spec.template.spec.containers.0.volumeMounts.1.mountPath: "/d" is already mounted`},
		{name: "container named like an init container", edit: tmpl(`{containers: [{name: init, image: "b:1"}]}`),
			want: `spec.template.spec.containers.0.name: duplicate container name "init" (also initContainers.0)`},
		{name: "request above limit", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", resources: {requests: {memory: 512Mi}, limits: {memory: 256Mi}}}]}`),
			want: "spec.template.spec.containers.0.resources.requests.memory: 512Mi is above its limit (limits.memory: 256Mi)"},
		{name: "request equal to limit, bare numbers", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", resources: {requests: {cpu: 1}, limits: {cpu: "1000m"}}}]}`)},
		{name: "extended resource without limit", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", resources: {requests: {"example.com/gpu": 1}}}]}`),
			want: `resources.requests."example.com/gpu": example.com/gpu needs a limit equal to its request`},
		{name: "hugepages request below limit", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", resources: {requests: {memory: 1Gi, hugepages-2Mi: 2Mi}, limits: {memory: 1Gi, hugepages-2Mi: 4Mi}}}]}`),
			want: `resources.requests."hugepages-2Mi": 2Mi must equal its limit (limits.hugepages-2Mi: 4Mi)`},
		{name: "hugepages without cpu or memory", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", resources: {limits: {hugepages-2Mi: 4Mi}}}]}`),
			want: "spec.template.spec.containers.0.resources: huge pages need a cpu or memory"},
		{name: "probe without handler", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", readinessProbe: {periodSeconds: 5}}]}`),
			want: "spec.template.spec.containers.0.readinessProbe: no handler"},
		{name: "probe with two handlers", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", livenessProbe: {exec: {command: ["true"]}, httpGet: {port: 80}}}]}`),
			want: "spec.template.spec.containers.0.livenessProbe.httpGet: a probe takes exactly one handler, this one has exec and httpGet"},
		{name: "liveness successThreshold 2", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", livenessProbe: {exec: {command: ["true"]}, successThreshold: 2}}]}`),
			want: "livenessProbe.successThreshold: must be 1"},
		{name: "probe on an init container", edit: tmpl(`{initContainers: [{name: i, image: "b:1", startupProbe: {exec: {command: ["true"]}}}]}`),
			want: "spec.template.spec.initContainers.0.startupProbe: not allowed on an init container"},
		{name: "probe on a sidecar", edit: tmpl(`{initContainers: [{name: i, image: "b:1", restartPolicy: Always, startupProbe: {exec: {command: ["true"]}}}]}`)},
		{name: "restartPolicy on a container", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "b:1", restartPolicy: Always}]}`),
			want: "spec.template.spec.containers.0.restartPolicy: may only be set on an init container"},
		{name: "annotations over 256 KiB", edit: `metadata: {annotations: {"example.com/blob": "` + strings.Repeat("x", 262144) + `"}}`,
			want: `metadata.annotations: the annotations take 262160 bytes in all (keys and values): the API server allows at most 262144 (256 KiB); the largest is "example.com/blob"`},
		{name: "annotations at 256 KiB", edit: `metadata: {annotations: {"example.com/blob": "` + strings.Repeat("x", 262144-16) + `"}}`},

		// Policies.
		{name: "policy: image latest", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "busybox:latest"}]}`),
			want: `spec.template.spec.containers.0.image: gvisorgen policy mutable-image: image "busybox:latest" uses the mutable tag latest`, policy: "mutable-image"},
		{name: "policy: image without tag", edit: tmpl(`{initContainers: [{name: c, image: "registry.example.com:5000/busybox"}]}`),
			want: `spec.template.spec.initContainers.0.image: gvisorgen policy mutable-image: image "registry.example.com:5000/busybox" has no tag`, policy: "mutable-image"},
		{name: "image with a registry port and a tag", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "registry.example.com:5000/busybox:1.37.0"}]}`)},
		{name: "image by digest", edit: tmpl(`{initContainers: null, containers: [{name: c, image: "busybox@sha256:` + strings.Repeat("ab", 32) + `"}]}`)},
		{name: "policy: pod image latest", kind: "v1/Pod",
			base: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {restartPolicy: Never, containers: [{name: c, image: "busybox:1"}]}}`,
			edit: `spec: {containers: [{name: c, image: busybox}]}`, want: `spec.containers.0.image: gvisorgen policy mutable-image: image "busybox" has no tag`, policy: "mutable-image"},
		{name: "policy: handler", kind: "node.k8s.io/v1/RuntimeClass",
			base: `{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: gvisor}, handler: runsc}`,
			edit: `handler: kata`, want: `handler: gvisorgen policy runtimeclass-handler: handler "kata": the installer registers containerd's runtime "runsc" and one runsc-<name> per sandbox class (gvisor.classes) only`, policy: "runtimeclass-handler"},
		{name: "runtimeclass toleration rule", kind: "node.k8s.io/v1/RuntimeClass",
			base: `{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: gvisor}, handler: runsc}`,
			edit: `scheduling: {tolerations: [{operator: Equal}]}`, want: "scheduling.tolerations.0.operator: Equal without a key"},
		{name: "policy: managed storage class", kind: "storage.k8s.io/v1/StorageClass",
			base: `{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: gvisor-workspace}, provisioner: ebs.csi.aws.com}`,
			edit: `metadata: {name: gp2}`, want: `metadata.name: gvisorgen policy managed-storageclass: StorageClass "gp2" is created and managed by eks`, policy: "managed-storageclass"},
		{name: "own storage class", kind: "storage.k8s.io/v1/StorageClass",
			base: `{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: gvisor-workspace}, provisioner: ebs.csi.aws.com}`,
			edit: `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base, kind := c.base, c.kind
			if base == "" {
				base = dsBase
			}
			if kind == "" {
				kind = "apps/v1/DaemonSet"
			}
			i := strings.LastIndex(kind, "/")
			probs := Check(facts, kind[:i], kind[i+1:], merge(t, base, c.edit))
			switch {
			case c.want == "" && len(probs) > 0:
				t.Errorf("unexpected problems: %v", probs)
			case c.want != "" && len(probs) != 1:
				t.Errorf("got %d problems %v, want one: %q", len(probs), probs, c.want)
			case c.want != "" && !strings.Contains(probs[0].String(), c.want):
				t.Errorf("problem %q, want one containing %q", probs[0], c.want)
			case c.want != "" && probs[0].Policy != c.policy:
				t.Errorf("problem %q: policy %v, want %v", probs[0], probs[0].Policy, c.policy)
			}
		})
	}
}

func TestImagePolicy(t *testing.T) {
	for image, bad := range map[string]bool{
		"busybox:1.37.0-glibc":                             false,
		"busybox":                                          true,
		"busybox:latest":                                   true,
		"docker.io/library/busybox:latest":                 true,
		"localhost:5000/busybox":                           true,
		"localhost:5000/busybox:1.37":                      false,
		"busybox@sha256:" + strings.Repeat("a", 64):        false,
		"busybox:latest@sha256:" + strings.Repeat("a", 64): false,
	} {
		if got := imagePolicy(image) != ""; got != bad {
			t.Errorf("imagePolicy(%q) refuses: %v, want %v", image, got, bad)
		}
	}
}

func TestIsKustomizeFile(t *testing.T) {
	cases := []struct {
		apiVersion, kind, file string
		want                   bool
	}{
		{"kustomize.config.k8s.io/v1beta1", "Kustomization", "overlays/kind/kustomization.yaml", true},
		{"kustomize.config.k8s.io/v1alpha1", "Component", "c/kustomization.yaml", true},
		{"", "Kustomization", "x.yaml", true},
		{"", "", "overlays/kind/kustomization.yaml", true},
		{"", "", "other.yaml", false},
		{"kustomize.toolkit.fluxcd.io/v1", "Kustomization", "delivery/kind/kustomization-gvisor-kind.yaml", false},
		{"v1", "ConfigMap", "kustomization.yaml", false},
	}
	for _, c := range cases {
		if got := isKustomizeFile(c.apiVersion, c.kind, c.file); got != c.want {
			t.Errorf("isKustomizeFile(%q, %q, %q) = %v, want %v", c.apiVersion, c.kind, c.file, got, c.want)
		}
	}
}
