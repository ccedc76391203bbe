package gen

import (
	"encoding/json"
	appsv1 "k8s.io/api/apps/v1"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// classesYAML: a GPU class (its flags, scheduling on GPU nodes, a larger overhead) and a KVM class with its own
// handler name, beside the default class.
const classesYAML = `gvisor:
  classes:
    gpu:
      runsc:
        config:
          nvproxy: true
      scheduling:
        nodeSelector:
          nvidia.com/gpu.present: "true"
        tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      overhead:
        memory: 64Mi
    kvm:
      handler: runsc-fast
      runsc:
        config:
          platform: kvm
`

func buildKind(t *testing.T, values string) eval.Target {
	t.Helper()
	o := eval.Options{Root: repoRoot, Only: []string{"kind"}}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		o.ValuesFiles = []string{f}
	}
	out, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	return out.Result.Targets[0]
}

// TestClassesRender: each class gets its RuntimeClass (its handler, its gate label merged into its scheduling, its
// overhead), the installer its RUNSC_CLASSES and RUNSC_CHECKS, label-node sets the gate labels of the classes without
// node checks, label-checked-classes applies the installer's patch for the others, unlabel-node removes them all, and
// the admission policy lets the installer change exactly those labels and the version.
func TestClassesRender(t *testing.T) {
	tg := buildKind(t, classesYAML)
	rcs := map[string]nodev1.RuntimeClass{}
	var ds, vap, eventVAP, role []byte
	for _, o := range tg.Objects {
		switch o.Kind {
		case "RuntimeClass":
			var rc nodev1.RuntimeClass
			if err := json.Unmarshal(o.JSON, &rc); err != nil {
				t.Fatal(err)
			}
			rcs[rc.Name] = rc
		case "DaemonSet":
			ds = o.JSON
		case "ValidatingAdmissionPolicy":
			if strings.HasSuffix(o.Name, "-node-events") {
				eventVAP = o.JSON
			} else {
				vap = o.JSON
			}
		case "ClusterRole":
			role = o.JSON
		}
	}
	const prefix = "node-restriction.kubernetes.io/gvisor-"
	for _, c := range []struct {
		name, handler, memory string
		selector              map[string]string
		tolerations           int
	}{
		{"gvisor", "runsc", "32Mi", map[string]string{prefix + "runsc": "true"}, 0},
		{"gpu", "runsc-gpu", "64Mi", map[string]string{prefix + "runsc-gpu": "true", "nvidia.com/gpu.present": "true"}, 1},
		{"kvm", "runsc-fast", "32Mi", map[string]string{prefix + "runsc-fast": "true"}, 0},
	} {
		rc, ok := rcs[c.name]
		if !ok {
			t.Fatalf("no RuntimeClass %s: %v", c.name, rcs)
		}
		if rc.Handler != c.handler || rc.Overhead.PodFixed.Memory().String() != c.memory ||
			!mapsEqual(rc.Scheduling.NodeSelector, c.selector) || len(rc.Scheduling.Tolerations) != c.tolerations {
			t.Errorf("RuntimeClass %s: handler %s, overhead %v, scheduling %+v", c.name, rc.Handler, rc.Overhead.PodFixed, rc.Scheduling)
		}
	}
	if len(rcs) != 3 {
		t.Errorf("%d RuntimeClasses, want 3", len(rcs))
	}
	s := string(ds)
	for _, want := range []string{
		`"name":"RUNSC_CLASSES","value":"[runsc-gpu]\nnvproxy = true\n[runsc-fast]\nplatform = \"kvm\""`,
		// the checked classes (nvproxy, platform kvm) open where their checks pass: not label-node's
		`"args":["label","node","$(NODE_NAME)","--overwrite","` + prefix + `runsc=true","` + prefix + `runsc-version=`,
		`"name":"RUNSC_CHECKS","value":"runsc-gpu ` + prefix + `runsc-gpu nvidia-driver\nrunsc-fast ` + prefix + `runsc-fast kvm"`,
		`"args":["patch","node","$(NODE_NAME)","--type=merge","--patch-file=/gvisorgen-gate/gvisorgen-gates.json"]`,
		`{"name":"tmp","readOnly":true,"mountPath":"/gvisorgen-gate"}`,
		// an Event per checked class, about the node configure-containerd names
		`"name":"report-checked-classes","image":"registry.k8s.io/kubectl:`,
		`"args":["create","-f","/gvisorgen-gate/gvisorgen-events.json"]`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("DaemonSet lacks %s", want)
		}
	}
	if want := `['` + prefix + `runsc', '` + prefix + `runsc-gpu', '` + prefix + `runsc-fast', '` + prefix + `runsc-version']`; !strings.Contains(string(vap), want) {
		t.Errorf("admission policy's gateKeys are not %s:\n%s", want, vap)
	}

	// configure-containerd alone learns the node's name (the Events name it)
	var d appsv1.DaemonSet
	if err := json.Unmarshal(ds, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.InitContainers {
		has := false
		for _, e := range c.Env {
			has = has || e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}
		if want := c.Name == "configure-containerd" || strings.HasPrefix(c.Command[0], "/bin/kubectl"); has != want {
			t.Errorf("init container %s: NODE_NAME from spec.nodeName %v, want %v", c.Name, has, want)
		}
	}

	// the Events: created only in "default", about the token's node, with the installer's reasons (the API-server
	// suite applies the policy for real)
	if !strings.Contains(string(role), `{"verbs":["create"],"apiGroups":[""],"resources":["events"]}`) {
		t.Errorf("the ClusterRole does not grant creating Events:\n%s", role)
	}
	for _, want := range []string{`request.namespace == 'default'`, `object.involvedObject.name == variables.claim[0]`, `['SandboxClassOpen', 'SandboxClassClosed']`} {
		if !strings.Contains(string(eventVAP), want) {
			t.Errorf("the node-events policy lacks %s:\n%s", want, eventVAP)
		}
	}

	// uninstall: unlabel-node removes every class's label and the version
	un := buildKind(t, classesYAML+"  installer:\n    mode: uninstall\n")
	for _, o := range un.Objects {
		if o.Kind == "DaemonSet" && !strings.Contains(string(o.JSON), `"args":["label","node","$(NODE_NAME)","`+prefix+`runsc-","`+prefix+`runsc-gpu-","`+prefix+`runsc-fast-","`+prefix+`runsc-version-"]`) {
			t.Errorf("unlabel-node does not remove every class's label:\n%s", o.JSON)
		}
	}
}

// TestNoClassesIsTodaysOutput: a target that declares no class (or an empty classes map) renders exactly what a
// single-class target rendered before classes existed: one RuntimeClass, no RUNSC_CLASSES, the two gate labels. The
// committed tree (generated/, the fleet golden) holds the bytes.
func TestNoClassesIsTodaysOutput(t *testing.T) {
	plain, empty := buildKind(t, ""), buildKind(t, "gvisor:\n  classes: {}\n")
	if len(plain.Objects) != len(empty.Objects) {
		t.Fatalf("%d objects without classes, %d with classes: {}", len(plain.Objects), len(empty.Objects))
	}
	for i := range plain.Objects {
		if string(plain.Objects[i].JSON) != string(empty.Objects[i].JSON) {
			t.Errorf("%s %s differs with classes: {}", plain.Objects[i].Kind, plain.Objects[i].Name)
		}
	}
	var kinds []string
	for _, o := range plain.Objects {
		kinds = append(kinds, o.Kind)
		if o.Kind == "DaemonSet" && strings.Contains(string(o.JSON), "RUNSC_CLASSES") {
			t.Errorf("a target without classes sets RUNSC_CLASSES")
		}
	}
	if n := len(slices.DeleteFunc(kinds, func(k string) bool { return k != "RuntimeClass" })); n != 1 {
		t.Errorf("%d RuntimeClasses, want 1", n)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestClassesRefused: two classes never share a name, a handler or a runsc.toml, and a handler is runsc-<suffix>;
// each refusal names the classes (or the field) at fault.
func TestClassesRefused(t *testing.T) {
	for _, c := range []struct{ name, values, want string }{
		{"one handler", "gvisor:\n  classes:\n    a: {handler: runsc-x}\n    b: {handler: runsc-x}\n",
			`_uniqueClasses.handlers."runsc-x": conflicting values "gvisor.classes.b" and "gvisor.classes.a"`},
		{"the default's name", "gvisor:\n  classes:\n    gvisor: {}\n",
			`_uniqueClasses.names.gvisor: conflicting values "gvisor.classes.gvisor" and "gvisor.runtimeClass"`},
		{"runsc.toml's name", "gvisor:\n  host:\n    runscConfig: /etc/containerd/runsc/runsc-gpu.toml\n  classes:\n    gpu: {}\n",
			`_uniqueClasses.files."/etc/containerd/runsc/runsc-gpu.toml": conflicting values`},
		{"not runsc-", "gvisor:\n  classes:\n    gpu: {handler: nvidia}\n", `gvisor.classes.gpu.handler: invalid value "nvidia"`},
		{"runsc-version", "gvisor:\n  classes:\n    version: {}\n", `invalid value "runsc-version"`},
		{"a dotted name needs a handler", "gvisor:\n  classes:\n    gpu.example.com: {}\n", `invalid value "runsc-gpu.example.com"`},
		{"a bad name", "gvisor:\n  classes:\n    GPU: {}\n", `gvisor.classes.GPU`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(c.values), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"}, ValuesFiles: []string{f}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %s", err, c.want)
			}
		})
	}
}

// TestGPUPreset: preset nvidia-gpu fills a class's defaults from its profile: nvproxy (so the class gets the
// nvidia-driver check), the profile's GPU node label where the platform sets one (AKS), none where it does not (GKE:
// the label's value is the GPU type), the nvidia.com/gpu NoSchedule toleration; every default yields to the values.
func TestGPUPreset(t *testing.T) {
	for _, c := range []struct {
		name, profile, extra string
		selector             map[string]string
		checked              bool
	}{
		{"aks", "aks", "", map[string]string{"kubernetes.azure.com/accelerator": "nvidia"}, true},
		{"gke", "gke", "", map[string]string{}, true},
		// a selector of the class's own joins the preset's (a map: CUE unifies the default with it)
		{"own selector", "aks", "      scheduling: {nodeSelector: {pool: a100}}\n", map[string]string{"pool": "a100", "kubernetes.azure.com/accelerator": "nvidia"}, true},
		{"nvproxy off", "kind", "      runsc: {config: {nvproxy: false}}\n", map[string]string{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// a target of its own (committed inputs: the waivers of the example targets' pins count only there)
			y := "profile: " + c.profile + "\npolicy: {waive: {unpinned-release: test, unpinned-image: test}}\ngvisor:\n  classes:\n    gpu:\n      preset: nvidia-gpu\n" + c.extra
			root := t.TempDir()
			if err := os.CopyFS(filepath.Join(root, "cue"), os.DirFS(filepath.Join(repoRoot, "cue"))); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(root, "targets"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "targets", "gpu.yaml"), []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := Build(eval.Options{Root: root, Only: []string{"gpu"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out.Result.Targets[0].Objects {
				switch {
				case o.Kind == "RuntimeClass" && o.Name == "gpu":
					var rc nodev1.RuntimeClass
					if err := json.Unmarshal(o.JSON, &rc); err != nil {
						t.Fatal(err)
					}
					want := map[string]string{"node-restriction.kubernetes.io/gvisor-runsc-gpu": "true"}
					for k, v := range c.selector {
						want[k] = v
					}
					if !mapsEqual(rc.Scheduling.NodeSelector, want) || len(rc.Scheduling.Tolerations) != 1 || rc.Scheduling.Tolerations[0].Key != "nvidia.com/gpu" {
						t.Errorf("scheduling %+v, want nodeSelector %v and the nvidia.com/gpu toleration", rc.Scheduling, want)
					}
				case o.Kind == "DaemonSet":
					if got := strings.Contains(string(o.JSON), "runsc-gpu node-restriction.kubernetes.io/gvisor-runsc-gpu nvidia-driver"); got != c.checked {
						t.Errorf("the nvidia-driver check rendered: %v, want %v", got, c.checked)
					}
				}
			}
		})
	}
}
