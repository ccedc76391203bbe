//go:build nodetest

package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// containerdImports is containerd's resolveImports (cmd/containerd/server/config, the same in 1.6 and 1.7): each
// entry cleaned and, when relative, joined to the config's folder; globbed with filepath.Glob when it holds a `*`,
// else taken as a path. What it then loads is every result that is a file (a missing path or a folder makes it refuse
// the config; the installer leaves those out and lets the dump say so), each once, where it first comes (LoadConfig
// skips a path it loaded).
func containerdImports(t *testing.T, config string, entries []string) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		p := filepath.Clean(e)
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(config), p)
		}
		matches := []string{p}
		if strings.Contains(p, "*") {
			var err error
			if matches, err = filepath.Glob(p); err != nil {
				t.Fatalf("%q: %v", e, err)
			}
		}
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() && !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// TestImportExpansionAgreesWithContainerd: the files, in order, lib.sh says a config's imports make containerd load
// (gvz_imports, then gvz_import_expand: what gvz_to_check spells out for a validated copy and ready.sh watches) are
// containerd's own, in its order, on a folder of names where a shell's globbing differs from Go's: dot files, `[!`,
// bytewise order against the locale's, entries without a `*` (paths to containerd, whatever they hold), entries
// spelled with `.` and `..`, a glob in a folder part (Go orders by folder, then name: not by whole path), names
// holding blanks, tabs, backslashes, and files that are folders, links or dangling.
func TestImportExpansionAgreesWithContainerd(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "etc", "containerd")
	files := []string{
		"a.toml", "B.toml", "b.toml", ".hidden.toml", "!x.toml", "[x].toml", "10", "9", "x y.toml", "tab\tname.toml",
		"é.toml", "e.toml", "q?.toml", "*.toml", `back\slash.toml`, "conf.d/c.toml", "conf.d/.d.toml", "conf.d/Z.toml",
		"a/c.toml", "a-b/c.toml", "a/b/c.toml", "a.d/c.toml", "dir.toml/x.toml",
	}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("version = 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"z.toml": "a.toml", "dangling.toml": "nowhere", "linkdir": "a"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	entries := []string{
		"*.toml", "*", "[!a]*.toml", "[^a]*.toml", "?.toml", "q?.toml", "[x].toml", "*/c.toml", "./*.toml",
		"conf.d/../*.toml", "conf.d/*", dir + "/conf.d/*.toml", "a*/*.toml", "*/*/c.toml", `\*.toml`, "nomatch*/x",
		"*.TOML", "[a-b]*", "a.toml", "dir.toml", "linkdir/*", ".//conf.d/./*.toml", "a/b/../../e*", "../containerd/b*",
	}
	config := filepath.Join(dir, "config.toml")
	var toml strings.Builder
	toml.WriteString("version = 2\nimports = [\n")
	for _, e := range entries {
		toml.WriteString("  '" + e + "',\n") // literal strings: the entries as they are
	}
	toml.WriteString("]\n")
	if err := os.WriteFile(config, []byte(toml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	// one entry at a time, and all together (the order across entries)
	check := func(es []string) {
		t.Helper()
		var sub strings.Builder
		sub.WriteString("version = 2\nimports = [")
		for _, e := range es {
			sub.WriteString("'" + e + "', ")
		}
		sub.WriteString("]\n")
		if err := os.WriteFile(config, []byte(sub.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"
GVZ_HX= GVZ_CFG_DIR=${CONFIG%/*}
gvz_imports "$CONFIG" >"$GVZ_TMP/pats"
gvz_import_expand "$GVZ_TMP/pats"`)
		cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "GVZ_TMP=" + tmp, "CONFIG=" + config,
			"GVZ_BUILTIN_IMPORT=/etc/containerd/conf.d/*.toml"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", es, err, out)
		}
		var got []string
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			if l != "" && !seen[l] { // repeats are the callers' to drop (gvz_import_files, gvz_to_check)
				seen[l] = true
				got = append(got, l)
			}
		}
		want := containerdImports(t, config, es)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("imports %q:\n lib.sh:     %q\n containerd: %q", es, got, want)
		}
	}
	for _, e := range entries {
		check([]string{e})
	}
	check(entries)
	if n := len(containerdImports(t, config, entries)); n < 20 {
		t.Errorf("only %d files loaded by the whole list: the corpus no longer exercises the expansion", n)
	}
}
