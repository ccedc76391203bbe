package gen

import (
	"fmt"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// The kinds of errors a run returns; the CLI decides exit codes from them
// alone. Anything else is an error that left the command without an answer
// (I/O, a broken module, an unknown ref).

// Invalid is an input error: values, targets or patches that do not
// evaluate or render. Its message lists every error with its position.
type Invalid struct{ Err error }

func (e *Invalid) Error() string { return e.Err.Error() }
func (e *Invalid) Unwrap() error { return e.Err }

// Rejected is rendered output that breaks vet's rules: the Kubernetes types,
// the cross-field rules or a policy.
type Rejected struct {
	Problems []string
	Objects  int
	// Patched is true when the problems are in the output after a target's
	// own patches (the values alone passed).
	Patched bool
}

func (e *Rejected) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy: %d of %d objects failed validation", len(e.Problems), e.Objects)
	if e.Patched {
		b.WriteString(" after the overlays' patches")
	}
	b.WriteString(":")
	for _, p := range e.Problems {
		b.WriteString("\nerror: " + p)
	}
	return b.String()
}

// Stale is check's "no": the tree differs from what generate writes.
type Stale struct{ Changes []tree.Change }

func (e *Stale) Error() string {
	var foreign []string
	for _, c := range e.Changes {
		if c.Action == tree.Foreign {
			foreign = append(foreign, c.Path)
		}
	}
	switch {
	case len(foreign) == len(e.Changes):
		return fmt.Sprintf("the tree is stale (%d files): gvisorgen did not write %s, and never deletes a file it did not write: delete or move it and commit the result", len(e.Changes), strings.Join(foreign, ", "))
	case len(foreign) > 0:
		return fmt.Sprintf("the tree is stale (%d files): run `make generate`, delete or move what gvisorgen did not write (%s; it never deletes such a file), and commit the result", len(e.Changes), strings.Join(foreign, ", "))
	}
	return fmt.Sprintf("the tree is stale (%d files): run `make generate` and commit the result", len(e.Changes))
}

// Unanswered wraps an error that leaves the command without an answer even
// though its cause is an input: check over inputs that do not evaluate, a
// side of diff that does not.
type Unanswered struct{ Err error }

func (e *Unanswered) Error() string { return e.Err.Error() }
func (e *Unanswered) Unwrap() error { return e.Err }
