// Package gen ties evaluation, rendering and the tree together: it computes the
// files the repository should hold and what differs on disk.
package gen

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/render"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// Output is the wanted tree for the selected targets.
type Output struct {
	Result *eval.Result
	// Vet is the validation of every object: no errors (Build fails on
	// them), the warnings.
	Vet   vet.Report
	Files []tree.File
	// Roots are the folders generate owns for this run: the selected targets'
	// and, on a full run, those of targets that are no longer declared.
	Roots []string
	// Timings are the phases of Build, for --timings.
	Timings Timings
}

// Timings are how long each phase of a run took.
type Timings struct {
	Load, Evaluate, Vet, Render time.Duration
}

// Build evaluates the inputs and renders every selected target. Nothing is
// written.
func Build(opts eval.Options) (*Output, error) {
	var tm Timings
	start := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d = now.Sub(start)
		start = now
	}
	ev, err := eval.Load(opts)
	if err != nil {
		return nil, err
	}
	lap(&tm.Load)
	res, err := ev.Evaluate()
	if err != nil {
		return nil, err
	}
	lap(&tm.Evaluate)
	// The rules CUE does not express (cross-field checks, policies) hold
	// before anything is written, not only under `vet`.
	rep := vet.Targets(res.Targets)
	if len(rep.Errors) > 0 {
		return nil, &eval.Error{Msg: "objects fail validation:\n" + strings.Join(rep.Errors, "\n")}
	}
	lap(&tm.Vet)
	out := &Output{Result: res, Vet: rep}
	out.Timings = tm
	rd := render.NewRenderer()
	for _, t := range res.Targets {
		files, err := rd.Target(opts.Root, t)
		if err != nil {
			return nil, err
		}
		out.Files = append(out.Files, files...)
		out.Roots = append(out.Roots, layout.Roots(t.Name)...)
	}
	if len(opts.Only) == 0 {
		// The fleet-wide objects sit directly in delivery/.
		fleet, err := render.Plain(layout.DeliveryDir, res.Fleet)
		if err != nil {
			return nil, err
		}
		out.Files = append(out.Files, fleet...)
		out.Roots = append(out.Roots, layout.DeliveryDir)
		stale, err := undeclared(opts.Root, res.All)
		if err != nil {
			return nil, err
		}
		out.Roots = append(out.Roots, stale...)
	}
	sort.Strings(out.Roots)
	lap(&out.Timings.Render)
	return out, nil
}

// undeclared lists target folders on disk whose target no longer exists, so
// that their generated files are pruned.
func undeclared(root string, declared []string) ([]string, error) {
	known := map[string]bool{}
	for _, n := range declared {
		known[n] = true
	}
	var out []string
	for _, top := range layout.Outputs {
		entries, err := os.ReadDir(filepath.Join(root, top))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && !known[e.Name()] {
				out = append(out, path.Join(top, e.Name()))
			}
		}
	}
	return out, nil
}

// Plan compares the output with the disk.
func (o *Output) Plan(root string) ([]tree.Change, error) {
	return tree.Plan(root, o.Roots, o.Files)
}
