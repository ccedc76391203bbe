package eval

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// targetErr marks each error with the target it belongs to.
func targetErr(name string, err error) error {
	var out errors.Error
	for _, e := range errors.Errors(err) {
		out = errors.Append(out, &ofTarget{err: e, target: name})
	}
	return out
}

// ofTarget is an error of one target.
type ofTarget struct {
	err    errors.Error
	target string
}

func (p *ofTarget) Position() token.Pos         { return p.err.Position() }
func (p *ofTarget) InputPositions() []token.Pos { return p.err.InputPositions() }
func (p *ofTarget) Path() []string              { return p.err.Path() }
func (p *ofTarget) Error() string               { return "target " + p.target + ": " + p.err.Error() }
func (p *ofTarget) Msg() (string, []any)        { return p.err.Msg() }

// FormatError renders a CUE error the way every command prints errors.
func (e *Evaluator) FormatError(err error) string { return e.cueError(err).Error() }

// cueError renders every error, never "(and N more errors)": the field path
// as the user writes it, the message in the user's words, and the user's
// positions relative to the working directory.
func (e *Evaluator) cueError(err error) error { return e.report(e.diags(err)) }

// message is one CUE error, folded.
type message struct {
	target, path, msg string
	// root is the schema the path is relative to: "" for the values,
	// else an #Objects type ("v1/Pod").
	root string
	pos  []token.Pos
}

var (
	disjunctionMsg = regexp.MustCompile(`^\d+ errors in empty disjunction:?$`)
	conflictMsg    = regexp.MustCompile(`^conflicting values (.+?) and (.+?)( \(mismatched types .*\))?$`)
)

// fold merges the errors CUE reports for one failed disjunction. When other
// errors explain the failure (e.g. "out of bound"), the conflicts with the
// disjunction's other branches (often just a default) are dropped; when only
// conflicts remain, they become one "V is not one of A, B" message.
func fold(list []errors.Error) []message {
	var out []message
	for i := 0; i < len(list); i++ {
		m := toMessage(list[i])
		if !disjunctionMsg.MatchString(m.msg) {
			out = append(out, m)
			continue
		}
		var group []message
		for i+1 < len(list) {
			n := toMessage(list[i+1])
			if n.path != m.path || n.target != m.target || disjunctionMsg.MatchString(n.msg) {
				break
			}
			group = append(group, n)
			i++
		}
		var others, kinds []message
		counts := map[string]int{}
		var conflicts [][2]string
		for _, g := range group {
			c := conflictMsg.FindStringSubmatch(g.msg)
			if c == nil {
				others = append(others, g)
				continue
			}
			if c[3] != "" && (isTypeName(c[1]) || isTypeName(c[2])) {
				// A value of the wrong kind: the kind says more than
				// the defaults it also fails to be.
				kinds = append(kinds, g)
			}
			conflicts = append(conflicts, [2]string{c[1], c[2]})
			counts[c[1]]++
			counts[c[2]]++
			m.pos = appendPos(m.pos, g.pos...)
		}
		if len(others) > 0 || len(conflicts) == 0 {
			out = append(out, others...)
			continue
		}
		if len(kinds) == 1 {
			kinds[0].pos = appendPos(kinds[0].pos, m.pos...)
			out = append(out, kinds[0])
			continue
		}
		// The value the user wrote is the one every conflict shares.
		var got string
		for v, n := range counts {
			if n == len(conflicts) && (got == "" || v < got) {
				got = v
			}
		}
		var want []string
		for _, c := range conflicts {
			if c[0] != got {
				want = append(want, c[0])
			} else {
				want = append(want, c[1])
			}
		}
		sort.Strings(want)
		if len(conflicts) == 1 {
			got, want = conflicts[0][1], []string{conflicts[0][0]}
		}
		m.msg = fmt.Sprintf("%s is not allowed: want one of %s", got, strings.Join(want, ", "))
		out = append(out, m)
	}
	return out
}

func toMessage(ce errors.Error) message {
	var m message
	if p, ok := ce.(*ofTarget); ok {
		m.target = p.target
	}
	m.path, m.root = userPath(ce.Path())
	f, a := ce.Msg()
	m.msg = fmt.Sprintf(f, a...)
	m.pos = appendPos(nil, errors.Positions(ce)...)
	return m
}

func appendPos(list []token.Pos, ps ...token.Pos) []token.Pos {
	for _, p := range ps {
		dup := false
		for _, q := range list {
			if q.String() == p.String() {
				dup = true
			}
		}
		if !dup {
			list = append(list, p)
		}
	}
	return list
}

// userPath drops the schema's own prefix (#Values, #Target, values,
// #Objects."v1/Kind") from a path, and returns the #Objects type it was
// relative to, if any.
func userPath(p []string) (path, root string) {
	for len(p) > 0 {
		switch p[0] {
		case "#Values", "#Target", "values", "#Render":
			p = p[1:]
			continue
		case "#Objects":
			if len(p) > 1 {
				root = p[1]
				if u, err := strconv.Unquote(root); err == nil {
					root = u
				}
				p = p[2:]
				continue
			}
		}
		break
	}
	return strings.Join(p, "."), root
}
