// Command gvisorgen generates committed kustomize overlays and rendered
// manifests that install gVisor on Kubernetes nodes.
package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"
)

// Exit codes, for every command: 0 yes, 1 the command's "no", 2 no answer.
const (
	exitOK    = 0
	exitNo    = 1
	exitError = 2
)

func main() { mainExit() }

// run executes the CLI, prints any error once and decides the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := newRoot(stdin, stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var q *quiet
	if !errors.As(err, &q) {
		fmt.Fprintf(stderr, "gvisorgen: %v\n", err)
	}
	return exitCode(err)
}

// exitCode is the one place that maps errors to exit codes, by kind.
func exitCode(err error) int {
	var (
		unanswered *gen.Unanswered
		invalid    *gen.Invalid
		rejected   *gen.Rejected
		stale      *gen.Stale
		differs    *gen.Differs
		mismatch   *gen.PinMismatch
		unknown    *eval.UnknownTargetError
		usage      *usageError
		q          *quiet
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &unanswered), errors.As(err, &usage), errors.As(err, &unknown):
		// No answer: a command line that cannot be run (a bad flag, a
		// --target that names no target, for every command that takes it)
		// or an input that left the command without one.
		return exitError
	case errors.As(err, &invalid), errors.As(err, &rejected), errors.As(err, &stale), errors.As(err, &differs), errors.As(err, &mismatch):
		return exitNo
	case errors.As(err, &q):
		return exitCode(q.err)
	}
	return exitError
}

// quiet is an error the command has already reported in full (diff's
// difference is its output); only the exit code is left to decide.
type quiet struct{ err error }

func (e *quiet) Error() string { return e.err.Error() }

// usageError is a command line that cannot be run.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
