package gen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
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
	changes, err := tree.Plan(repoRoot, out.Roots, out.Files)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		t.Errorf("%s %s: run `make generate`\n%s", c.Action, c.Path, c.UnifiedDiff())
	}
	var names []string
	for _, tg := range out.Result.Targets {
		names = append(names, tg.Name)
	}
	if got := strings.Join(names, ","); got != "aks,eks,gke,k3s,kind,rke2" {
		t.Errorf("default targets = %s, want aks,eks,gke,k3s,kind,rke2", got)
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
// in the order kustomize prints. It runs on a temp copy that also holds
// user patches, so that patches are covered too: a plain patch file in gke's
// patches/, and in kind's a kustomize Component with a patch in a sub-folder
// and JSON 6902 patches in YAML (.patch) and in JSON.
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
	// kind's patches/ is a kustomize Component that uses what only a
	// Component may: a strategic-merge patch in a sub-folder, a JSON 6902
	// patch in YAML with a .patch name, and one in JSON.
	component := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n" +
			"- path: sub/pool.yaml\n" +
			"- path: label.patch\n  target: {kind: DaemonSet, name: runsc-installer}\n" +
			"- path: annotate.json\n  target: {kind: RuntimeClass, name: gvisor}\n",
		"sub/pool.yaml": "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: runsc-installer\n  namespace: gvisor-system\nspec:\n  template:\n    metadata:\n      labels:\n        example.com/pool: sandbox\n",
		"label.patch":   "- op: add\n  path: /metadata/labels/example.com~1patched-by\n  value: json6902-yaml\n",
		"annotate.json": `[{"op": "add", "path": "/metadata/annotations/example.com~1patched-by", "value": "json6902-json"}]`,
	}
	for name, data := range component {
		p := filepath.Join(dir, "overlays/kind/patches", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := Build(eval.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := tree.Plan(dir, out.Roots, out.Files)
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Apply(dir, changes); err != nil {
		t.Fatal(err)
	}
	for _, tg := range out.Result.Targets {
		t.Run(tg.Name, func(t *testing.T) {
			cmd := exec.Command(bin, "build", filepath.Join(dir, layout.OverlaysDir, tg.Name))
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
			gen := filepath.Join(dir, layout.GeneratedDir, tg.Name)
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
			if tg.Name == "kind" {
				for _, want := range []string{"example.com/pool: sandbox", "example.com/patched-by: json6902-yaml", "example.com/patched-by: json6902-json"} {
					if !strings.Contains(string(cli), want) {
						t.Errorf("the Component's patches were not all applied: no %q", want)
					}
				}
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
// its own. #Render and #Smoke never see the name (#Values has no target
// field), so what depends on the name must come through the values, where it
// is part of what is compared. Cases from a review that broke an earlier
// design (which rendered from the values with the name left open: CUE's
// defaults then chose silently).
func TestMemoSameAsFresh(t *testing.T) {
	edit := func(t *testing.T, dir, file, old, new string) {
		t.Helper()
		p := filepath.Join(dir, file)
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
	const label = `"app.kubernetes.io/managed-by": "gvisorgen"`
	const ds = "daemonset-runsc-installer.yaml"
	type want struct{ target, file, text string }
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
		// want: files that must hold a text; target "*" means every target.
		want []want
		// err: both ways fail with this message.
		err string
		// distinct: every target's values differ, nothing is shared.
		distinct bool
	}{
		{name: "plain"},
		{
			name: "render reads the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "cue/render.cue", label, label+"\n\t\t\"example.com/cluster\": V.target")
			},
			err: "undefined field: target",
		},
		{
			name: "render picks a default by the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "cue/render.cue", `terminationGracePeriodSeconds: 5`, `terminationGracePeriodSeconds: *{c0004: 30}[V.target] | 5`)
			},
			want: []want{{"*", ds, "terminationGracePeriodSeconds: 5\n"}},
		},
		{
			name: "values derived from the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "cue/targets.cue", `kind: profile: "kind"`, `kind: profile: "kind"
	[_]: {
		target: _
		gvisor: runsc: config: platform: *{gke: "kvm"}[target] | "systrap"
	}`)
			},
			want: []want{{"gke", ds, `platform = "kvm"`}, {"kind", ds, `platform = "systrap"`}},
		},
		{
			name: "schema default from the name",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "cue/values.cue", "target: #DNSLabel", `target: #DNSLabel
	gvisor: nodeSelector: "example.com/cluster": target`)
			},
			want:     []want{{"c0004", ds, "example.com/cluster: c0004"}, {"c0005", ds, "example.com/cluster: c0005"}},
			distinct: true,
		},
		{
			name: "hidden fields",
			edit: func(t *testing.T, dir string) {
				edit(t, dir, "cue/targets.cue", `kind: profile: "kind"`, `kind: {profile: "kind", gvisor: _extra: "x"}
	akind: profile: "kind"`)
			},
		},
		{
			name: "pattern constraint in a target",
			edit: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "targets", "c0100.cue"), []byte("profile: \"eks\"\ngvisor: nodeSelector: [string]: \"windows\"\npolicy: waive: {\"unpinned-release\": \"test\", \"unpinned-image\": \"test\"}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := fleet(t, 24)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			build := func(share bool) (*Output, error) {
				return Build(eval.Options{Root: dir, NoShare: !share})
			}
			fresh, errFresh := build(false)
			memo, errMemo := build(true)
			if tc.err != "" {
				if errFresh == nil || errMemo == nil || errFresh.Error() != errMemo.Error() || !strings.Contains(errMemo.Error(), tc.err) {
					t.Fatalf("want the same error with %q both ways:\nwithout sharing: %v\nwith sharing: %v", tc.err, errFresh, errMemo)
				}
				return
			}
			if errFresh != nil || errMemo != nil {
				t.Fatalf("without sharing: %v\nwith sharing: %v", errFresh, errMemo)
			}
			sameFiles(t, fresh.Files, memo.Files)
			if fresh.Result.Shared != 0 || (memo.Result.Shared == 0) != tc.distinct {
				t.Errorf("shared parts: %d without the memo, %d with it", fresh.Result.Shared, memo.Result.Shared)
			}
			files := map[string]string{}
			for _, f := range memo.Files {
				files[f.Path] = string(f.Data)
			}
			for _, w := range tc.want {
				targets := []string{w.target}
				if w.target == "*" {
					targets = memo.Result.All
				}
				for _, tg := range targets {
					p := "generated/" + tg + "/" + w.file
					if data, ok := files[p]; !ok || !strings.Contains(data, w.text) {
						t.Errorf("%s (present: %t) lacks %q", p, ok, w.text)
					}
				}
			}
		})
	}
}
