package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gvisorgen/gvisorgen/internal/cache"
	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// inputFlags are accepted the same way by every command that evaluates.
type inputFlags struct {
	root    string
	values  []string
	sets    []string
	targets []string
}

func (f *inputFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.root, "root", ".", "repository root (holds cue/, targets/, overlays/, generated/)")
	fl.StringArrayVarP(&f.values, "values", "f", nil, "values file (.cue, .yaml, .yml, .json) unified into every target; repeatable")
	fl.StringArrayVar(&f.sets, "set", nil, "set one value, path=value (e.g. gvisor.version=20250101); repeatable")
	fl.StringArrayVar(&f.targets, "target", nil, "only this target; repeatable (default: all)")
}

func (f *inputFlags) options() eval.Options {
	return eval.Options{Root: f.root, ValuesFiles: f.values, Sets: f.sets, Only: f.targets}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "gvisorgen",
		Short:         "Generate GitOps-ready manifests that install gVisor on Kubernetes nodes",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitErr{code: exitError, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newGenerate(), newCheck(), newVet(), newDiff(), newVersion())
	return root
}

func newGenerate() *cobra.Command {
	var in inputFlags
	var noCache, timings bool
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write overlays/ and generated/ for every target (only what changed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			tm := newPhases(timings, cmd.ErrOrStderr())
			defer tm.print()
			// Inputs unchanged since a run that left this very tree: nothing to do.
			cs := cache.Open(in.options(), noCache, cmd.ErrOrStderr())
			if e := cs.Lookup(); e != nil {
				tm.lap("cache hit")
				fmt.Fprintf(w, "%d targets, %d files, %d changed\n", e.Targets, len(e.Files), 0)
				return nil
			}
			tm.lap("cache")
			out, err := gen.Build(in.options())
			if err != nil {
				return inputErr(err, exitNo)
			}
			tm.build(out)
			changes, err := out.Plan(in.root)
			if err != nil {
				return &exitErr{code: exitError, err: err}
			}
			tm.lap("plan")
			if err := tree.Apply(in.root, changes); err != nil {
				return &exitErr{code: exitError, err: err}
			}
			tm.lap(fmt.Sprintf("write (%d files)", len(changes)))
			cs.Store(len(out.Result.Targets), out.Roots, out.Files)
			tm.lap("cache store")
			for _, c := range changes {
				fmt.Fprintf(w, "%-6s %s\n", verb(c.Action), c.Path)
			}
			fmt.Fprintf(w, "%d targets, %d files, %d changed\n", len(out.Result.Targets), len(out.Files), len(changes))
			return nil
		},
	}
	in.register(cmd)
	registerNoCache(cmd, &noCache)
	registerTimings(cmd, &timings)
	return cmd
}

func registerNoCache(cmd *cobra.Command, off *bool) {
	cmd.Flags().BoolVar(off, "no-cache", false, "always evaluate: neither read nor write the cache of fresh trees (also GVISORGEN_CACHE=off)")
}

func registerTimings(cmd *cobra.Command, on *bool) {
	cmd.Flags().BoolVar(on, "timings", false, "print how long each phase took to stderr")
}

// phases times a command's phases for --timings.
type phases struct {
	on    bool
	w     io.Writer
	start time.Time
	last  time.Time
	parts []string
}

func newPhases(on bool, w io.Writer) *phases {
	now := time.Now()
	return &phases{on: on, w: w, start: now, last: now}
}

func (p *phases) lap(name string) {
	now := time.Now()
	p.add(name, now.Sub(p.last))
	p.last = now
}

func (p *phases) add(name string, d time.Duration) {
	p.parts = append(p.parts, fmt.Sprintf("%s %.3fs", name, d.Seconds()))
}

// build records gen.Build's own phases.
func (p *phases) build(out *gen.Output) {
	t, r := out.Timings, out.Result
	p.add("load", t.Load)
	p.add(fmt.Sprintf("evaluate (%d targets: %d parts rendered, %d shared)", len(r.Targets), r.Rendered, r.Shared), t.Evaluate)
	p.add("vet", t.Vet)
	p.add(fmt.Sprintf("render (%d files)", len(out.Files)), t.Render)
	p.last = time.Now()
}

func (p *phases) print() {
	if !p.on {
		return
	}
	fmt.Fprintf(p.w, "timings: %s; total %.3fs\n", strings.Join(p.parts, ", "), time.Since(p.start).Seconds())
}

func verb(a tree.Action) string {
	return map[tree.Action]string{tree.Create: "wrote", tree.Update: "wrote", tree.Delete: "pruned"}[a]
}

func newCheck() *cobra.Command {
	var in inputFlags
	var noCache, timings bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Exit 1 when overlays/ or generated/ differ from what generate would write",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tm := newPhases(timings, cmd.ErrOrStderr())
			defer tm.print()
			// Inputs unchanged since a run that left this very tree: fresh.
			cs := cache.Open(in.options(), noCache, cmd.ErrOrStderr())
			if e := cs.Lookup(); e != nil {
				tm.lap("cache hit")
				fmt.Fprintf(cmd.OutOrStdout(), "fresh: %d targets, %d files\n", e.Targets, len(e.Files))
				return nil
			}
			tm.lap("cache")
			out, err := gen.Build(in.options())
			if err != nil {
				// check cannot answer when the inputs do not evaluate.
				return &exitErr{code: exitError, err: err}
			}
			tm.build(out)
			changes, err := out.Plan(in.root)
			if err != nil {
				return &exitErr{code: exitError, err: err}
			}
			tm.lap("compare")
			if len(changes) == 0 {
				cs.Store(len(out.Result.Targets), out.Roots, out.Files)
				fmt.Fprintf(cmd.OutOrStdout(), "fresh: %d targets, %d files\n", len(out.Result.Targets), len(out.Files))
				return nil
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "stale: %d files differ from what `gvisorgen generate` writes:\n", len(changes))
			for _, c := range changes {
				fmt.Fprintf(w, "  %-7s %s\n", label(c.Action), c.Path)
			}
			fmt.Fprintln(w)
			for _, c := range changes {
				fmt.Fprint(w, tree.UnifiedDiff(c))
			}
			return &exitErr{code: exitNo, err: fmt.Errorf("the tree is stale: run `make generate` and commit the result")}
		},
	}
	in.register(cmd)
	registerNoCache(cmd, &noCache)
	registerTimings(cmd, &timings)
	return cmd
}

func label(a tree.Action) string {
	return map[tree.Action]string{tree.Create: "missing", tree.Update: "stale", tree.Delete: "extra"}[a]
}

func newVet() *cobra.Command {
	var in inputFlags
	var manifests string
	cmd := &cobra.Command{
		Use:   "vet",
		Short: "Evaluate and validate every target without writing, or validate rendered manifests",
		Long: `vet evaluates every target and validates its objects: the CUE constraints, then a strict
decoding into the Kubernetes Go types (unknown fields rejected), plus warnings.

With --manifests PATH (a file, a folder, or - for stdin) it validates rendered objects instead,
e.g. the output of kustomize build over an overlay with your own patches.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep vet.Report
			var targets int
			if manifests != "" {
				ev, err := eval.Load(in.options())
				if err != nil {
					return &exitErr{code: exitError, err: err}
				}
				if rep, err = vet.Manifests(ev, manifests, cmd.InOrStdin()); err != nil {
					return &exitErr{code: exitError, err: err}
				}
			} else {
				out, err := gen.Build(in.options())
				if err != nil {
					return inputErr(err, exitNo)
				}
				rep = out.Vet
				targets = len(out.Result.Targets)
			}
			for _, warn := range rep.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", warn)
			}
			if len(rep.Errors) > 0 {
				for _, e := range rep.Errors {
					fmt.Fprintf(cmd.ErrOrStderr(), "error: %s\n", e)
				}
				return &exitErr{code: exitNo, err: fmt.Errorf("%d of %d objects failed validation", len(rep.Errors), rep.Objects)}
			}
			if manifests != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "valid: %d objects\n", rep.Objects)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "valid: %d targets, %d objects\n", targets, rep.Objects)
			}
			return nil
		},
	}
	in.register(cmd)
	cmd.Flags().StringVar(&manifests, "manifests", "", "validate rendered objects from a file, a folder, or - (stdin)")
	return cmd
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			fmt.Fprintf(cmd.OutOrStdout(), "gvisorgen %s\n", v)
		},
	}
}
