package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gvisorgen/gvisorgen/internal/gen"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// inputFlags are accepted the same way by every command that evaluates.
type inputFlags struct {
	root    string
	values  []string
	sets    []string
	targets []string
	noCache bool
	timings bool
	verbose bool
}

func (f *inputFlags) register(cmd *cobra.Command, cached bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.root, "root", ".", "repository root (holds cue/, targets/, overlays/, generated/)")
	fl.StringArrayVarP(&f.values, "values", "f", nil, "values file (.cue, .yaml, .yml, .json; - reads YAML from stdin) unified into every target; repeatable")
	fl.StringArrayVar(&f.sets, "set", nil, "set one value, path=value (e.g. gvisor.version=20250101); repeatable")
	fl.StringArrayVar(&f.targets, "target", nil, "only this target; repeatable (default: all)")
	if cached {
		fl.BoolVar(&f.noCache, "no-cache", false, "always evaluate: neither read nor write the cache of fresh trees (also GVISORGEN_CACHE=off)")
		fl.BoolVar(&f.timings, "timings", false, "print how long each phase took to stderr")
	}
}

// registerVerbose adds -v to a command that prints vet's warnings.
func (f *inputFlags) registerVerbose(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "print every warning in full (by default, warnings about the unchanged example targets are folded into one line per cause)")
}

// options reads stdin when a values file is "-".
func (f *inputFlags) options(cmd *cobra.Command) (gen.Options, error) {
	o := gen.Options{NoCache: f.noCache, Log: cmd.ErrOrStderr()}
	// A flag given twice counts once (its value unifies with itself anyway,
	// but errors and stdin would be read twice); order is kept.
	o.Root, o.ValuesFiles, o.Sets = f.root, firstOf(f.values, filepath.Clean), firstOf(f.sets, nil)
	o.Only = slices.Compact(slices.Sorted(slices.Values(f.targets)))
	if slices.Contains(f.values, "-") {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return o, fmt.Errorf("reading values from stdin: %w", err)
		}
		o.Stdin, o.NoCache = b, true
	}
	return o, nil
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "gvisorgen",
		Short:         "Generate GitOps-ready manifests that install gVisor on Kubernetes nodes",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newGenerate(), newCheck(), newVet(), newDiff(), newPin(), newPush(), newVersion())
	return root
}

// printRun prints what every run prints: vet's warnings, once each, grouped
// by cause (warn.Lines: those about the unchanged example targets folded,
// unless -v), and the phases with --timings.
func printRun(cmd *cobra.Command, in *inputFlags, rep *gen.Report) {
	if rep == nil {
		return
	}
	w := cmd.ErrOrStderr()
	for _, line := range warn.Lines(rep.Warnings, in.verbose) {
		fmt.Fprintf(w, "warning: %s\n", line)
	}
	if in.timings {
		var parts []string
		var total float64
		for _, p := range rep.Phases {
			parts = append(parts, fmt.Sprintf("%s %.3fs", p.Name, p.Took.Seconds()))
			total += p.Took.Seconds()
		}
		fmt.Fprintf(w, "timings: %s; total %.3fs\n", strings.Join(parts, ", "), total)
	}
}

func newGenerate() *cobra.Command {
	var in inputFlags
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write overlays/ and generated/ for every target (only what changed, all or nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			rep, err := gen.Run(opts, gen.Generate)
			printRun(cmd, &in, rep)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, c := range rep.Changes {
				fmt.Fprintf(w, "%-6s %s\n", verb(c.Action), c.Path)
			}
			// Never deleted, never trusted: said on every run until it goes.
			for _, p := range rep.Foreign {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: not written by gvisorgen (no %q header), in a folder it writes: left as it is (gvisorgen never deletes a file it did not write); check reports it as stale until you delete or move it\n",
					p, strings.TrimSpace(tree.Header))
			}
			fmt.Fprintf(w, "%d targets, %d files, %d changed\n", rep.Targets, rep.Files, len(rep.Changes))
			return nil
		},
	}
	in.register(cmd, true)
	in.registerVerbose(cmd)
	return cmd
}

func verb(a tree.Action) string {
	return map[tree.Action]string{tree.Create: "wrote", tree.Update: "wrote", tree.Delete: "pruned"}[a]
}

func newCheck() *cobra.Command {
	var in inputFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Exit 1 when overlays/, generated/, delivery/ or smoke/ differ from what generate would write",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			rep, err := gen.Run(opts, gen.Check)
			printRun(cmd, &in, rep)
			w := cmd.OutOrStdout()
			if err == nil {
				fmt.Fprintf(w, "fresh: %d targets, %d files\n", rep.Targets, rep.Files)
				return nil
			}
			if len(rep.Changes) > 0 {
				fmt.Fprintf(w, "stale: %d files differ from what `gvisorgen generate` writes:\n", len(rep.Changes))
				for _, c := range rep.Changes {
					fmt.Fprintf(w, "  %-7s %s\n", label(c.Action), c.Path)
				}
				fmt.Fprintln(w)
				for _, c := range rep.Changes {
					if c.Action == tree.Foreign {
						fmt.Fprintf(w, "foreign %s: not written by gvisorgen (no generated header): generate leaves it; delete or move it\n", c.Path)
						continue
					}
					fmt.Fprint(w, c.UnifiedDiff())
				}
			}
			return err
		},
	}
	in.register(cmd, true)
	in.registerVerbose(cmd)
	return cmd
}

func label(a tree.Action) string {
	return map[tree.Action]string{tree.Create: "missing", tree.Update: "stale", tree.Delete: "extra", tree.Foreign: "foreign"}[a]
}

func newVet() *cobra.Command {
	var in inputFlags
	var manifests string
	cmd := &cobra.Command{
		Use:   "vet",
		Short: "Evaluate and validate every target without writing, or validate rendered manifests",
		Long: `vet evaluates every target and validates its objects: the CUE constraints, then a strict
decoding into the Kubernetes Go types (unknown fields rejected), the cross-field rules and
gvisorgen's policies — on the objects gvisorgen emits and on the output of each overlay after
its patches (what Argo CD and Flux sync) — plus warnings.

With --manifests PATH (a file, a folder, or - for stdin) it validates rendered objects instead,
e.g. the output of kustomize build over an overlay with your own patches. With --target T (one;
-f and --set then apply to T's values) the objects must also hold what T exists for: the
installer DaemonSet in its namespace, the RuntimeClass, the StorageClass T creates and the
readiness gate's admission policy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			var rep *gen.Report
			if manifests != "" {
				// Flags that would change nothing are refused, not ignored.
				switch {
				case len(opts.Only) > 1:
					return &usageError{fmt.Errorf("--manifests takes one --target, the target whose rendered output the manifests are; got %d", len(opts.Only))}
				case len(opts.Only) == 0 && (len(opts.ValuesFiles) > 0 || len(opts.Sets) > 0):
					return &usageError{errors.New("-f and --set with --manifests need --target: they change a target's values, and without a target the manifests are validated on their own")}
				}
				rep, err = gen.VetManifests(opts.Options, manifests, cmd.InOrStdin())
			} else {
				rep, err = gen.Run(opts, gen.Vet)
			}
			printRun(cmd, &in, rep)
			if err != nil {
				return err
			}
			if manifests != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "valid: %d objects\n", rep.Objects)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "valid: %d targets, %d objects\n", rep.Targets, rep.Objects)
			}
			return nil
		},
	}
	in.register(cmd, false)
	in.registerVerbose(cmd)
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

func newPin() *cobra.Command {
	var in inputFlags
	var caFile string
	var check bool
	cmd := &cobra.Command{
		Use:   "pin",
		Short: "Pin the gVisor release digests and the installer image digest the targets use (cue/pins.cue)",
		Long: `pin resolves, for every distinct gVisor version, architecture and artifact the selected targets
install, the sha512 published beside the artifact (<baseURL>/<version>/<arch>/<artifact>.sha512),
and for every installer image tag the digest its registry serves (the multi-arch index; not for a
target that sets its own gvisor.installer.image.digest, one cue/pins.cue does not hold), over TLS
verified against the system roots (plus --ca-file, for a mirror with a private CA). It writes them
to cue/pins.cue, a committed CUE file the schema takes its defaults from: a version bump then shows
in the pull request as the version line plus its digests. A pin that differs from what the source
publishes is reported, never overwritten.

The flow: bump gvisor.version, run gvisorgen pin, then gvisorgen generate, and commit all three.
A scheduled job runs gvisorgen pin --check.

Exit 0: written, or nothing to change (with --check: every pin present and equal to the source);
1: the source answered but something is wrong (a missing artifact, a malformed .sha512, a digest
that differs from a pin, mirrors that disagree; with --check also a missing pin); 2: the source
could not be asked (unreachable, certificate rejected) or the inputs do not evaluate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			rep, err := gen.Pin(gen.PinOptions{Options: opts, CAFile: caFile, Check: check})
			w := cmd.OutOrStdout()
			if rep != nil {
				for _, r := range rep.Resolved {
					fmt.Fprintf(w, "resolved %s\n", r)
				}
				for _, o := range rep.Own {
					fmt.Fprintf(w, "not asked %s\n", o)
				}
			}
			if err != nil {
				return err
			}
			switch {
			case check:
				fmt.Fprintf(w, "pinned: %d digests, all equal to their source\n", len(rep.Resolved))
			case rep.Written:
				fmt.Fprintf(w, "wrote cue/pins.cue: %d new pins (%s); run gvisorgen generate\n", len(rep.Added), strings.Join(rep.Added, ", "))
			default:
				fmt.Fprintf(w, "nothing to change: %d digests pinned\n", len(rep.Resolved))
			}
			return nil
		},
	}
	in.register(cmd, false)
	cmd.Flags().StringVar(&caFile, "ca-file", "", "PEM certificates trusted besides the system roots (a mirror with a private CA)")
	cmd.Flags().BoolVar(&check, "check", false, "compare cue/pins.cue with the source; write nothing (exit 1 when a pin is missing or differs)")
	return cmd
}

// firstOf keeps the first of equal values (by key, when key is not nil).
func firstOf(vs []string, key func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		k := v
		if key != nil && v != "-" {
			k = key(v)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}
