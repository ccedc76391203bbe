package layout_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

const repoRoot = "../.."

// folders are every folder name the layout package spells.
var folders = []string{layout.CUEDir, layout.TargetsDir, layout.PatchesDir,
	layout.OverlaysDir, layout.GeneratedDir, layout.DeliveryDir, layout.SmokeDir, layout.SchemasDir}

// allowed are the string literals outside internal/layout that equal a folder
// name without being one, by file and value, each with its reason. An entry
// that no longer matches fails the test, so the list cannot rot.
var allowed = []struct{ file, value, why string }{
	{"internal/cache/key.go", "cue", `a section label in the cache key's hash stream (k.field("section", ...)), not a path`},
	{"internal/cache/key.go", "targets", `a label in the cache key's hash stream (k.field("section"/"targets", ...)), not a path`},
	{"internal/cache/key.go", "patches", `a section label in the cache key's hash stream, not a path`},
	{"internal/eval/targets.go", "targets", "the CUE field `targets` (inline targets in cue/targets.cue), looked up with cue.ParsePath, not a folder"},
}

// TestOnlyLayoutSpellsFolders: no Go file of the program (internal/, cmd/;
// tests aside) but internal/layout holds a string literal that is one of the
// repository's folder names or a path starting with one ("overlays/...",
// "./overlays/..."): a rename in layout then reaches every reader and writer.
func TestOnlyLayoutSpellsFolders(t *testing.T) {
	used := make([]bool, len(allowed))
	files := 0
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, p)
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir() && (rel == "internal/layout" || d.Name() == "testdata"):
				return filepath.SkipDir
			case d.IsDir(), !strings.HasSuffix(p, ".go"), strings.HasSuffix(p, "_test.go"):
				return nil
			}
			files++
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			// Struct tags (json:"targets") name encodings, not folders.
			tags := map[*ast.BasicLit]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				if field, ok := n.(*ast.Field); ok && field.Tag != nil {
					tags[field.Tag] = true
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || tags[lit] {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
					return true
				}
				name := folderOf(s)
				if name == "" {
					return true
				}
				for i, a := range allowed {
					if a.file == rel && a.value == s {
						used[i] = true
						return true
					}
				}
				t.Errorf("%s: the string %q spells the folder %s/: use the internal/layout constant", fset.Position(lit.Pos()), s, name)
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 10 {
		t.Fatalf("only %d Go files scanned: is repoRoot right?", files)
	}
	for i, a := range allowed {
		if !used[i] {
			t.Errorf("allowed entry %s %q matches nothing any more: remove it", a.file, a.value)
		}
	}
}

// folderOf is the folder name s spells: s is the name, or a path that
// starts with it (optionally after "./"); "" when it spells none.
func folderOf(s string) string {
	s = strings.TrimPrefix(s, "./")
	for _, f := range folders {
		if s == f || strings.HasPrefix(s, f+"/") {
			return f
		}
	}
	return ""
}

func TestFolderOf(t *testing.T) {
	for s, want := range map[string]string{
		"overlays": "overlays", "overlays/kind": "overlays", "./overlays/%s": "overlays",
		"generated/": "generated", "smoke/kind/x.yaml": "smoke", "patches": "patches",
		"overlay": "", "overlays-old/x": "", "x/overlays": "", "targetsdir": "", "": "",
	} {
		if got := folderOf(s); got != want {
			t.Errorf("folderOf(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestDeliveryPointsAtOverlays: the CUE module (cue/delivery.cue) builds the
// paths Argo CD and Flux sync; in the committed delivery objects (kept equal
// to the module's output by gen's TestCommittedTreeIsFresh) every such path
// is layout.OverlaysDir/<target>, and that folder holds the overlay
// gvisorgen writes.
func TestDeliveryPointsAtOverlays(t *testing.T) {
	targets, err := os.ReadDir(filepath.Join(repoRoot, layout.DeliveryDir))
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Kind string
		Spec struct {
			Path   string // Flux Kustomization
			Source struct {
				Path string
			} // Argo CD Application
			Template struct {
				Spec struct {
					Source struct{ Path string }
				}
			} // Argo CD ApplicationSet
		}
	}
	read := func(p string) object {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := yaml.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return o
	}
	checked := map[string]int{}
	for _, d := range targets {
		if !d.IsDir() {
			o := read(filepath.Join(repoRoot, layout.DeliveryDir, d.Name()))
			if o.Kind == "ApplicationSet" {
				p := o.Spec.Template.Spec.Source.Path
				if dir, _, _ := strings.Cut(p, "/"); dir != layout.OverlaysDir {
					t.Errorf("%s: the ApplicationSet's path %q is not under %s/", d.Name(), p, layout.OverlaysDir)
				}
				checked["ApplicationSet"]++
			}
			continue
		}
		target := d.Name()
		files, err := filepath.Glob(filepath.Join(repoRoot, layout.DeliveryDir, target, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			o := read(f)
			var p string
			switch o.Kind {
			case "Application":
				p = o.Spec.Source.Path
			case "Kustomization":
				p = o.Spec.Path
			default:
				continue
			}
			checked[o.Kind]++
			if want := path.Join(layout.OverlaysDir, target); path.Clean(p) != want {
				t.Errorf("%s: %s path %q, want %s (or ./%s)", f, o.Kind, p, want, want)
			}
			kust := filepath.Join(repoRoot, layout.OverlaysDir, target, layout.Kustomization)
			if _, err := os.Stat(kust); err != nil {
				t.Errorf("%s points at %s, which holds no %s: %v", f, p, layout.Kustomization, err)
			}
		}
	}
	for _, kind := range []string{"Application", "Kustomization", "ApplicationSet"} {
		if checked[kind] == 0 {
			t.Errorf("no %s found in %s/: nothing was checked", kind, layout.DeliveryDir)
		}
	}
}

// ourLike matches a path element followed by '/' that looks like one of the
// repository's folders, or a misspelling of one (generated-manifests/,
// overlay/, rendered/, manifests/...), in a script, a workflow or the CUE
// module.
var ourLike = regexp.MustCompile(`(?:^|[\s"'=(:$}/.])((?:[a-z]+-)*(?:cue|targets?|overlays?|generated|generate[ds]?-[a-z]+|deliver(?:y|ies)|smoke|smokes|patch(?:es)?|rendered|manifests?)(?:-[a-z]+)*)/`)

// TestScriptsNameLayoutFolders: the CI scripts, the workflows, the cluster
// harness and the CUE module name the repository's folders as layout does:
// every folder-like name they use is one of layout's (no stale spelling), and
// each output folder is covered where it must be: drift.sh compares the whole
// work tree after generate (git status without a pathspec, or one that lists
// every output), smoke.sh reads smoke/<target>, the smoke workflow applies
// overlays/<target>, and the cluster harness (ci/cluster's Go tests, through
// layout's own names) applies generated/ and smoke/.
func TestScriptsNameLayoutFolders(t *testing.T) {
	var files []string
	for _, glob := range []string{"ci/*.sh", ".github/workflows/*.yml", "ci/cluster/*", "cue/*.cue"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatalf("no file matches %s", glob)
		}
		files = append(files, m...)
	}
	text := map[string]string{}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			continue // a Go helper's folder (ci/cluster/tlsmirror): Go is the other test's
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, f)
		rel = filepath.ToSlash(rel)
		text[rel] = string(b)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range ourLike.FindAllStringSubmatchIndex(line, -1) {
				word := line[m[2]:m[3]]
				if slices.Contains(folders, word) {
					continue
				}
				// A folder of the same name under another one (…/pv/smoke/)
				// is not the repository's: only a path that starts at the
				// repository root, or at $T, <tmp> or a quote, counts.
				if m[2] > 0 && line[m[2]-1] == '/' && !rootRelative(line[:m[2]-1]) {
					continue
				}
				t.Errorf("%s:%d: %q looks like one of the repository's folders but is not one layout names (%s): %s",
					rel, i+1, word+"/", strings.Join(folders, ", "), strings.TrimSpace(line))
			}
		}
	}

	// drift.sh: the whole tree, or every output.
	drift := text["ci/drift.sh"]
	status := regexp.MustCompile(`git status --porcelain[^)\n]*`).FindAllString(drift, -1)
	if len(status) == 0 {
		t.Errorf("ci/drift.sh runs no git status --porcelain: how does it see drift in %s?", strings.Join(layout.Outputs, ", "))
	}
	for _, s := range status {
		if i := strings.Index(s, " -- "); i >= 0 {
			for _, out := range layout.Outputs {
				if !regexp.MustCompile(`(^|\s)(\./)?` + out + `/?(\s|$)`).MatchString(s[i+4:]) {
					t.Errorf("ci/drift.sh: %q does not cover %s/", s, out)
				}
			}
		}
	}
	if !strings.Contains(drift, "generate") {
		t.Errorf("ci/drift.sh does not run generate")
	}

	// The other places each output must be named.
	for _, c := range []struct{ file, re, why string }{
		{"ci/smoke.sh", `SMOKE_DIR:-` + layout.SmokeDir + `/\$TARGET\}`, "smoke.sh applies smoke/<target> by default"},
		{".github/workflows/gvisor-smoke.yml", `-k "` + layout.OverlaysDir + `/\$TARGET"`, "the smoke workflow applies overlays/<target>"},
		// the cluster tests name the folders through layout itself, in their copy of the repository (c.Repo)
		{"ci/cluster/target_test.go", `filepath\.Join\(c\.Repo, layout\.GeneratedDir, "e2e"\)`, "the cluster harness applies generated/<target>"},
		{"ci/cluster/target_test.go", `filepath\.Join\(c\.Repo, layout\.SmokeDir, "e2e"\)`, "the cluster harness runs smoke/<target>"},
		{"ci/cluster/target_test.go", `filepath\.Join\(c\.Repo, layout\.TargetsDir, "e2e\.yaml"\)`, "the cluster harness declares its target in targets/"},
		{"cue/delivery.cue", `"\./` + layout.OverlaysDir + `/\\\(T\)"`, "Flux's Kustomization path"},
		{"cue/delivery.cue", `"` + layout.OverlaysDir + `/\\\(T\)"`, "Argo CD's Application path"},
	} {
		if !regexp.MustCompile(c.re).MatchString(text[c.file]) {
			t.Errorf("%s does not match %s: %s", c.file, c.re, c.why)
		}
	}
}

// rootRelative reports whether the text before a '/' ends in something that
// stands for the repository root or a copy of it: a variable ($T, ${T},
// $ROOT), <tmp>, or "." ("./overlays/...").
func rootRelative(before string) bool {
	return regexp.MustCompile(`(\$\{?[A-Za-z_]+\}?|<tmp>|(^|[\s"'=(:])\.)$`).MatchString(before)
}
