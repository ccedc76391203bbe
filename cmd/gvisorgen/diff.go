package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gvisorgen/gvisorgen/internal/gen"
	"github.com/gvisorgen/gvisorgen/internal/gitsrc"
	"github.com/gvisorgen/gvisorgen/internal/rdiff"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

func newDiff() *cobra.Command {
	var in inputFlags
	var base, head, format string
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show the rendered difference between two git refs (or a ref and the working tree)",
		Long: `diff evaluates the inputs (cue/, targets/, patches) as they are at --base and at --head (or in
the working tree), in temporary folders, and compares the rendered manifests per target and per
resource. The checkout and the index are never touched. Exit 0: no difference; 1: a difference;
2: an error (an unknown ref, or a side that does not evaluate: the message says which).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "markdown" {
				return &exitErr{code: exitError, err: fmt.Errorf("--format %q: want text or markdown", format)}
			}
			if base == "" {
				mb, err := gitsrc.MergeBase(in.root)
				if err != nil {
					return &exitErr{code: exitError, err: err}
				}
				base = mb
			}
			b, bLabel, err := side(in, base, "base")
			if err != nil {
				return &exitErr{code: exitError, err: err}
			}
			h, hLabel, err := side(in, head, "head")
			if err != nil {
				return &exitErr{code: exitError, err: err}
			}
			entries := rdiff.Compare(b, h)
			if len(in.targets) > 0 {
				entries = slices.DeleteFunc(entries, func(e rdiff.Entry) bool { return !slices.Contains(in.targets, e.Target) })
			}
			w := cmd.OutOrStdout()
			if format == "markdown" {
				fmt.Fprint(w, rdiff.Markdown(entries, bLabel, hLabel, rdiff.MaxComment))
			} else {
				rdiff.Text(w, entries)
			}
			if len(entries) > 0 {
				return &exitErr{code: exitNo}
			}
			return nil
		},
	}
	in.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&base, "base", "", "base git ref (default: the merge base of HEAD with the main branch)")
	fl.StringVar(&head, "head", "", "head git ref (default: the working tree)")
	fl.StringVar(&format, "format", "text", "output format: text or markdown (for a pull-request comment)")
	return cmd
}

// side renders one side of the diff: a git ref exported to a temporary folder,
// or the working tree when ref is empty. --target does not filter evaluation
// here: a target may exist on one side only.
func side(in inputFlags, ref, name string) ([]tree.File, string, error) {
	opts := in.options()
	opts.Only = nil
	label := "working tree"
	if ref != "" {
		commit, err := gitsrc.Resolve(in.root, ref)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
		dir, err := os.MkdirTemp("", "gvisorgen-diff-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(dir)
		if err := gitsrc.Export(in.root, commit, dir); err != nil {
			return nil, "", fmt.Errorf("%s (%s): %w", name, ref, err)
		}
		opts.Root = dir
		label = fmt.Sprintf("%s (%.12s)", ref, commit)
		if ref == commit {
			label = commit[:12]
		}
	}
	out, err := gen.Build(opts)
	if err != nil {
		return nil, "", fmt.Errorf("%s (%s) does not evaluate:\n%w", name, label, err)
	}
	return out.Files, label, nil
}
