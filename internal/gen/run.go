package gen

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/cache"
	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/vet"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// Mode is what a run does with the wanted tree.
type Mode int

const (
	// Generate writes the tree: only what changed, all or nothing.
	Generate Mode = iota
	// Check compares the tree on disk with the wanted tree.
	Check
	// Vet evaluates and validates; the disk is not looked at.
	Vet
)

// Options are the inputs of a run.
type Options struct {
	eval.Options
	// NoCache neither reads nor writes the cache of fresh trees.
	NoCache bool
	// Log receives the cache's debug lines (GVISORGEN_CACHE_DEBUG); nil
	// discards them.
	Log io.Writer
}

// Report is what a run found and did.
type Report struct {
	Targets int
	Files   int // the wanted files
	Objects int // the objects validated (Vet)
	// Changes: for Generate the changes made, for Check the differences
	// (Foreign files included: check reports them as stale).
	Changes []tree.Change
	// Foreign are, for Generate, the files it found in folders where it
	// writes but did not write itself (no header): left as they are, and
	// check reports them until they are deleted or moved.
	Foreign  []string
	CacheHit bool
	// Warnings are vet's warnings: values that evaluate but weaken a cluster
	// (warn.Lines prints them).
	Warnings []warn.Warning
	Phases   []Phase
	// Output is the wanted tree (nil on a cache hit).
	Output *Output
}

// Phase is how long one part of a run took.
type Phase struct {
	Name string
	Took time.Duration
}

// Run is one run of generate, check or vet. Errors are of the kinds in
// errors.go; in Check mode inputs that do not evaluate are Unanswered (check
// cannot say whether the tree is fresh) and a stale tree is *Stale with the
// differences in the report.
func Run(opts Options, mode Mode) (*Report, error) {
	rep := &Report{}
	last := time.Now()
	lap := func(name string) {
		now := time.Now()
		rep.Phases = append(rep.Phases, Phase{name, now.Sub(last)})
		last = now
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	var cs *cache.Session
	if mode != Vet {
		// Inputs unchanged since a run that left this very tree: nothing to
		// do, nothing to report.
		cs = cache.Open(opts.Options, opts.NoCache, log)
		if e := cs.Lookup(); e != nil {
			lap("cache hit")
			rep.CacheHit, rep.Targets, rep.Files, rep.Warnings = true, e.Targets, len(e.Files), e.Warnings
			return rep, nil
		}
		lap("cache")
	}
	out, err := Build(opts.Options)
	if err != nil {
		if mode == Check {
			var inv *Invalid
			if errors.As(err, &inv) {
				return rep, &Unanswered{Err: fmt.Errorf("the inputs do not evaluate, so check cannot tell whether the tree is fresh:\n%w", err)}
			}
		}
		return rep, err
	}
	t, r := out.Timings, out.Result
	rep.Phases = append(rep.Phases,
		Phase{"load", t.Load},
		Phase{fmt.Sprintf("evaluate (%d targets: %d parts rendered, %d shared)", len(r.Targets), r.Rendered, r.Shared), t.Evaluate},
		Phase{"vet", t.Vet},
		Phase{fmt.Sprintf("render (%d files)", len(out.Files)), t.Render})
	last = time.Now()
	rep.Output, rep.Targets, rep.Files = out, len(r.Targets), len(out.Files)
	rep.Objects, rep.Warnings = out.Vet.Objects, out.Vet.Warnings
	if mode == Vet {
		return rep, nil
	}
	changes, err := tree.Plan(opts.Root, out.Roots, out.Files)
	if err != nil {
		return rep, err
	}
	if mode == Check {
		lap("compare")
		if len(changes) > 0 {
			rep.Changes = changes
			return rep, &Stale{Changes: changes}
		}
		cs.Store(rep.Targets, out.Roots, out.Files, rep.Warnings)
		return rep, nil
	}
	lap("plan")
	var todo []tree.Change
	for _, c := range changes {
		if c.Action == tree.Foreign {
			rep.Foreign = append(rep.Foreign, c.Path)
		} else {
			todo = append(todo, c)
		}
	}
	if err := tree.Apply(opts.Root, todo); err != nil {
		return rep, err
	}
	rep.Changes = todo
	lap(fmt.Sprintf("write (%d files)", len(todo)))
	if len(rep.Foreign) == 0 {
		// With a foreign file the tree is not what a hit vouches for.
		cs.Store(rep.Targets, out.Roots, out.Files, rep.Warnings)
	}
	lap("cache store")
	return rep, nil
}

// VetManifests validates rendered objects — a file, a folder, or stdin
// ("-") — with the module's schema and vet's rules. A finding is *Rejected.
// With a target in opts.Only (one: the CLI refuses more) the objects are
// that target's rendered output (kustomize build over its overlay, say): they
// must also hold what the target exists for (vet.Essentials of its values,
// with opts' -f and --set); an unknown target is *eval.UnknownTargetError.
func VetManifests(opts eval.Options, path string, stdin io.Reader) (*Report, error) {
	ev, err := eval.Load(opts)
	if err != nil {
		return nil, &Unanswered{Err: err}
	}
	var want []vet.Ref
	if len(opts.Only) > 0 {
		res, err := ev.Evaluate()
		if err != nil {
			return nil, invalid(err)
		}
		want = vet.Essentials(res.Targets[0].Objects)
	}
	r, err := vet.Manifests(ev, path, stdin)
	if err != nil {
		return nil, err
	}
	if len(opts.Only) > 0 && len(r.Syntax) == 0 {
		r.Errors = append(r.Errors, vet.Missing(opts.Only[0], want, r.Found, nil)...)
	}
	rep := &Report{Objects: r.Objects, Warnings: r.Warnings}
	if len(r.Syntax) > 0 {
		return rep, &Invalid{Err: errors.New(strings.Join(append(r.Syntax, r.Errors...), "\n"))}
	}
	if r.Objects == 0 && len(r.Errors) == 0 {
		return rep, &Invalid{Err: fmt.Errorf("%s: no Kubernetes object found (no .yaml, .yml or .json file with a document): nothing was validated; pass a rendered folder such as %s/<target>", path, layout.GeneratedDir)}
	}
	if len(r.Errors) > 0 {
		return rep, &Rejected{Problems: r.Errors, Objects: r.Objects}
	}
	return rep, nil
}
