// Command gvisorgen generates committed kustomize overlays and rendered
// manifests that install gVisor on Kubernetes nodes.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// Exit codes, for every command: 0 yes, 1 the command's "no", 2 no answer.
const (
	exitOK    = 0
	exitNo    = 1
	exitError = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the CLI and prints any error once.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRoot(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitErr
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "gvisorgen: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "gvisorgen: %v\n", err)
	return exitError
}

// exitErr carries an exit code; a nil err prints nothing (the command already
// reported, e.g. check's list of stale files).
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// inputErr maps an evaluation error to the command's "no" (1) and anything
// else (I/O, a broken module) to 2.
func inputErr(err error, invalid int) error {
	var ev *eval.Error
	if errors.As(err, &ev) {
		return &exitErr{code: invalid, err: err}
	}
	return &exitErr{code: exitError, err: err}
}
