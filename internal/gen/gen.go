// Package gen is gvisorgen's front door: one run (generate, check, vet, a
// side of diff) evaluates the inputs, renders every selected target, holds
// the final output to vet's rules, and plans, writes or compares the tree.
package gen

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/render"
	"github.com/gvisorgen/gvisorgen/internal/schema"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// Output is the wanted tree for the selected targets.
type Output struct {
	Result *eval.Result
	// Vet is the validation of every object: no errors (the run fails on
	// them), the warnings.
	Vet   vet.Report
	Files []tree.File
	// Roots are the folders generate owns for this run: the selected targets'
	// and, on a full run, those of targets that are no longer declared.
	Roots []string
	// Timings are the phases of the build, for --timings.
	Timings Timings
}

// Timings are how long each phase of a build took.
type Timings struct {
	Load, Evaluate, Vet, Render time.Duration
}

// Build evaluates the inputs and renders every selected target. Nothing is
// written. Errors: *Invalid for inputs that do not evaluate or render,
// *Rejected for output that breaks vet's rules, others for I/O.
func Build(opts eval.Options) (*Output, error) {
	var tm Timings
	start := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d += now.Sub(start)
		start = now
	}
	ev, err := eval.Load(opts)
	if err != nil {
		return nil, invalid(err)
	}
	lap(&tm.Load)
	res, err := ev.Evaluate()
	if err != nil {
		return nil, invalid(err)
	}
	lap(&tm.Evaluate)
	// What Argo CD's project would refuse on the cluster is refused here.
	probs, err := projectProblems(res)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return nil, &Invalid{Err: errors.New(strings.Join(probs, "\n"))}
	}
	// The rules CUE does not express (cross-field checks, policies) hold
	// before anything is written, not only under `vet`.
	facts, err := vet.FactsOf(ev)
	if err != nil {
		return nil, err
	}
	rep := vet.Targets(res.Targets, facts)
	if len(rep.Errors) > 0 {
		return nil, &Rejected{Problems: rep.Errors, Objects: rep.Objects}
	}
	lap(&tm.Vet)
	out := &Output{Result: res, Vet: rep}
	rd := render.NewRenderer()
	var final vet.Report
	patched := map[string]bool{}
	for _, t := range res.Targets {
		r, err := rd.Target(opts.Root, t)
		if err != nil {
			return nil, invalid(err)
		}
		out.Files = append(out.Files, r.Files...)
		out.Roots = append(out.Roots, layout.Roots(t.Name)...)
		if len(r.Patches) > 0 {
			patched[t.Name] = true
			// What syncs is the overlay after the user's patches: the same
			// rules hold for it.
			lap(&tm.Render)
			final.Merge(vet.Rendered(facts, t.Name, r.PatchFiles, renderedOf(t.Name, r.Files), vet.Waivers(t.Values), vet.Essentials(t.Objects)))
			lap(&tm.Vet)
		}
	}
	if len(final.Errors) > 0 {
		return nil, &Rejected{Problems: final.Errors, Objects: final.Objects, Patched: true}
	}
	final.Objects = 0 // the same objects, counted once
	out.Vet.Merge(final)
	out.Vet.Warnings = append(out.Vet.Warnings, vet.WaiverNotes(res.Targets, out.Vet)...)
	// A target with patches of the user's is theirs, not a shipped example:
	// its warnings are never folded.
	for i, w := range out.Vet.Warnings {
		if patched[w.Target] {
			out.Vet.Warnings[i].Example = false
		}
	}
	if len(opts.Only) == 0 {
		// The fleet-wide objects sit directly in delivery/.
		fleet, err := render.Plain(layout.DeliveryDir, res.Fleet)
		if err != nil {
			return nil, invalid(err)
		}
		out.Files = append(out.Files, fleet...)
		out.Roots = append(out.Roots, layout.DeliveryDir)
		// The editors' schema of a values file, from the same module.
		js, err := schema.Values(ev)
		if err != nil {
			return nil, &Invalid{Err: fmt.Errorf("writing %s: %w", layout.ValuesSchema, err)}
		}
		out.Files = append(out.Files, tree.File{Path: layout.ValuesSchema, Data: js.JSON})
		out.Roots = append(out.Roots, layout.SchemasDir)
		stale, err := undeclared(opts.Root, res.All)
		if err != nil {
			return nil, err
		}
		out.Roots = append(out.Roots, stale...)
	}
	sort.Strings(out.Roots)
	lap(&tm.Render)
	out.Timings = tm
	return out, nil
}

// renderedOf picks a target's generated/ files out of its files.
func renderedOf(target string, files []tree.File) []tree.File {
	dir := path.Join(layout.GeneratedDir, target)
	var out []tree.File
	for _, f := range files {
		if path.Dir(f.Path) == dir {
			out = append(out, f)
		}
	}
	return out
}

// invalid marks the input errors of evaluation and rendering.
func invalid(err error) error {
	var ee *eval.Error
	var re *render.Error
	var ne *render.NameError
	if errors.As(err, &ee) || errors.As(err, &re) || errors.As(err, &ne) {
		return &Invalid{Err: err}
	}
	return err
}

// undeclared lists target folders on disk whose target no longer exists, so
// that their generated files are pruned. A link is not followed: Plan
// refuses it as a root.
func undeclared(root string, declared []string) ([]string, error) {
	known := map[string]bool{}
	for _, n := range declared {
		known[n] = true
	}
	var out []string
	for _, top := range layout.Outputs {
		if err := tree.CheckRoots(root, []string{top}); err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(filepath.Join(root, top))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if (e.IsDir() || e.Type()&os.ModeSymlink != 0) && !known[e.Name()] {
				out = append(out, path.Join(top, e.Name()))
			}
		}
	}
	return out, nil
}
