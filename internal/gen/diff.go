package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gitsrc"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/rdiff"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// DiffOptions are the inputs of diff: the run's inputs, and two git refs
// (Base "" is the merge base of HEAD with the main branch; Head "" is the
// working tree). --target filters what is shown, not what is evaluated: a
// target may exist on one side only.
type DiffOptions struct {
	Options
	Base, Head string
}

// Differs is diff's "no": the sides differ, or a side is stale.
type Differs struct{ Diff *rdiff.Diff }

func (e *Differs) Error() string {
	if len(e.Diff.Entries) == 0 {
		return "a side is stale: its committed files are not what its inputs evaluate to"
	}
	return fmt.Sprintf("%d files differ", len(e.Diff.Entries))
}

// Diff compares what two refs commit — every folder generate writes, which
// is what Argo CD and Flux sync — and checks each side against its own
// evaluation, without touching the checkout or the index. A side that cannot
// be read or evaluated is Unanswered; a difference or a stale side is
// *Differs, with the comparison.
func Diff(opts DiffOptions) (*rdiff.Diff, error) {
	if err := gitsrc.CheckRoot(rootOf(opts.Root)); err != nil {
		return nil, err
	}
	base := opts.Base
	if base == "" {
		mb, err := gitsrc.MergeBase(opts.Root)
		if err != nil {
			return nil, err
		}
		base = mb
	}
	b, bFiles, bTargets, err := side(opts.Options, base, "base")
	if err != nil {
		return nil, err
	}
	h, hFiles, hTargets, err := side(opts.Options, opts.Head, "head")
	if err != nil {
		return nil, err
	}
	// A --target declared on neither side would filter everything out and
	// answer "no difference" for a cluster that does not exist: refused as
	// every other command refuses it.
	if err := eval.CheckTargets(opts.Only, slices.Compact(slices.Sorted(slices.Values(append(bTargets, hTargets...))))); err != nil {
		return nil, err
	}
	d := &rdiff.Diff{Base: b, Head: h, Entries: rdiff.Compare(bFiles, hFiles), Targets: opts.Only}
	if len(opts.Only) > 0 {
		d.Entries = slices.DeleteFunc(d.Entries, func(e rdiff.Entry) bool {
			return e.Target != "" && !slices.Contains(opts.Only, e.Target)
		})
	}
	if d.Differs() {
		return d, &Differs{Diff: d}
	}
	return d, nil
}

// side reads one side's committed output and checks it against the side's
// own evaluation: a git ref exported to a temporary folder, or the working
// tree when ref is empty. It returns the side's declared targets too.
func side(opts Options, ref, name string) (rdiff.Side, []tree.File, []string, error) {
	opts.Only = nil
	opts.NoCache = true
	s := rdiff.Side{Label: "working tree"}
	if ref != "" {
		commit, err := gitsrc.Resolve(opts.Root, ref)
		if err != nil {
			return s, nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		dir, err := os.MkdirTemp("", "gvisorgen-diff-")
		if err != nil {
			return s, nil, nil, err
		}
		defer os.RemoveAll(dir)
		if err := gitsrc.Export(opts.Root, commit, dir); err != nil {
			return s, nil, nil, fmt.Errorf("%s (%s): %w", name, ref, err)
		}
		opts.Root = dir
		s.Label = fmt.Sprintf("%s (%.12s)", ref, commit)
		if ref == commit {
			s.Label = commit[:12]
		}
	}
	rep, err := Run(opts, Check)
	var st *Stale
	switch {
	case errors.As(err, &st):
		for _, c := range st.Changes {
			s.Stale = append(s.Stale, c.Path)
		}
	case err != nil:
		return s, nil, nil, &Unanswered{Err: fmt.Errorf("%s (%s) does not evaluate:\n%w", name, s.Label, err)}
	}
	var targets []string
	if rep.Output != nil {
		targets = rep.Output.Result.All
	}
	files, err := committed(opts.Root)
	if err != nil {
		return s, nil, nil, &Unanswered{Err: fmt.Errorf("%s (%s): %w", name, s.Label, err)}
	}
	return s, files, targets, nil
}

// committed reads every regular file under the output folders (links and
// staging leftovers aside: nothing syncs them).
func committed(root string) ([]tree.File, error) {
	var out []tree.File
	for _, top := range layout.Outputs {
		if err := tree.CheckRoots(root, []string{top}); err != nil {
			return nil, err
		}
		base := filepath.Join(root, top)
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == base {
				return fs.SkipDir
			}
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() || tree.IsStaging(d.Name()) {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, tree.File{Path: filepath.ToSlash(rel), Data: b})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", top, err)
		}
	}
	return out, nil
}

func rootOf(root string) string {
	if root == "" {
		return "."
	}
	return root
}
