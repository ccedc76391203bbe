package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// snapshotDir records every entry under dir (links unfollowed): path, mode
// and content.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := rel + " " + info.Mode().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// failAt is ops that fails its n-th call (counting from 0).
type failAt struct {
	osOps
	n, calls int
}

var errInjected = errors.New("injected failure")

func (f *failAt) tick() error {
	f.calls++
	if f.calls-1 == f.n {
		return errInjected
	}
	return nil
}
func (f *failAt) Mkdir(name string) error {
	if err := f.tick(); err != nil {
		return err
	}
	return f.osOps.Mkdir(name)
}
func (f *failAt) WriteTemp(dir, pattern string, data []byte) (string, error) {
	if err := f.tick(); err != nil {
		return "", err
	}
	return f.osOps.WriteTemp(dir, pattern, data)
}
func (f *failAt) Link(o, n string) error {
	if err := f.tick(); err != nil {
		return err
	}
	return f.osOps.Link(o, n)
}
func (f *failAt) Rename(o, n string) error {
	if err := f.tick(); err != nil {
		return err
	}
	return f.osOps.Rename(o, n)
}

// Remove never fails: it is what putting back and cleaning up use.

// TestApplyAllOrNothing makes every call of a run fail in turn: each time
// the tree is left exactly as it was.
func TestApplyAllOrNothing(t *testing.T) {
	gen := func(s string) string { return Header + s }
	setup := func(root string) []Change {
		write(t, root, "overlays/a/stale.yaml", gen("before\n"))
		write(t, root, "overlays/a/old.yaml", gen("old\n"))
		write(t, root, "overlays/a/hand.yaml", "hand-written\n")
		write(t, root, "generated/gone/x.yaml", gen("x\n"))
		want := []File{
			{Path: "overlays/a/stale.yaml", Data: []byte(gen("after\n"))},
			{Path: "overlays/a/new.yaml", Data: []byte(gen("new\n"))},
			{Path: "generated/a/new.yaml", Data: []byte(gen("new\n"))},
		}
		changes, err := Plan(root, []string{"overlays/a", "generated/a", "generated/gone"}, want)
		if err != nil {
			t.Fatal(err)
		}
		return changes
	}
	// Count the calls of a run that succeeds.
	probe := t.TempDir()
	counter := &failAt{n: -1}
	if err := apply(probe, setup(probe), counter); err != nil {
		t.Fatal(err)
	}
	if counter.calls < 8 {
		t.Fatalf("only %d calls: the test would prove little", counter.calls)
	}
	for n := 0; n < counter.calls; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			root := t.TempDir()
			changes := setup(root)
			before := snapshotDir(t, root)
			err := apply(root, changes, &failAt{n: n})
			var ae *ApplyError
			if !errors.As(err, &ae) || !errors.Is(err, errInjected) {
				t.Fatalf("err = %v, want an ApplyError wrapping the injected failure", err)
			}
			if len(ae.Switched) != 0 || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("err = %v", err)
			}
			if after := snapshotDir(t, root); after != before {
				t.Fatalf("tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestPlanRefusesLinks: a symlinked output folder or file is refused before
// anything is read through it or written.
func TestPlanRefusesLinks(t *testing.T) {
	gen := []byte(Header + "x\n")
	for _, tc := range []struct {
		name  string
		setup func(root, outside string)
		bad   string
	}{
		{"top folder", func(root, outside string) { os.Symlink(outside, filepath.Join(root, "generated")) }, "generated"},
		{"target folder", func(root, outside string) {
			os.MkdirAll(filepath.Join(root, "generated"), 0o755)
			os.Symlink(outside, filepath.Join(root, "generated/a"))
		}, "generated/a"},
		{"file", func(root, outside string) {
			os.MkdirAll(filepath.Join(root, "generated/a"), 0o755)
			os.Symlink(filepath.Join(outside, "x.yaml"), filepath.Join(root, "generated/a/x.yaml"))
		}, "generated/a/x.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			write(t, outside, "x.yaml", string(gen))
			write(t, outside, "old.yaml", string(gen))
			tc.setup(root, outside)
			_, err := Plan(root, []string{"generated/a"}, []File{{Path: "generated/a/x.yaml", Data: []byte(Header + "new\n")}})
			var ue *UnsafeError
			if !errors.As(err, &ue) || ue.Path != tc.bad || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("err = %v, want UnsafeError at %s", err, tc.bad)
			}
			// Prunable refuses a linked folder; a linked file is not its to prune.
			if _, err := Prunable(root, []string{"generated/a"}, nil); (tc.name != "file") != errors.As(err, &ue) {
				t.Fatalf("Prunable: err = %v", err)
			}
		})
	}
}

func TestPlanContainment(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"generated/a/../../../outside/x.yaml", "/etc/x.yaml", "generated/b/x.yaml", "generated/a/sub/x.yaml"} {
		_, err := Plan(root, []string{"generated/a"}, []File{{Path: p, Data: []byte(Header)}})
		var ue *UnsafeError
		if !errors.As(err, &ue) {
			t.Errorf("%s: err = %v, want UnsafeError", p, err)
		}
	}
	_, err := Plan(root, []string{"generated/a"}, []File{{Path: "generated/a/x.yaml"}, {Path: "generated/a/x.yaml"}})
	if err == nil || !strings.Contains(err.Error(), "two objects map to this one file") {
		t.Errorf("duplicate: err = %v", err)
	}
}

// A killed run's staging files are pruned by the next plan; links and
// files without the header are never touched (the latter are reported).
func TestPlanPrunesStaging(t *testing.T) {
	root := t.TempDir()
	write(t, root, "generated/a/x.yaml", Header+"x\n")
	write(t, root, "generated/a/.gvisorgen-stage.x.yaml.123", "half")
	write(t, root, "generated/a/.gvisorgen-old.x.yaml.123", Header+"old\n")
	write(t, root, "generated/a/notes.md", "mine\n")
	os.Symlink("/etc/hostname", filepath.Join(root, "generated/a/link.yaml"))
	changes, err := Plan(root, []string{"generated/a"}, []File{{Path: "generated/a/x.yaml", Data: []byte(Header + "x\n")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Action.String()+" "+c.Path)
	}
	if strings.Join(got, ",") != "delete generated/a/.gvisorgen-old.x.yaml.123,delete generated/a/.gvisorgen-stage.x.yaml.123,foreign generated/a/notes.md" {
		t.Fatalf("changes = %v", got)
	}
	if err := Apply(root, changes); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "generated/a"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "link.yaml,notes.md,x.yaml" {
		t.Fatalf("left: %v", names)
	}
}

// swapper swaps the folder of the first staged file for a link to a folder outside the repository right before the
// write: the race between apply's checks (no link on the way) and its writes.
type swapper struct {
	osOps
	outside string
	done    bool
}

func (s *swapper) WriteTemp(dir, pattern string, data []byte) (string, error) {
	if !s.done {
		s.done = true
		if err := os.Rename(dir, dir+".moved"); err != nil {
			return "", err
		}
		if err := os.Symlink(s.outside, dir); err != nil {
			return "", err
		}
	}
	return s.osOps.WriteTemp(dir, pattern, data)
}

// TestApplyStaysInsideTheRoot: a folder swapped for a link to outside between apply's checks and its write makes
// Apply (whose calls go through an os.Root) fail with nothing written outside; without the root the same race
// writes outside the repository, which is what the root is for.
func TestApplyStaysInsideTheRoot(t *testing.T) {
	for _, rooted := range []bool{true, false} {
		t.Run(map[bool]string{true: "rooted", false: "unrooted"}[rooted], func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			write(t, root, "generated/a/keep.yaml", Header+"keep\n")
			changes, err := Plan(root, []string{"generated/a"}, []File{
				{Path: "generated/a/keep.yaml", Data: []byte(Header + "keep\n")},
				{Path: "generated/a/new.yaml", Data: []byte(Header + "new\n")},
			})
			if err != nil {
				t.Fatal(err)
			}
			s := &swapper{outside: outside}
			if rooted {
				r, err := os.OpenRoot(root)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				s.osOps = osOps{root: r, dir: root}
			}
			err = apply(root, changes, s)
			ents, _ := os.ReadDir(outside)
			if rooted {
				if err == nil || len(ents) != 0 {
					t.Fatalf("a write through the swapped link: err %v, outside holds %v", err, ents)
				}
				var ae *ApplyError
				if !errors.As(err, &ae) || len(ae.Switched) != 0 {
					t.Fatalf("want an ApplyError with nothing switched, got %v", err)
				}
			} else if len(ents) == 0 {
				t.Fatalf("without the root the race should reach outside (err %v): the test no longer shows the race", err)
			}
		})
	}
}
