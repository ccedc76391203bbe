//go:build nodetest

package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
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
GVZ_HX= GVZ_CFG_DIR=${CONFIG%/*} GVZ_TMP=$TMPD
gvz_imports "$CONFIG" >"$GVZ_TMP/pats"
gvz_import_expand "$GVZ_TMP/pats"`)
		cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "TMPD=" + tmp, "CONFIG=" + config,
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

// TestExplicitImportsList: the config copy gvz_to_check writes with an explicit `imports` list (a config that imports
// itself, or a drop-in folder of gvisorgen's) loads, read by containerd's own rules (go-toml, then resolveImports:
// an entry with a `*` is globbed again), exactly what the node's containerd loads from the config once gvisorgen's
// drop-in is written — in its order, the staged drop-in at the drop-in's place, without the config itself and the
// copy, and without the drop-in as it is on disk when none is staged. Names holding glob characters, quotes,
// backslashes, tabs and control characters; a drop-in named by a path entry; a drop-in folder that does not exist yet.
func TestExplicitImportsList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		entries []string
		files   []string // under the config's folder
		dropin  string   // GVZ_DROPIN, relative; "" for none
		staged  bool
		onDisk  bool // the drop-in exists on disk (a later run)
	}{
		{"star-name-staged", []string{"conf.d/*.toml"}, []string{"conf.d/*.toml", "conf.d/a.toml", "conf.d/z.toml"}, "conf.d/gvisorgen-runsc.toml", true, false},
		{"star-name-on-disk-left-out", []string{"conf.d/*.toml"}, []string{"conf.d/*.toml", "conf.d/a.toml", "conf.d/z.toml"}, "conf.d/gvisorgen-runsc.toml", false, true},
		{"star-name-on-disk-staged", []string{"conf.d/*.toml"}, []string{"conf.d/*.toml", "conf.d/a.toml", "conf.d/z.toml"}, "conf.d/gvisorgen-runsc.toml", true, true},
		{"path-entry-staged", []string{"conf.d/a.toml", "conf.d/gvisorgen-runsc.toml"}, []string{"conf.d/a.toml"}, "conf.d/gvisorgen-runsc.toml", true, false},
		{"folder-not-there-yet", []string{"*/*.toml", "new.d/*.toml"}, []string{"x.d/y.toml", "a.d/b.toml"}, "new.d/gvisorgen-runsc.toml", true, false},
		{"self-import", []string{"*.toml", "conf.d/*"}, []string{"*.toml", "a.toml", "conf.d/c.toml"}, "", false, false},
		{"odd-names", []string{"conf.d/*"}, []string{"conf.d/q\"uote.toml", "conf.d/back\\slash.toml", "conf.d/t\tab.toml", "conf.d/c\x01trl.toml", "conf.d/[x]?.toml", "conf.d/.dot.toml"}, "conf.d/gvisorgen-runsc.toml", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "etc", "containerd")
			write := func(rel, text string) {
				p := filepath.Join(dir, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var cfg strings.Builder
			cfg.WriteString("version = 2\nimports = [")
			for _, e := range c.entries {
				cfg.WriteString("'" + e + "', ")
			}
			cfg.WriteString("]\n")
			config := filepath.Join(dir, "config.toml")
			write("config.toml", cfg.String())
			for _, f := range c.files {
				write(f, "version = 2\n")
			}
			check, staged := config+".gvisorgen-check", config+".gvisorgen-dropin"
			write("config.toml.gvisorgen-dropin", "version = 2\n")
			dropin := ""
			if c.dropin != "" {
				dropin = filepath.Join(dir, c.dropin)
				if c.onDisk {
					write(c.dropin, "version = 2\n")
				}
			}
			stagedArg := ""
			if c.staged {
				stagedArg = staged
			}
			cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"
GVZ_HX= HOST_ROOT= GVZ_CFG_DIR=${CONTAINERD_CONFIG%/*} GVZ_SELF_IMPORT=1 GVZ_TMP=$TMPD
gvz_imports "$CONTAINERD_CONFIG" >"$GVZ_TMP/pats"
gvz_to_check "$CONTAINERD_CONFIG" "$GVZ_TMP/pats" $STAGED`)
			cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "TMPD=" + t.TempDir(),
				"CONTAINERD_CONFIG=" + config, "GVZ_CHECK=" + check, "GVZ_DROPIN=" + dropin, "STAGED=" + stagedArg}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			b, err := os.ReadFile(check)
			if err != nil {
				t.Fatal(err)
			}
			var copyCfg struct{ Imports []string }
			if err := toml.Unmarshal(b, &copyCfg); err != nil {
				t.Fatalf("the copy is not TOML containerd reads: %v\n%s", err, b)
			}
			got := containerdImports(t, check, copyCfg.Imports)

			// what the node's containerd loads once the drop-in is written (the staged file standing for it)
			if c.staged && !c.onDisk {
				write(c.dropin, "version = 2\n")
			}
			var want []string
			for _, f := range containerdImports(t, config, c.entries) {
				switch {
				case f == config || f == check:
				case f == dropin && !c.staged:
				case f == dropin:
					want = append(want, staged)
				default:
					want = append(want, f)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the copy loads:\n %q\ncontainerd loads from the config:\n %q\nthe copy's list: %s", got, want, b)
			}
			if len(want) < 2 {
				t.Errorf("only %d files: the case no longer exercises the list", len(want))
			}
		})
	}
}
