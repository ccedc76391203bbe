package eval

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/load"
)

const root = "../.."

// TestSchemaRepair: the generated Kubernetes schemas accept apiVersion and kind
// (TypeMeta embedded by `make schemas`) and inline-embedded structs such as a
// volume's hostPath and a probe's exec, and reject a misspelled field.
func TestSchemaRepair(t *testing.T) {
	cases := []struct {
		name, expr string
		ok         bool
	}{
		{"typemeta", `corev1.#Namespace & {apiVersion: "v1", kind: "Namespace", metadata: name: "x"}`, true},
		{"volume hostPath", `corev1.#Volume & {name: "h", hostPath: {path: "/etc", type: "Directory"}}`, true},
		{"probe exec", `corev1.#Probe & {exec: command: ["true"]}`, true},
		{"configmap volume", `corev1.#Volume & {name: "s", configMap: name: "x"}`, true},
		{"misspelled metadata field", `corev1.#Namespace & {apiVersion: "v1", kind: "Namespace", metadata: nmae: "x"}`, false},
		{"misspelled top-level field", `appsv1.#DaemonSet & {apiVersion: "apps/v1", kind: "DaemonSet", spce: {}}`, false},
		{"wrong type", `nodev1.#RuntimeClass & {handler: 3}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "package gvisorgen\n\nimport (\n\tcorev1 \"k8s.io/api/core/v1\"\n\tappsv1 \"k8s.io/api/apps/v1\"\n\tnodev1 \"k8s.io/api/node/v1\"\n)\n\n_c1: corev1.#Namespace\n_c2: appsv1.#DaemonSet\n_c3: nodev1.#RuntimeClass\ntestValue: " + c.expr + "\n"
			dir, _ := filepath.Abs(filepath.Join(root, "cue"))
			insts := load.Instances([]string{"."}, &load.Config{
				Dir:     dir,
				Overlay: map[string]load.Source{filepath.Join(dir, "zz_schemacheck.cue"): load.FromString(src)},
			})
			v := cuecontext.New().BuildInstance(insts[0])
			err := v.LookupPath(cue.ParsePath("testValue")).Validate(cue.Concrete(true))
			if v.Err() != nil {
				err = v.Err()
			}
			if (err == nil) != c.ok {
				t.Errorf("ok=%v, err=%v", c.ok, err)
			}
		})
	}
}

// TestProfiles: each default target gets its cloud's storage and install dir.
func TestProfiles(t *testing.T) {
	ev, err := Load(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ev.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"kind": {"storageClass.provisioner": "rancher.io/local-path", "gvisor.host.installDir": "/usr/local/bin"},
		"gke": {"storageClass.provisioner": "pd.csi.storage.gke.io", "storageClass.parameters.type": "pd-balanced",
			`storageClass.parameters."replication-type"`: "regional-pd", "gvisor.host.installDir": "/home/kubernetes/bin"},
		"eks": {"storageClass.provisioner": "ebs.csi.aws.com", "storageClass.parameters.type": "gp3",
			"storageClass.parameters.encrypted": "true"},
	}
	for _, tg := range res.Targets {
		vals := ev.Context().CompileBytes(tg.Values)
		for p, w := range want[tg.Name] {
			got, err := vals.LookupPath(cue.ParsePath(p)).String()
			if err != nil || got != w {
				t.Errorf("%s: %s = %q (%v), want %q", tg.Name, p, got, err, w)
			}
		}
		name, _ := vals.LookupPath(cue.ParsePath("storageClass.name")).String()
		for _, managed := range []string{"standard", "standard-rwo", "gp2"} {
			if name == managed {
				t.Errorf("%s: default StorageClass name %q collides with a class the cloud manages", tg.Name, name)
			}
		}
		v, _ := vals.LookupPath(cue.ParsePath("gvisor.version")).String()
		// the default release: a 2026 release in the archive layout (issue 27; cue/delivery.cue says why)
		if v != "20260810.0" {
			t.Errorf("%s: default version %s, want 20260810.0", tg.Name, v)
		}
	}
}

// TestStockCUECLI: the stock cue CLI evaluates the module to the same objects,
// for the module's own targets and for a target with sandbox classes (where
// v0.17.1 once lost fields of a comprehension in a list slice that gvisorgen's
// own evaluation kept). One evaluation holds both: the module's copy with the
// classes target added (a new target changes none of the others), so that
// each CLI run evaluates the module once.
func TestStockCUECLI(t *testing.T) {
	bin := os.Getenv("CUE")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("cue"); err != nil {
			t.Fatal("no cue CLI: run `make test`, which installs cuelang.org/go/cmd/cue and sets CUE")
		}
	}
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "cue"), os.DirFS(filepath.Join(root, "cue"))); err != nil {
		t.Fatal(err)
	}
	extra := "package gvisorgen\n\ntargets: gpu: {\n\tprofile: \"kind\"\n\tgvisor: classes: {\n" +
		"\t\t\"gvisor-gpu\": preset: \"nvidia-gpu\"\n" +
		"\t\tfast: {handler: \"runsc-fast\", runsc: config: platform: \"kvm\"}\n" +
		"\t\tplain: runsc: config: network: \"none\"\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(tmp, "cue", "zz_classes.cue"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	stockCLIAgrees(t, bin, tmp)
}

// stockCLIAgrees compares `cue export -e rendered` in dir/cue with gvisorgen's evaluation of dir.
func stockCLIAgrees(t *testing.T, bin, dir string) {
	t.Helper()
	cmd := exec.Command(bin, "vet", "-c", ".")
	cmd.Dir = filepath.Join(dir, "cue")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cue vet: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "export", ".", "-e", "rendered")
	cmd.Dir = filepath.Join(dir, "cue")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cue export: %v", err)
	}
	var cli map[string]map[string]any
	if err := json.Unmarshal(out, &cli); err != nil {
		t.Fatal(err)
	}
	ev, err := Load(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ev.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Targets) != len(cli) || len(res.Targets) < 2 {
		t.Fatalf("gvisorgen evaluated %d targets, cue export %d: want the same, the module's and the classes target", len(res.Targets), len(cli))
	}
	for _, tg := range res.Targets {
		var objs []any
		for _, o := range tg.Objects {
			var m any
			if err := json.Unmarshal(o.JSON, &m); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, m)
		}
		var fromCLI []any
		for _, m := range cli[tg.Name] {
			fromCLI = append(fromCLI, m)
		}
		if len(objs) != len(fromCLI) {
			t.Errorf("%s: %d objects, cue export has %d", tg.Name, len(objs), len(fromCLI))
			continue
		}
		for _, o := range objs {
			found := false
			for _, c := range fromCLI {
				if reflect.DeepEqual(o, c) {
					found = true
				}
			}
			if !found {
				b, _ := json.Marshal(o)
				t.Errorf("%s: object not in cue export: %.200s", tg.Name, strings.TrimSpace(string(b)))
			}
		}
	}
}

// TestCUEFormatted: the module's own files are as `cue fmt` writes them.
func TestCUEFormatted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "cue", "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CUE files: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted: run `cue fmt ./cue`", filepath.Base(f))
		}
	}
}

// TestUsesTag: the build tag is passed only when an @if attribute names it
// (CUE refuses a tag no file uses); another @if in a file of the package,
// whose package clause also says gvisorgen, does not count.
func TestUsesTag(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"@if(!gvisorgen)\n\npackage gvisorgen\n", true},
		{"@if(prod && !gvisorgen)\n\npackage gvisorgen\n", true},
		{"@if(prod)\n\npackage gvisorgen\n", false},
		{"package gvisorgen\n", false},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.cue"), []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := usesTag(dir, buildTag); got != c.want {
			t.Errorf("%q: usesTag = %t, want %t", c.src, got, c.want)
		}
	}
}
