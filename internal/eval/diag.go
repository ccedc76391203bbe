package eval

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// diag is one error as the user reads it: what is wrong at which field, where
// the user wrote it, and the targets it applies to. The same mistake in a -f
// file fails every target; it is printed once, with the list of targets.
type diag struct {
	targets []string
	path    string
	msg     string
	// user are positions in the user's inputs (targets, -f files, --set,
	// their own CUE); schema are positions in the module's schema, printed
	// only where they explain the rule (explain) or nothing else has a line.
	user, schema []token.Pos
	explain      bool
}

// diags turns CUE errors into diags: disjunctions folded, messages
// translated, positions split into the user's and the schema's.
func (e *Evaluator) diags(err error) []diag {
	list := errors.Errors(err)
	if len(list) == 0 {
		list = []errors.Error{errors.Promote(err, "")}
	}
	var out []diag
	for _, m := range fold(list) {
		d := diag{path: m.path}
		if m.target != "" {
			d.targets = []string{m.target}
		}
		d.msg, d.explain = e.translate(e.schemaRoot(m.root), m.path, m.msg)
		if parent, doc, ok := e.hiddenRule(e.schemaRoot(m.root), m.path); ok {
			// A rule over a whole field (a hidden field computed from it, as a
			// size limit): said on the user's field, in the rule's words.
			d.path = parent
			if doc != "" {
				d.msg += " (" + lowerFirst(strings.TrimSuffix(doc, ".")) + ")"
			}
		}
		for _, p := range m.pos {
			if e.isSchema(p) {
				d.schema = append(d.schema, p)
			} else {
				d.user = append(d.user, p)
			}
		}
		out = append(out, d)
	}
	return out
}

// report merges diags that differ only in their target, sorts them by the
// user's file and line, and renders them, each once.
func (e *Evaluator) report(ds []diag) *Error {
	type entry struct {
		diag
		key string
	}
	var list []*entry
	byKey := map[string]*entry{}
	for _, d := range ds {
		var k strings.Builder
		fmt.Fprintf(&k, "%s\x00%s", d.path, d.msg)
		for _, p := range e.shown(d) {
			k.WriteString("\x00" + e.rel(p))
		}
		if x, ok := byKey[k.String()]; ok {
			x.targets = append(x.targets, d.targets...)
			continue
		}
		x := &entry{diag: d, key: k.String()}
		x.targets = append([]string(nil), d.targets...)
		byKey[k.String()] = x
		list = append(list, x)
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		pa, pb := firstPos(a.user), firstPos(b.user)
		switch {
		case pa.IsValid() != pb.IsValid():
			return pa.IsValid()
		case pa.IsValid() && e.rel(pa.Filename()) != e.rel(pb.Filename()):
			return e.rel(pa.Filename()) < e.rel(pb.Filename())
		case pa.IsValid() && pa.Line() != pb.Line():
			return pa.Line() < pb.Line()
		case pa.IsValid() && pa.Column() != pb.Column():
			return pa.Column() < pb.Column()
		}
		return a.path < b.path
	})
	var b strings.Builder
	for _, x := range list {
		b.WriteString(targetsLabel(x.targets))
		if x.path != "" {
			b.WriteString(x.path + ": ")
		}
		b.WriteString(x.msg)
		for _, p := range e.shown(x.diag) {
			b.WriteString("\n    " + e.rel(p))
		}
		b.WriteString("\n")
	}
	return &Error{Msg: strings.TrimRight(b.String(), "\n")}
}

// shown are the positions printed for a diag: the user's, then the schema's
// where they explain the rule or nothing else gives a line.
func (e *Evaluator) shown(d diag) []token.Pos {
	if len(d.user) == 0 || d.explain {
		return append(append([]token.Pos(nil), d.user...), d.schema...)
	}
	return d.user
}

func firstPos(ps []token.Pos) token.Pos {
	if len(ps) == 0 {
		return token.NoPos
	}
	return ps[0]
}

// targetsLabel says which targets an error applies to: all of them by
// name while that stays readable.
func targetsLabel(ts []string) string {
	sort.Strings(ts)
	ts = uniq(ts)
	switch n := len(ts); {
	case n == 0:
		return ""
	case n == 1:
		return "target " + ts[0] + ": "
	case n <= 6:
		return "targets " + strings.Join(ts, ", ") + ": "
	default:
		return fmt.Sprintf("%d targets (%s and %d more): ", n, strings.Join(ts[:4], ", "), n-4)
	}
}

func uniq(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// isSchema reports whether a position is in the module's schema: inside the
// CUE folder, but not in a file that declares targets (the user's own CUE).
func (e *Evaluator) isSchema(p token.Pos) bool {
	if !p.IsValid() || !e.inModule(p) {
		return false
	}
	return !e.userFiles[p.Filename()]
}

func (e *Evaluator) inModule(p token.Pos) bool {
	dir, err := filepath.Abs(filepath.Join(e.opts.Root, e.opts.CUEDir))
	return err == nil && strings.HasPrefix(p.Filename(), dir+string(filepath.Separator))
}

// targetDiags are a failed target's errors: CUE's, and every field of its
// inputs the schema does not take (CUE hides some of those behind other
// errors; the walk's message replaces CUE's where both report one).
func (e *Evaluator) targetDiags(t source, user []cue.Value, err error) []diag {
	var out []diag
	found := map[string]bool{}
	for _, in := range append([]cue.Value{t.val}, user...) {
		for _, d := range e.unknownFields(in) {
			found[d.path] = true
			out = append(out, d)
		}
	}
	for _, d := range e.diags(err) {
		if found[d.path] {
			continue
		}
		if len(d.user) == 0 && d.path != "" {
			// CUE gave no position of the user's (an incomplete value):
			// where the user wrote that field, if they did.
			d.user = inputPositions(append([]cue.Value{t.val}, user...), d.path)
		}
		out = append(out, d)
	}
	for i := range out {
		out[i].targets = []string{t.name}
	}
	return out
}

// schemaRoot is the schema a message's path is relative to: the values, or
// the #Objects type of a manifest (vet --manifests).
func (e *Evaluator) schemaRoot(root string) cue.Value {
	if root == "" {
		return e.schema
	}
	return e.inst.LookupPath(cue.ParsePath("#Objects")).LookupPath(cue.MakePath(cue.Str(root)))
}

// inputPositions are the positions of a field in the user's inputs; when
// none sets it (a required field that is missing), those of the closest
// enclosing field one sets: the part of the input to look at.
func inputPositions(ins []cue.Value, path string) []token.Pos {
	sels, err := userSels(path)
	if err != nil {
		return nil
	}
	for n := len(sels); n > 0; n-- {
		var out []token.Pos
		for _, in := range ins {
			if v := in.LookupPath(cue.MakePath(sels[:n]...)); v.Exists() && v.Pos().IsValid() {
				out = append(out, v.Pos())
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// positions indexes where the inputs set each field (by its CUE path), as
// positions relative to the working directory.
func (e *Evaluator) positions(ins []cue.Value) map[string][]string {
	idx := map[string][]string{}
	var walk func(v cue.Value, sels []cue.Selector)
	walk = func(v cue.Value, sels []cue.Selector) {
		if len(sels) > 0 && v.Pos().IsValid() {
			k := cue.MakePath(sels...).String()
			idx[k] = append(idx[k], e.rel(v.Pos()))
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			walk(it.Value(), append(sels[:len(sels):len(sels)], it.Selector()))
		}
	}
	for _, in := range ins {
		walk(in, nil)
	}
	return idx
}

// hiddenRule: for a path that ends in a hidden field of the schema (a rule
// computed over its parent, e.g. #StorageClassParameters' _bytes), the
// parent's path and the first sentence of the hidden field's doc.
func (e *Evaluator) hiddenRule(root cue.Value, path string) (parent, doc string, ok bool) {
	i := strings.LastIndex(path, "._")
	if i < 0 || strings.ContainsAny(path[i+1:], ".\"[") {
		return "", "", false
	}
	parent, name := path[:i], path[i+1:]
	it, err := schemaAt(root, parent).Fields(cue.Hidden(true))
	if err != nil {
		return parent, "", true
	}
	for it.Next() {
		if it.Selector().String() == name {
			return parent, firstSentence(it.Value()), true
		}
	}
	return parent, "", true
}
