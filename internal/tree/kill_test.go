package tree

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// killed is what a killer panics with: apply stops inside the call and
// nothing of it runs afterwards (no undo, no put-back), as under SIGKILL.
type killed struct{}

// killer is ops that performs its calls with osOps until call n, where the
// run is killed: before the call takes effect or, when torn is set (a
// WriteTemp), halfway through it (the real call with only the first half of
// the content, so the file exists but is not whole). n < 0 kills nothing.
// Every call is recorded, described relative to root with the random
// suffix of staging names as "*", so that runs compare.
type killer struct {
	osOps
	root  string
	n     int
	torn  bool
	calls []string
}

// at records a call and reports whether the run is killed at it.
func (k *killer) at(format string, args ...any) bool {
	k.calls = append(k.calls, fmt.Sprintf(format, args...))
	return len(k.calls)-1 == k.n
}

var stagingSuffix = regexp.MustCompile(`^(\.gvisorgen-(?:stage|old)\..*\.)[0-9]+$`)

// rel names a path below the root, slash-separated, the staging suffix as *.
func (k *killer) rel(name string) string {
	r, err := filepath.Rel(k.root, name)
	if err != nil {
		return name
	}
	r = filepath.ToSlash(r)
	return path.Join(path.Dir(r), stagingSuffix.ReplaceAllString(path.Base(r), "$1*"))
}

func (k *killer) Mkdir(name string) error {
	if k.at("Mkdir %s", k.rel(name)) {
		panic(killed{})
	}
	return k.osOps.Mkdir(name)
}

func (k *killer) WriteTemp(dir, pattern string, data []byte) (string, error) {
	if k.at("WriteTemp %s", k.rel(filepath.Join(dir, pattern))) {
		if k.torn {
			k.osOps.WriteTemp(dir, pattern, data[:len(data)/2])
		}
		panic(killed{})
	}
	return k.osOps.WriteTemp(dir, pattern, data)
}

func (k *killer) Link(o, n string) error {
	if k.at("Link %s %s", k.rel(o), k.rel(n)) {
		panic(killed{})
	}
	return k.osOps.Link(o, n)
}

func (k *killer) Rename(o, n string) error {
	if k.at("Rename %s %s", k.rel(o), k.rel(n)) {
		panic(killed{})
	}
	return k.osOps.Rename(o, n)
}

func (k *killer) Remove(name string) error {
	if k.at("Remove %s", k.rel(name)) {
		panic(killed{})
	}
	return k.osOps.Remove(name)
}

// applyKilled runs apply with k and reports whether it was killed; an
// uninterrupted run must succeed.
func applyKilled(t *testing.T, root string, changes []Change, k *killer) (wasKilled bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(killed); !ok {
				panic(r)
			}
			wasKilled = true
		}
	}()
	if err := apply(root, changes, k); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return false
}

// TestKilledAtEveryStep kills apply at each of its file-system calls in turn
// (a WriteTemp also halfway through, its staged file torn), between two
// versions A and B of a small tree that has every kind of change — a file
// created in a new folder and one in an existing folder, a file updated, a
// file deleted so that its folder empties and one deleted from a folder that
// keeps others, a file left as it is — both ways. The kill is a panic that
// apply does not recover: no undo nor put-back runs, as under SIGKILL. After
// each kill every visible file is a whole file of A or B, every file both
// trees have is there (old or new; one being pruned may be gone already), and
// every hidden file is a staging file no kustomize, Argo CD or Flux reads;
// then one Plan+Apply (what generate does) makes exactly the wanted tree, no
// staging file left, no folder left that holds no wanted file (but the
// pruned folder a kill had already emptied: nothing in it to prune), and a
// second Plan finds nothing to do (check answers 0). This covers every window
// of a killed run, step by step; cmd/gvisorgen's TestKillDuringWrite proves
// the same with a real process and a real SIGKILL at random moments.
func TestKilledAtEveryStep(t *testing.T) {
	gen := func(s string) []byte { return []byte(Header + s) }
	trees := map[string]map[string][]byte{
		"A": {
			"overlays/a/same.yaml":  gen("kind: Same\n"),
			"overlays/a/stale.yaml": gen("kind: Stale\nversion: A\n"),
			"overlays/a/onlyA.yaml": gen("kind: OnlyA\n"),
			"generated/keep/k.yaml": gen("kind: Keep\n"),
			"generated/old/x.yaml":  gen("kind: Old\n"),
		},
		"B": {
			"overlays/a/same.yaml":  gen("kind: Same\n"),
			"overlays/a/stale.yaml": gen("kind: Stale\nversion: B, longer\n"),
			"overlays/a/onlyB.yaml": gen("kind: OnlyB\n"),
			"generated/keep/k.yaml": gen("kind: Keep\n"),
			"generated/new/x.yaml":  gen("kind: New\n"),
		},
	}
	// The folders generate owns: every target's, declared or left on disk.
	roots := []string{"generated/keep", "generated/new", "generated/old", "overlays/a"}
	want := func(name string) []File {
		var out []File
		for p, data := range trees[name] {
			out = append(out, File{Path: p, Data: data})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out
	}
	// folders lists the folders that hold a tree's files, and those above.
	folders := func(tr map[string][]byte) map[string]bool {
		out := map[string]bool{}
		for p := range tr {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				out[d] = true
			}
		}
		return out
	}
	plan := func(t *testing.T, root, to string) []Change {
		t.Helper()
		changes, err := Plan(root, roots, want(to))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Action == Foreign {
				t.Fatalf("foreign %s", c.Path)
			}
		}
		return changes
	}
	// setup writes the tree from and plans the change to the other one.
	setup := func(t *testing.T, from, to string) (string, []Change) {
		t.Helper()
		root := t.TempDir()
		for p, data := range trees[from] {
			write(t, root, p, string(data))
		}
		return root, plan(t, root, to)
	}

	for _, dir := range []struct{ from, to string }{{"A", "B"}, {"B", "A"}} {
		t.Run(dir.from+"-to-"+dir.to, func(t *testing.T) {
			from, to := trees[dir.from], trees[dir.to]
			// An uninterrupted run: its calls, and every kind of change.
			root, changes := setup(t, dir.from, dir.to)
			kinds := map[Action]int{}
			for _, c := range changes {
				kinds[c.Action]++
			}
			if kinds[Create] != 2 || kinds[Update] != 1 || kinds[Delete] != 2 || len(changes) != 5 {
				t.Fatalf("changes %v: want two creates, one update, two deletes", changes)
			}
			probe := &killer{root: root, n: -1}
			if applyKilled(t, root, changes, probe) {
				t.Fatal("the probe was killed")
			}
			calls := probe.calls
			n := len(calls)
			for _, op := range []string{"Mkdir ", "WriteTemp ", "Rename ", "Remove "} {
				if !strings.Contains(strings.Join(calls, "\n"), op) {
					t.Fatalf("no %s call among the %d: the test would prove little:\n%s", op, n, strings.Join(calls, "\n"))
				}
			}
			t.Logf("%d calls in an uninterrupted run", n)

			type kill struct {
				k    int
				torn bool
			}
			var kills []kill
			for k := 0; k <= n; k++ {
				kills = append(kills, kill{k: k})
				if k < n && strings.HasPrefix(calls[k], "WriteTemp ") {
					kills = append(kills, kill{k: k, torn: true})
				}
			}
			for _, kl := range kills {
				name := fmt.Sprintf("%02d %s", kl.k, "end (not killed)")
				if kl.k < n {
					name = fmt.Sprintf("%02d %s", kl.k, calls[kl.k])
				}
				if kl.torn {
					name += " (torn halfway)"
				}
				t.Run(name, func(t *testing.T) {
					root, changes := setup(t, dir.from, dir.to)
					k := &killer{root: root, n: kl.k, torn: kl.torn}
					if got := applyKilled(t, root, changes, k); got != (kl.k < n) {
						t.Fatalf("killed = %v, want %v", got, kl.k < n)
					}
					if len(k.calls) > n || !slices.Equal(k.calls, calls[:len(k.calls)]) {
						t.Fatalf("the calls differ from the uninterrupted run's:\n%s\nwant a prefix of:\n%s", strings.Join(k.calls, "\n"), strings.Join(calls, "\n"))
					}

					// The tree as the kill left it.
					files, dirs := walkTree(t, root)
					var staged []string
					for p, data := range files {
						base := path.Base(p)
						if strings.HasPrefix(base, ".") {
							if !IsStaging(base) {
								t.Errorf("hidden file %s is no staging file", p)
							}
							for _, ext := range []string{".yaml", ".yml", ".json"} {
								if strings.HasSuffix(base, ext) {
									t.Errorf("staging file %s ends in %s: kustomize, Argo CD or Flux could read it", p, ext)
								}
							}
							staged = append(staged, p)
							continue
						}
						a, inA := trees["A"][p]
						b, inB := trees["B"][p]
						switch {
						case !inA && !inB:
							t.Errorf("%s is in neither tree", p)
						case !(inA && bytes.Equal(a, data)) && !(inB && bytes.Equal(b, data)):
							t.Errorf("%s is neither A's nor B's file (torn write?): %q", p, data)
						}
					}
					// A file both trees have is there throughout, old or new;
					// one only the run's start has may be pruned already.
					for p := range from {
						if _, ok := files[p]; !ok && to[p] != nil {
							t.Errorf("%s, in both trees, is gone", p)
						}
					}
					emptyAtKill := map[string]bool{}
					for d, entries := range dirs {
						if entries == 0 {
							emptyAtKill[d] = true
						}
					}
					sort.Strings(staged)
					t.Logf("left staged: %v", staged)

					// The repair: what generate does next.
					if err := Apply(root, plan(t, root, dir.to)); err != nil {
						t.Fatalf("repair: %v", err)
					}
					files, dirs = walkTree(t, root)
					for p, data := range files {
						if wantData, ok := to[p]; !ok {
							t.Errorf("after the repair: %s is not wanted", p)
						} else if !bytes.Equal(wantData, data) {
							t.Errorf("after the repair: %s is %q, want %q", p, data, wantData)
						}
					}
					for p := range to {
						if _, ok := files[p]; !ok {
							t.Errorf("after the repair: %s is missing", p)
						}
					}
					toDirs, fromDirs := folders(to), folders(from)
					for d := range dirs {
						switch {
						case toDirs[d]:
						case fromDirs[d] && emptyAtKill[d]:
							// The run was killed after pruning the folder's last
							// file and before removing it: an empty folder, which
							// no tool reads nor git records, and nothing for the
							// next Plan to prune.
							t.Logf("after the repair: %s is left empty, as the kill left it", d)
						default:
							t.Errorf("after the repair: folder %s is left behind", d)
						}
					}
					if again := plan(t, root, dir.to); len(again) != 0 {
						t.Errorf("after the repair, Plan still finds %v", again)
					}
				})
			}
		})
	}
}

// walkTree reads every regular file under root (slash-separated paths) and
// counts the entries of every folder below it; anything else fails.
func walkTree(t *testing.T, root string) (files map[string][]byte, dirs map[string]int) {
	t.Helper()
	files, dirs = map[string][]byte{}, map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel != "." {
			dirs[path.Dir(rel)]++
		}
		switch {
		case d.IsDir():
			if rel != "." {
				dirs[rel] += 0
			}
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", rel)
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(dirs, ".")
	return files, dirs
}
