package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

const repoRoot = "../.."

// TestQuickStart runs the README's quick start as written (the sh block after <!-- quickstart -->) in a copy of the
// repository, and checks what the README says it does.
func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed: the quick start runs make generate and make check")
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const mark = "<!-- quickstart -->\n```sh\n"
	i := strings.Index(readme, mark)
	if i < 0 {
		t.Fatal("README.md has no quick start block (<!-- quickstart --> then a sh block)")
	}
	block := readme[i+len(mark):]
	block = block[:strings.Index(block, "\n```")]
	dir := t.TempDir()
	copyRepo(t, dir)
	cmd := exec.Command("sh", "-e", "-c", block)
	cmd.Dir = dir
	// -trimpath keeps the copy's folder out of Go's build cache keys: make generate's build of gvisorgen is then a
	// cache hit from the second run on, as in the repository itself, instead of a full compile in every new folder.
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start failed (%v):\n%s\n--- the block:\n%s", err, out, block)
	}
	// "writes overlays/dev/, generated/dev/, delivery/dev/ and smoke/dev/"
	for _, d := range []string{"overlays/dev", "generated/dev", "delivery/dev", "smoke/dev"} {
		if ents, err := os.ReadDir(filepath.Join(dir, d)); err != nil || len(ents) == 0 {
			t.Errorf("the quick start wrote nothing into %s (%v)", d, err)
		}
	}
	// the last command names the RuntimeClass of the new cluster, with the README's node selector
	if !strings.Contains(string(out), "generated/dev/runtimeclass-gvisor.yaml") {
		t.Errorf("no RuntimeClass with handler runsc in generated/dev:\n%s", out)
	}
	ds, _ := os.ReadFile(filepath.Join(dir, "generated/dev/daemonset-runsc-installer.yaml"))
	if !strings.Contains(string(ds), `sandbox: "true"`) {
		t.Errorf("the installer DaemonSet does not select the quick start's nodes:\n%s", ds)
	}
}

// copyRepo copies the repository's files (not .git, not build output) into dir.
func copyRepo(t *testing.T, dir string) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == ".git" || rel == ".bin" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6} +(.*?) *$`)
	codeRE    = regexp.MustCompile("`[^`]*`") // a code span is no link
)

// TestLinks: every relative link of the project's documents names a file that exists, and every #anchor a heading
// of that file (GitHub's anchors).
func TestLinks(t *testing.T) {
	var files []string
	for _, g := range []string{"*.md", "docs/*.md", "cue/installer/*.md", "ci/*/*.md"} {
		m, _ := filepath.Glob(filepath.Join(repoRoot, g))
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d documents found: %v", len(files), files)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(f string) map[string]bool {
		if a, ok := anchors[f]; ok {
			return a
		}
		a := map[string]bool{}
		b, _ := os.ReadFile(f)
		for _, l := range outsideFences(string(b)) {
			if m := headingRE.FindStringSubmatch(l); m != nil {
				a[slug(m[1])] = true
			}
		}
		anchors[f] = a
		return a
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range outsideFences(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s: link %s: no such file", rel(f), target)
						continue
					}
				}
				if anchor != "" && !anchorsOf(dest)[anchor] {
					t.Errorf("%s: link %s: %s has no heading with that anchor", rel(f), target, rel(dest))
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked", checked)
	}
}

func rel(f string) string { r, _ := filepath.Rel(repoRoot, f); return r }

// outsideFences: the lines of a markdown document that are not inside a fenced code block.
func outsideFences(s string) []string {
	var out []string
	fence := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, l)
		}
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
