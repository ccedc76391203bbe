package gen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/render"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

const repoRoot = "../.."

// TestCommittedTreeIsFresh is the golden test of the three default targets:
// the committed overlays/ and generated/ are the golden trees, and they must
// be exactly what the generator makes (as `make check` asserts in CI).
func TestCommittedTreeIsFresh(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := out.Plan(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("%s %s: run `make generate`\n%s", c.Action, c.Path, tree.UnifiedDiff(c))
	}
	var names []string
	for _, tg := range out.Result.Targets {
		names = append(names, tg.Name)
	}
	if got := strings.Join(names, ","); got != "eks,gke,kind" {
		t.Errorf("default targets = %s, want eks,gke,kind", got)
	}
}

// TestDeterministic builds twice and compares every byte.
func TestDeterministic(t *testing.T) {
	a, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, a.Files, b.Files)
}

// sameFiles fails unless both builds hold the same files, in the same order,
// byte for byte.
func sameFiles(t *testing.T, a, b []tree.File) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("file %d differs: %s vs %s", i, a[i].Path, b[i].Path)
		}
	}
}

// TestKustomizeParity: the stdout of the kustomize CLI (the release built on
// our kustomize/api version, as Argo CD and Flux run it) over each overlay
// equals the files of generated/<target>, headers removed, joined with "---"
// in the order kustomize prints. It runs on a temp copy that also holds a
// user patch, so that patches are covered too.
func TestKustomizeParity(t *testing.T) {
	bin := os.Getenv("KUSTOMIZE")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("kustomize"); err != nil {
			t.Fatal("no kustomize CLI: run `make test`, which installs sigs.k8s.io/kustomize/kustomize/v5@v5.8.2 and sets KUSTOMIZE")
		}
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "cue"), os.DirFS(filepath.Join(repoRoot, "cue"))); err != nil {
		t.Fatal(err)
	}
	patch := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: runsc-installer\n  namespace: gvisor-system\nspec:\n  template:\n    spec:\n      tolerations:\n      - operator: Exists\n"
	if err := os.MkdirAll(filepath.Join(dir, "overlays/gke/patches"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlays/gke/patches/tolerate-all.yaml"), []byte(patch), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Build(eval.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := out.Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Apply(dir, changes); err != nil {
		t.Fatal(err)
	}
	for _, tg := range out.Result.Targets {
		t.Run(tg.Name, func(t *testing.T) {
			cmd := exec.Command(bin, "build", filepath.Join(dir, render.OverlaysDir, tg.Name))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cli, err := cmd.Output()
			if err != nil {
				t.Fatalf("kustomize build: %v\n%s", err, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("kustomize printed warnings: %s", stderr.String())
			}
			docs := strings.Split(string(cli), "\n---\n")
			var joined []string
			gen := filepath.Join(dir, render.GeneratedDir, tg.Name)
			entries, err := os.ReadDir(gen)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(docs) {
				t.Errorf("kustomize printed %d resources, generated/%s holds %d files", len(docs), tg.Name, len(entries))
			}
			for _, d := range docs {
				var meta struct {
					Kind     string
					Metadata struct{ Name, Namespace string }
				}
				if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(gen, render.FileName(meta.Kind, meta.Metadata.Name, "")))
				if err != nil {
					t.Fatal(err)
				}
				joined = append(joined, strings.TrimSuffix(string(tree.StripHeader(b)), "\n"))
			}
			if got, want := strings.Join(joined, "\n---\n")+"\n", string(cli); got != want {
				t.Errorf("generated/%s differs from kustomize build:\n--- generated\n%s\n--- kustomize\n%s", tg.Name, got, want)
			}
			if tg.Name == "gke" && !strings.Contains(string(cli), "- operator: Exists") {
				t.Errorf("the user patch was not applied")
			}
		})
	}
}

// TestScriptsRenderAsText: the installer scripts reach the ConfigMap as YAML
// block text, so that a script change shows in a PR as changed lines. A tab or
// a trailing space would make YAML emitters fall back to one quoted string.
func TestScriptsRenderAsText(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(repoRoot, "cue/installer/*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	cm, err := os.ReadFile(filepath.Join(repoRoot, "generated/kind/configmap-runsc-installer-scripts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "\t") || strings.HasSuffix(line, " ") {
				t.Errorf("%s:%d: a tab or a trailing space: indent with spaces", filepath.Base(s), i+1)
			}
		}
		if !strings.Contains(string(cm), "\n  "+filepath.Base(s)+": |\n") {
			t.Errorf("%s is not rendered as block text in the ConfigMap", filepath.Base(s))
		}
	}
}

// TestParallelSameAsSerial: a fleet spread over several evaluators gives the
// same files, in the same order, as one evaluator, and the same errors.
func TestParallelSameAsSerial(t *testing.T) {
	dir := fleet(t, 40)
	build := func(workers int) (*Output, error) {
		old := eval.Workers
		eval.Workers = workers
		defer func() { eval.Workers = old }()
		return Build(eval.Options{Root: dir})
	}
	serial, err := build(1)
	if err != nil {
		t.Fatal(err)
	}
	parallel, err := build(3)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, serial.Files, parallel.Files)
	// Two bad targets in different chunks: both reported, in target order.
	for _, n := range []string{"c0005", "c0035"} {
		if err := os.WriteFile(filepath.Join(dir, "targets", n+".yaml"), []byte("profile: eks\ngvisor:\n  version: latest\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, errSerial := build(1)
	_, errParallel := build(3)
	if errSerial == nil || errParallel == nil || errSerial.Error() != errParallel.Error() {
		t.Fatalf("errors differ:\nserial:   %v\nparallel: %v", errSerial, errParallel)
	}
	if i, j := strings.Index(errParallel.Error(), "target c0005"), strings.Index(errParallel.Error(), "target c0035"); i < 0 || j < i {
		t.Errorf("errors not in target order: %v", errParallel)
	}
}

// TestMemoSameAsFresh: sharing rendered parts between targets whose values
// differ only in the name gives the same files as rendering every target on
// its own, also when a part reads the name, when the schema gives the name a
// default, and when a target carries hidden fields.
func TestMemoSameAsFresh(t *testing.T) {
	edit := func(t *testing.T, dir, file, old, new string) {
		t.Helper()
		p := filepath.Join(dir, "cue", file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s lacks %q", file, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		// want is a string every target's DaemonSet must hold, with the
		// target's name for %s.
		want string
		// noShare: no target may share a part.
		noShare bool
	}{
		{name: "plain"},
		{
			name: "render reads the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "render.cue", `"app.kubernetes.io/managed-by": "gvisorgen"`, `"app.kubernetes.io/managed-by": "gvisorgen"
		"example.com/cluster":          V.target`)
			},
			want: "example.com/cluster: %s\n",
		},
		{
			name: "render tests the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "render.cue", `terminationGracePeriodSeconds: 5`, `terminationGracePeriodSeconds: 5
							if V.target == "c0004" {activeDeadlineSeconds: 4}`)
			},
		},
		{
			name: "the name has a default",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "values.cue", "target: #DNSLabel", `target: *"dflt" | #DNSLabel`)
				edit(t, dir, "render.cue", `"app.kubernetes.io/managed-by": "gvisorgen"`, `"app.kubernetes.io/managed-by": "gvisorgen"
		"example.com/cluster":          V.target`)
			},
			want:    "example.com/cluster: %s\n",
			noShare: true,
		},
		{
			name: "hidden fields",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "targets.cue", `kind: profile: "kind"`, `kind: {profile: "kind", gvisor: _extra: "x"}
	akind: profile: "kind"`)
				edit(t, dir, "render.cue", `let G = V.gvisor`, `let G = V.gvisor
	let extra = *G._extra | "none"`)
				edit(t, dir, "render.cue", `"app.kubernetes.io/managed-by": "gvisorgen"`, `"app.kubernetes.io/managed-by": "gvisorgen"
		"example.com/extra":            extra`)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := fleet(t, 30)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			build := func(share bool) *Output {
				out, err := Build(eval.Options{Root: dir, NoShare: !share})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			fresh, memo := build(false), build(true)
			sameFiles(t, fresh.Files, memo.Files)
			if fresh.Result.Shared != 0 || (memo.Result.Shared == 0) != tc.noShare {
				t.Errorf("shared parts: %d without the memo, %d with it", fresh.Result.Shared, memo.Result.Shared)
			}
			for _, f := range memo.Files {
				if !strings.HasPrefix(f.Path, "generated/") || !strings.HasSuffix(f.Path, "/daemonset-runsc-installer.yaml") {
					continue
				}
				name := strings.Split(f.Path, "/")[1]
				if tc.want != "" && !strings.Contains(string(f.Data), fmt.Sprintf(tc.want, name)) {
					t.Errorf("%s lacks %q", f.Path, fmt.Sprintf(tc.want, name))
				}
				if tc.name == "render tests the name" && strings.Contains(string(f.Data), "activeDeadlineSeconds") != (name == "c0004") {
					t.Errorf("%s: activeDeadlineSeconds only for c0004", f.Path)
				}
				if tc.name == "hidden fields" && strings.Contains(string(f.Data), "example.com/extra: x") != (name == "kind") {
					t.Errorf("%s: example.com/extra: x only for kind", f.Path)
				}
			}
		})
	}
}
