package cache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// write writes a file an hour old, as inputs are when nobody edits them
// during a run (Store stores nothing after a fresh write: see TestSessionABA).
func write(t *testing.T, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(full, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestSessionABA: an input changed and changed back during a run hashes as
// before, but the run may have read the in-between content: nothing is
// stored, because the input was written after the run began.
func TestSessionABA(t *testing.T) {
	fixture(t, false)
	t.Setenv("GVISORGEN_CACHE_DIR", t.TempDir())
	t.Setenv("GVISORGEN_CACHE_DEBUG", "1")
	var log bytes.Buffer
	files := []tree.File{{Path: "generated/kind/daemonset.yaml", Data: []byte(tree.Header + "kind: DaemonSet\n")}}
	s := Open(baseOpts(), false, &log)
	orig, err := os.ReadFile("cue/a.cue")
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range [][]byte{[]byte("package x\na: 99\n"), orig} {
		if err := os.WriteFile("cue/a.cue", content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if key, err := Key(baseOpts()); err != nil || key != s.key {
		t.Fatalf("the restored input hashes differently: %v", err)
	}
	s.Store(1, []string{"generated/kind"}, files, nil)
	if !strings.Contains(log.String(), "cache: not stored (an input was written during the run)") {
		t.Errorf("log: %s", log.String())
	}
}

// fixtureFiles are the inputs of a small repository, plus files that are not
// inputs (the generated tree).
var fixtureFiles = [][2]string{
	{"cue/a.cue", "package x\na: 1\n"},
	{"cue/b.cue", "package x\nb: 2\n"},
	{"cue/cue.mod/module.cue", "module: \"x.dev/x@v0\"\n"},
	{"cue/cue.mod/gen/k8s.io/api/core/v1/types_go_gen.cue", "package v1\n"},
	{"cue/installer/install.sh", "#!/bin/sh\necho install\n"},
	{"targets/t1.yaml", "profile: kind\n"},
	{"targets/t2.yaml", "profile: gke\n"},
	{"values.yaml", "gvisor: version: \"20240212\"\n"},
	{"overlays/kind/patches/p.yaml", "kind: Patch\n"},
	{"overlays/kind/daemonset.yaml", tree.Header + "kind: DaemonSet\n"},
	{"generated/kind/daemonset.yaml", tree.Header + "kind: DaemonSet\n"},
}

// fixture makes the repository in a new folder, writing the files in the
// given order, and makes it the working directory.
func fixture(t *testing.T, reverse bool) {
	t.Helper()
	root := t.TempDir()
	files := append([][2]string(nil), fixtureFiles...)
	if reverse {
		for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
			files[i], files[j] = files[j], files[i]
		}
	}
	for _, f := range files {
		write(t, root, f[0], f[1])
	}
	t.Chdir(root)
}

func baseOpts() eval.Options {
	return eval.Options{Root: ".", ValuesFiles: []string{"values.yaml"}, Sets: []string{"gvisor.enabled=true"}}
}

func mustKey(t *testing.T, opts eval.Options) string {
	t.Helper()
	k, err := Key(opts)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyChangesWithEveryInput(t *testing.T) {
	fixture(t, false)
	base := mustKey(t, baseOpts())

	for _, c := range []struct {
		name   string
		change func(t *testing.T, o *eval.Options)
	}{
		{"cue file edited", func(t *testing.T, _ *eval.Options) { write(t, ".", "cue/a.cue", "package x\na: 2\n") }},
		{"cue file added", func(t *testing.T, _ *eval.Options) { write(t, ".", "cue/c.cue", "package x\n") }},
		{"cue file removed", func(t *testing.T, _ *eval.Options) { os.Remove("cue/b.cue") }},
		{"cue file renamed", func(t *testing.T, _ *eval.Options) { os.Rename("cue/b.cue", "cue/bb.cue") }},
		{"cue.mod file edited", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "cue/cue.mod/module.cue", "module: \"y.dev/y@v0\"\n")
		}},
		{"cue.mod/gen file edited", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "cue/cue.mod/gen/k8s.io/api/core/v1/types_go_gen.cue", "package v1\n// x\n")
		}},
		{"installer script edited", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "cue/installer/install.sh", "#!/bin/sh\necho installed\n")
		}},
		{"targets file added", func(t *testing.T, _ *eval.Options) { write(t, ".", "targets/t3.yaml", "profile: eks\n") }},
		{"targets file removed", func(t *testing.T, _ *eval.Options) { os.Remove("targets/t2.yaml") }},
		{"targets file edited", func(t *testing.T, _ *eval.Options) { write(t, ".", "targets/t1.yaml", "profile: eks\n") }},
		{"targets folder gone", func(t *testing.T, _ *eval.Options) { os.RemoveAll("targets") }},
		{"-f content", func(t *testing.T, _ *eval.Options) { write(t, ".", "values.yaml", "gvisor: version: \"20250101\"\n") }},
		{"-f another file", func(t *testing.T, o *eval.Options) {
			write(t, ".", "other.yaml", "gvisor: version: \"20240212\"\n")
			o.ValuesFiles = []string{"other.yaml"}
		}},
		{"-f added", func(t *testing.T, o *eval.Options) { o.ValuesFiles = append(o.ValuesFiles, "values.yaml") }},
		{"-f none", func(t *testing.T, o *eval.Options) { o.ValuesFiles = nil }},
		{"--set changed", func(t *testing.T, o *eval.Options) { o.Sets = []string{"gvisor.enabled=false"} }},
		{"--set added", func(t *testing.T, o *eval.Options) { o.Sets = append(o.Sets, "gvisor.version=20250101") }},
		{"--set none", func(t *testing.T, o *eval.Options) { o.Sets = nil }},
		{"--target", func(t *testing.T, o *eval.Options) { o.Only = []string{"t1"} }},
		{"--target another", func(t *testing.T, o *eval.Options) { o.Only = []string{"t2"} }},
		{"-f and --set do not run together", func(t *testing.T, o *eval.Options) {
			o.ValuesFiles, o.Sets = nil, []string{"values.yaml"}
		}},
		{"patch edited", func(t *testing.T, _ *eval.Options) { write(t, ".", "overlays/kind/patches/p.yaml", "kind: Other\n") }},
		{"patch added", func(t *testing.T, _ *eval.Options) { write(t, ".", "overlays/gke/patches/q.yaml", "kind: Patch\n") }},
		{"patch in a subfolder", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "overlays/kind/patches/sub/r.yaml", "kind: Patch\n")
		}},
		{"patch removed", func(t *testing.T, _ *eval.Options) { os.Remove("overlays/kind/patches/p.yaml") }},
		{"other CUE folder", func(t *testing.T, o *eval.Options) {
			os.Rename("cue", "cue2")
			write(t, ".", "cue/a.cue", "package x\na: 1\n")
			o.CUEDir = "cue2"
		}},
		{"other targets folder", func(t *testing.T, o *eval.Options) {
			os.Rename("targets", "targets2")
			o.TargetsDir = "targets2"
		}},
		{"CUE_EXPERIMENT", func(t *testing.T, _ *eval.Options) { t.Setenv("CUE_EXPERIMENT", "evalv3=0") }},
		// eval refuses a folder in targets/: a hit must not hide that.
		{"a folder in targets/", func(t *testing.T, _ *eval.Options) { os.MkdirAll("targets/sub", 0o755) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixture(t, false)
			opts := baseOpts()
			c.change(t, &opts)
			if got := mustKey(t, opts); got == base {
				t.Errorf("key did not change")
			}
		})
	}
}

func TestKeyStable(t *testing.T) {
	fixture(t, false)
	base := mustKey(t, baseOpts())
	if again := mustKey(t, baseOpts()); again != base {
		t.Fatalf("key changed between two calls")
	}

	for _, c := range []struct {
		name   string
		change func(t *testing.T, o *eval.Options)
	}{
		{"nothing, files written in another order", func(*testing.T, *eval.Options) {}},
		{"generated overlay file edited", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "overlays/kind/daemonset.yaml", tree.Header+"kind: Changed\n")
		}},
		{"generated file edited", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "generated/kind/daemonset.yaml", tree.Header+"kind: Changed\n")
		}},
		{"generated target folder added", func(t *testing.T, _ *eval.Options) {
			write(t, ".", "generated/gone/x.yaml", tree.Header+"kind: X\n")
		}},
		{"a file beside the overlays", func(t *testing.T, _ *eval.Options) { write(t, ".", "overlays/README.md", "hi\n") }},
		{"a hidden folder in targets/ (not read)", func(t *testing.T, _ *eval.Options) { write(t, ".", "targets/.sub/x.yaml", "x: 1\n") }},
		{"the defaults spelled out", func(t *testing.T, o *eval.Options) { o.CUEDir, o.TargetsDir = "cue", "targets" }},
		{"an empty folder", func(t *testing.T, _ *eval.Options) { os.Mkdir("cue/empty", 0o755) }},
		{"mtime only", func(t *testing.T, _ *eval.Options) {
			b, _ := os.ReadFile("cue/a.cue")
			write(t, ".", "cue/a.cue", string(b))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Another folder, files created in reverse order: the key does
			// not depend on where the repository is nor on listing order.
			fixture(t, true)
			opts := baseOpts()
			c.change(t, &opts)
			if got := mustKey(t, opts); got != base {
				t.Errorf("key changed")
			}
		})
	}
}

func TestKeyUnreadable(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, o *eval.Options)
	}{
		{"missing -f file", func(t *testing.T, o *eval.Options) { o.ValuesFiles = []string{"nope.yaml"} }},
		{"-f folder", func(t *testing.T, o *eval.Options) { o.ValuesFiles = []string{"cue"} }},
		{"missing CUE folder", func(t *testing.T, o *eval.Options) { o.CUEDir = "nope" }},
		{"a pipe in cue/", func(t *testing.T, _ *eval.Options) {
			if err := syscall.Mkfifo("cue/pipe", 0o644); err != nil {
				t.Skip(err)
			}
		}},
		{"a link to a folder in cue/", func(t *testing.T, _ *eval.Options) {
			if err := os.Symlink("installer", "cue/linked"); err != nil {
				t.Skip(err)
			}
		}},
		{"a dangling link in targets/", func(t *testing.T, _ *eval.Options) {
			if err := os.Symlink("nope.yaml", "targets/t9.yaml"); err != nil {
				t.Skip(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixture(t, false)
			opts := baseOpts()
			c.change(t, &opts)
			if k, err := Key(opts); err == nil {
				t.Errorf("Key = %s, want an error", k)
			}
		})
	}
}

func TestKeyFollowsLinkedFiles(t *testing.T) {
	fixture(t, false)
	base := mustKey(t, baseOpts())
	// A link to a file is hashed as its content: a new target.
	if err := os.Symlink("t1.yaml", "targets/t3.yaml"); err != nil {
		t.Skip(err)
	}
	linked := mustKey(t, baseOpts())
	if linked == base {
		t.Fatal("a linked target did not change the key")
	}
	write(t, ".", "targets/t1.yaml", "profile: eks\n")
	if mustKey(t, baseOpts()) == linked {
		t.Fatal("editing a linked file did not change the key")
	}
}

func TestBinaryID(t *testing.T) {
	id, err := binaryID()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "go-build-id:") && !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("binaryID = %q", id)
	}
	exe, _ := os.Executable()
	t.Logf("%s: %s", exe, id)

	// Mach-O and PE binaries carry it at the start of their text segment.
	fake := filepath.Join(t.TempDir(), "exe")
	data := append(bytes.Repeat([]byte{0}, 4096), "\xff Go build ID: \"abc/def\"\n \xff\xcc\xcc"...)
	if err := os.WriteFile(fake, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := textBuildID(fake); got != "abc/def" {
		t.Errorf("textBuildID = %q, want abc/def", got)
	}
	if got := elfBuildID(fake); got != "" {
		t.Errorf("elfBuildID of a non-ELF file = %q", got)
	}
}

// tree of the Fresh tests: two targets' generated files and the fleet file.
func freshTree(t *testing.T) (string, *Entry) {
	t.Helper()
	root := t.TempDir()
	files := []tree.File{
		{Path: "overlays/a/kustomization.yaml", Data: []byte(tree.Header + "k: a\n")},
		{Path: "generated/a/x.yaml", Data: []byte(tree.Header + "x: a\n")},
		{Path: "generated/b/x.yaml", Data: []byte(tree.Header + "x: b\n")},
		{Path: "delivery/appset.yaml", Data: []byte(tree.Header + "appset\n")},
	}
	for _, f := range files {
		write(t, root, f.Path, string(f.Data))
	}
	write(t, root, "overlays/a/patches/p.yaml", tree.Header+"a patch that copied the header\n")
	// A hand-written file in an owned folder where the run writes nothing
	// (overlays/b) is not reported: see tree.Plan.
	write(t, root, "overlays/b/hand.yaml", "hand-written\n")
	roots := []string{"delivery", "generated/a", "generated/b", "overlays/a", "overlays/b"}
	return root, NewEntry("k", true, 2, roots, files)
}

func TestFresh(t *testing.T) {
	root, e := freshTree(t)
	if why := Fresh(root, e); why != "" {
		t.Fatalf("Fresh = %q, want fresh", why)
	}
	for _, c := range []struct {
		name   string
		change func(t *testing.T, root string)
		only   bool // true: still fresh for a --target run
	}{
		{"edited, same size", func(t *testing.T, root string) { write(t, root, "generated/a/x.yaml", tree.Header+"x: c\n") }, false},
		{"edited, other size", func(t *testing.T, root string) { write(t, root, "generated/a/x.yaml", tree.Header+"x: cc\n") }, false},
		{"header removed", func(t *testing.T, root string) { write(t, root, "generated/a/x.yaml", "x: a\n") }, false},
		{"deleted", func(t *testing.T, root string) { os.Remove(filepath.Join(root, "delivery/appset.yaml")) }, false},
		{"a folder instead", func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, "generated/b/x.yaml"))
			os.Mkdir(filepath.Join(root, "generated/b/x.yaml"), 0o755)
		}, false},
		{"extra generated file", func(t *testing.T, root string) {
			write(t, root, "generated/b/extra.yaml", tree.Header+"extra\n")
		}, false},
		// A file gvisorgen did not write where it writes: check reports it
		// (tree.Foreign), so a hit must not say fresh over it.
		{"a foreign file", func(t *testing.T, root string) { write(t, root, "generated/a/.x.tmp", "temp\n") }, false},
		{"a hand-written file in an overlay", func(t *testing.T, root string) { write(t, root, "overlays/a/hand.yaml", "hand-written\n") }, false},
		{"extra generated file in a root that did not exist", func(t *testing.T, root string) {
			write(t, root, "overlays/b/extra.yaml", tree.Header+"extra\n")
		}, false},
		{"a root that is a link", func(t *testing.T, root string) {
			other := t.TempDir()
			os.CopyFS(other, os.DirFS(filepath.Join(root, "generated/a")))
			os.RemoveAll(filepath.Join(root, "generated/a"))
			os.Symlink(other, filepath.Join(root, "generated/a"))
		}, false},
		{"folder of an undeclared target", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "smoke/gone"), 0o755)
		}, true},
		{"a foreign kustomization file in an overlay", func(t *testing.T, root string) {
			write(t, root, "overlays/a/kustomization.yml", "resources: []\n")
		}, false},
		{"a top folder that is a file", func(t *testing.T, root string) {
			write(t, root, "smoke", "not a folder\n")
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, e := freshTree(t)
			c.change(t, root)
			if why := Fresh(root, e); why == "" {
				t.Errorf("fresh after the change")
			} else {
				t.Logf("not fresh: %s", why)
			}
			e.Full = false
			if why := Fresh(root, e); (why == "") != c.only {
				t.Errorf("--target run: Fresh = %q", why)
			}
		})
	}
	for _, c := range []struct {
		name   string
		change func(t *testing.T, root string)
	}{
		{"hand-written file in a root where the run writes nothing", func(t *testing.T, root string) { write(t, root, "overlays/b/mine.yaml", "mine\n") }},
		{"file in a subfolder of a root", func(t *testing.T, root string) {
			write(t, root, "generated/a/sub/x.yaml", tree.Header+"x\n")
		}},
		{"patch edited", func(t *testing.T, root string) { write(t, root, "overlays/a/patches/p.yaml", "other\n") }},
		{"file outside the roots", func(t *testing.T, root string) { write(t, root, "README.md", "hi\n") }},
		{"file beside the target folders", func(t *testing.T, root string) { write(t, root, "smoke/README.md", "hi\n") }},
		{"known target folder, stale root kept", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "overlays/b"), 0o755)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, e := freshTree(t)
			c.change(t, root)
			if why := Fresh(root, e); why != "" {
				t.Errorf("Fresh = %q, want fresh", why)
			}
		})
	}
}

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	_, e := freshTree(t)
	e.Key = strings.Repeat("ab", 32)
	if err := Save(dir, e); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, e.Key)
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	got, err := Load(dir, e.Key)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(e) {
		t.Fatalf("Load = %+v\nwant   %+v", got, e)
	}
	if _, err := Load(dir, strings.Repeat("cd", 32)); err == nil {
		t.Error("Load of a missing key succeeded")
	}
	good, _ := os.ReadFile(name)
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("garbage")},
		{"empty", nil},
		{"truncated", good[:len(good)-10]},
		{"one byte changed", bytes.Replace(good, []byte(`"targets":2`), []byte(`"targets":3`), 1)},
		{"other version", bytes.Replace(good, []byte(Version), []byte(Version+"x"), 1)},
	} {
		if err := os.WriteFile(name, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir, e.Key); err == nil {
			t.Errorf("%s: Load succeeded", c.name)
		}
	}
	// An entry stored under another key's name does not load.
	other := strings.Repeat("ef", 32)
	os.WriteFile(filepath.Join(dir, other), good, 0o644)
	if _, err := Load(dir, other); err == nil {
		t.Error("an entry of another key loaded")
	}
	// Paths that leave the root do not load.
	bad := *e
	bad.Files = append([]File{{Path: "../outside.yaml", SHA256: e.Files[0].SHA256}}, e.Files...)
	Save(dir, &bad)
	if _, err := Load(dir, bad.Key); err == nil {
		t.Error("an entry with ../ loaded")
	}
}

func TestSaveTrims(t *testing.T) {
	dir := t.TempDir()
	for i := range maxEntries + 5 {
		e := &Entry{Key: fmt.Sprintf("%064x", i)}
		if err := Save(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	write(t, dir, "unrelated", "kept\n")
	Save(dir, &Entry{Key: fmt.Sprintf("%064x", 999)})
	entries, _ := os.ReadDir(dir)
	if len(entries) != maxEntries+1 {
		t.Fatalf("%d files left, want %d", len(entries), maxEntries+1)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%064x", 999))); err != nil {
		t.Error("the newest entry was trimmed")
	}
}

func TestSessionOff(t *testing.T) {
	fixture(t, false)
	t.Setenv("GVISORGEN_CACHE_DIR", t.TempDir())
	t.Setenv("GVISORGEN_CACHE_DEBUG", "1")
	var log bytes.Buffer
	if s := Open(baseOpts(), true, &log); s != nil {
		t.Error("--no-cache: session open")
	}
	t.Setenv("GVISORGEN_CACHE", "off")
	if s := Open(baseOpts(), false, &log); s != nil {
		t.Error("GVISORGEN_CACHE=off: session open")
	}
	var s *Session
	if s.Lookup() != nil {
		t.Error("nil session hit")
	}
	s.Store(1, nil, nil, nil) // no panic
	if strings.Count(log.String(), "cache: miss (off") != 2 {
		t.Errorf("log: %s", log.String())
	}
}

func TestSessionStoreAndHit(t *testing.T) {
	fixture(t, false)
	dir := t.TempDir()
	t.Setenv("GVISORGEN_CACHE_DIR", dir)
	t.Setenv("GVISORGEN_CACHE_DEBUG", "1")
	var log bytes.Buffer
	files := []tree.File{
		{Path: "generated/kind/daemonset.yaml", Data: []byte(tree.Header + "kind: DaemonSet\n")},
		{Path: "overlays/kind/daemonset.yaml", Data: []byte(tree.Header + "kind: DaemonSet\n")},
	}
	roots := []string{"generated/kind", "overlays/kind"}
	opts := baseOpts()
	opts.Only = []string{"kind"}

	s := Open(opts, false, &log)
	if s.Lookup() != nil {
		t.Fatal("hit in an empty cache")
	}
	// Warnings come back whole (cause, target, example mark and all): a hit
	// groups them as the run did.
	warns := []warn.Warning{
		{Cause: warn.Unpinned, Target: "kind", Subject: "gvisor.release.sha512", Message: "target kind: m1", Action: "run `gvisorgen pin`", Example: true},
		{Cause: warn.Waived, Target: "kind", Subject: "unpinned-image", Message: "target kind: m2", Action: "why"},
	}
	s.Store(1, roots, files, warns)
	e := Open(opts, false, &log).Lookup()
	if e == nil || e.Targets != 1 || len(e.Files) != 2 {
		t.Fatalf("no hit after Store: %+v\n%s", e, log.String())
	}
	if !slices.Equal(e.Warnings, warns) {
		t.Errorf("warnings after a hit: %+v, want %+v", e.Warnings, warns)
	}
	// A full run has another key.
	if Open(baseOpts(), false, &log).Lookup() != nil {
		t.Fatal("a full run hit the entry of a --target run")
	}
	// An input that changes during the run: nothing stored.
	s = Open(baseOpts(), false, &log)
	write(t, ".", "cue/a.cue", "package x\na: 3\n")
	s.Store(1, roots, files, nil)
	if !strings.Contains(log.String(), "inputs changed during the run") {
		t.Errorf("log: %s", log.String())
	}
	// A cache folder that cannot be written: Store stays silent.
	t.Setenv("GVISORGEN_CACHE_DEBUG", "")
	blocked := filepath.Join(dir, "file")
	write(t, dir, "file", "x")
	t.Setenv("GVISORGEN_CACHE_DIR", filepath.Join(blocked, "sub"))
	log.Reset()
	s = Open(opts, false, &log)
	s.Store(1, roots, files, nil)
	if s.Lookup() != nil || log.Len() != 0 {
		t.Errorf("blocked cache: hit or output %q", log.String())
	}
}

func TestDir(t *testing.T) {
	t.Setenv("GVISORGEN_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	t.Setenv("HOME", "/h")
	if d := Dir(); d != "/x/gvisorgen/tree" {
		t.Errorf("Dir = %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	if d := Dir(); d != "/h/.cache/gvisorgen/tree" {
		t.Errorf("Dir = %s", d)
	}
	t.Setenv("GVISORGEN_CACHE_DIR", "/c")
	if d := Dir(); d != "/c" {
		t.Errorf("Dir = %s", d)
	}
}
