package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gvisorgen/gvisorgen/internal/gen"
	"github.com/gvisorgen/gvisorgen/internal/rdiff"
)

func newDiff() *cobra.Command {
	var in inputFlags
	var base, head, format string
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show what changes for the clusters between two git refs (or a ref and the working tree)",
		Long: `diff compares what two refs commit in every folder generate writes — the rendered manifests
(generated/), the delivery objects (delivery/), the smoke test (smoke/), and an overlay's own
files when they change without a rendered change — per target and per file. Argo CD and Flux
sync the committed files, so each side is also evaluated (cue/, targets/, patches) in a
temporary folder and checked against its commit: a stale or hand-edited side is named first,
with its files. The checkout and the index are never touched.

Exit 0: no difference and both sides fresh; 1: a difference, or a stale side; 2: an error (an
unknown ref, or a side that cannot be read or does not evaluate: the message says which).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "markdown" {
				return &usageError{fmt.Errorf("--format %q: want text or markdown", format)}
			}
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			d, err := gen.Diff(gen.DiffOptions{Options: opts, Base: base, Head: head})
			var differs *gen.Differs
			if err != nil && !errors.As(err, &differs) {
				return err
			}
			w := cmd.OutOrStdout()
			if format == "markdown" {
				fmt.Fprint(w, rdiff.Markdown(d, rdiff.MaxComment))
			} else {
				rdiff.Text(w, d)
			}
			if err != nil {
				return &quiet{err}
			}
			return nil
		},
	}
	in.register(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&base, "base", "", "base git ref (default: the merge base of HEAD with the main branch)")
	fl.StringVar(&head, "head", "", "head git ref (default: the working tree)")
	fl.StringVar(&format, "format", "text", "output format: text or markdown (for a pull-request comment)")
	return cmd
}
