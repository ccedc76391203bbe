package tree

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// UnifiedDiff renders the change as a unified diff with three lines of context.
func (c Change) UnifiedDiff() string {
	from, to := "a/"+c.Path, "b/"+c.Path
	switch c.Action {
	case Create:
		from = "/dev/null"
	case Delete:
		to = "/dev/null"
	}
	d := difflib.UnifiedDiff{
		A:        difflib.SplitLines(string(c.Old)),
		B:        difflib.SplitLines(string(c.New)),
		FromFile: from,
		ToFile:   to,
		Context:  3,
	}
	s, err := difflib.GetUnifiedDiffString(d)
	if err != nil {
		return fmt.Sprintf("(no diff: %v)\n", err)
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
