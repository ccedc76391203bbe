package eval

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
	"github.com/agnivade/levenshtein"
)

// unknownFields reports every field of a user's input that the values schema
// does not take. CUE reports a closed struct's unknown field only while
// nothing else in that struct fails; this walk reports all of them at once.
func (e *Evaluator) unknownFields(in cue.Value) []diag {
	var out []diag
	var walk func(schema, in cue.Value, path []string, depth int)
	walk = func(schema, in cue.Value, path []string, depth int) {
		if depth > 32 {
			return
		}
		switch in.IncompleteKind() {
		case cue.StructKind:
			if schema.IncompleteKind()&cue.StructKind == 0 {
				return
			}
			it, err := in.Fields(cue.Optional(true))
			if err != nil {
				return
			}
			for it.Next() {
				sel := it.Selector()
				if sel.IsDefinition() || sel.PkgPath() != "" {
					continue
				}
				sub := append(path[:len(path):len(path)], labelOf(sel))
				if !schema.Allows(sel) {
					p := strings.Join(sub, ".")
					out = append(out, diag{path: p, msg: e.unknownAt(e.schema, p), user: []token.Pos{it.Value().Pos()}})
					continue
				}
				next := schema.LookupPath(cue.MakePath(sel))
				if !next.Exists() {
					next = schema.LookupPath(cue.MakePath(cue.AnyString))
				}
				if next.Exists() {
					walk(next, it.Value(), sub, depth+1)
				}
			}
		case cue.ListKind:
			elem := schema.LookupPath(cue.MakePath(cue.AnyIndex))
			it, err := in.List()
			if !elem.Exists() || err != nil {
				return
			}
			for i := 0; it.Next(); i++ {
				walk(elem, it.Value(), append(path[:len(path):len(path)], fmt.Sprint(i)), depth+1)
			}
		}
	}
	walk(e.schema, in, nil, 0)
	return out
}

// labelOf is a selector as a user path writes it: quoted when it is not an
// identifier (a label key with a dot or a slash).
func labelOf(sel cue.Selector) string {
	s := sel.Unquoted()
	if ident.MatchString(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

var ident = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// unknownAt says what is wrong with a field the schema does not take at a
// user path, and what the user may have meant: a key that breaks the rule of
// a map's keys, a near spelling, the same key elsewhere, or the keys taken.
func (e *Evaluator) unknownAt(root cue.Value, path string) string {
	sels, err := userSels(path)
	if err != nil || len(sels) == 0 || sels[len(sels)-1].Type() != cue.StringLabel {
		return notAllowed
	}
	var parts []string
	for _, s := range sels {
		if s.Type() == cue.IndexLabel {
			parts = append(parts, fmt.Sprint(s.Index()))
		} else {
			parts = append(parts, s.Unquoted())
		}
	}
	key := parts[len(parts)-1]
	parentPath := strings.Join(parts[:len(parts)-1], ".")
	parent := schemaAtSels(root, sels[:len(sels)-1])
	if rule := e.keyRule(parent); rule != "" {
		return fmt.Sprintf("invalid key %q: want %s", key, rule)
	}
	allowed := fieldNames(parent)
	best, bestD := "", 0
	for _, a := range allowed {
		d := levenshtein.ComputeDistance(strings.ToLower(key), strings.ToLower(a))
		if d <= max(1, len(key)/3) && (best == "" || d < bestD) {
			best, bestD = a, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q: did you mean %q?", key, best)
	}
	if elsewhere := fieldPaths(root, key, parts[0]); len(elsewhere) > 0 {
		return fmt.Sprintf("unknown field %q here: the key is %s", key, strings.Join(elsewhere, " or "))
	}
	where := parentPath
	if where == "" {
		where = "the top level"
	}
	if len(allowed) == 0 {
		return fmt.Sprintf("unknown field %q: %s takes no fields", key, where)
	}
	return fmt.Sprintf("unknown field %q: %s takes %s", key, where, strings.Join(allowed, ", "))
}

// fieldNames are the regular fields of a schema struct, sorted.
func fieldNames(v cue.Value) []string {
	var out []string
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	for it.Next() {
		if s := it.Selector(); !s.IsDefinition() && s.PkgPath() == "" {
			out = append(out, s.Unquoted())
		}
	}
	sort.Strings(out)
	return out
}

// fieldPaths are the schema paths whose last key is key, those under the
// same top-level key first (gvisor.namespace → gvisor.installer.namespace).
func fieldPaths(root cue.Value, key, top string) []string {
	var same, other []string
	var walk func(v cue.Value, path string, depth int)
	walk = func(v cue.Value, path string, depth int) {
		if depth > 6 {
			return
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			s := it.Selector()
			if s.IsDefinition() || s.PkgPath() != "" {
				continue
			}
			p := s.Unquoted()
			if path != "" {
				p = path + "." + p
			}
			if s.Unquoted() == key && depth > 0 {
				if strings.HasPrefix(p, top+".") {
					same = append(same, p)
				} else {
					other = append(other, p)
				}
			}
			if it.Value().IncompleteKind()&cue.StructKind != 0 {
				walk(it.Value(), p, depth+1)
			}
		}
	}
	walk(root, "", 0)
	if len(same) > 0 {
		return same
	}
	if len(other) > 3 {
		other = other[:3]
	}
	return other
}

// keyPattern finds the key constraint of a map in CUE source: [#Name]: or
// [=~"regex"]:.
var (
	keyPattern = regexp.MustCompile(`^\[\s*(_?#[A-Za-z_][A-Za-z0-9_]*|=~"(?:[^"\\]|\\.)*")\s*\]\s*:`)
	refOnly    = regexp.MustCompile(`^[A-Za-z_$"][^:]*:\s*(_?#[A-Za-z_][A-Za-z0-9_]*)\s*$`)
)

// keyRule is what the keys of a map in the schema must be, from the
// constraint's own doc (or its values); "" when the struct is not a map.
func (e *Evaluator) keyRule(v cue.Value) string {
	return e.keyRuleDepth(v, 0)
}

func (e *Evaluator) keyRuleDepth(v cue.Value, depth int) string {
	if depth > 3 {
		return ""
	}
	if v.Source() == nil {
		// A conjunction (a map and its defaults): its parts have sources.
		if op, args := v.Expr(); op == cue.AndOp {
			for _, a := range args {
				if r := e.keyRuleDepth(a, depth+1); r != "" {
					return r
				}
			}
		}
		return ""
	}
	b, err := format.Node(v.Source())
	if err != nil {
		return ""
	}
	src := stripComments(string(b))
	if m := keyPattern.FindStringSubmatch(ownKeyLine(src)); m != nil {
		if strings.HasPrefix(m[1], "=~") {
			if want := e.describer().pattern(m[1][2:]); want != "" {
				return want
			}
			return "a key matching " + m[1][2:]
		}
		return e.defRule(m[1])
	}
	if m := refOnly.FindStringSubmatch(strings.TrimSpace(src)); m != nil {
		return e.keyRuleDepth(e.def(m[1]), depth+1)
	}
	return ""
}

// ownKeyLine is the line of a field's source that holds its own key
// constraint, if any: right after the label, or at the first level of its
// braces (deeper ones belong to its fields).
func ownKeyLine(src string) string {
	_, val, ok := strings.Cut(src, ":")
	if !ok {
		return ""
	}
	val = strings.TrimPrefix(strings.TrimSpace(val), "close(")
	if strings.HasPrefix(val, "{[") {
		val = val[1:]
	}
	if strings.HasPrefix(val, "[") {
		return val
	}
	depth := 0
	for _, l := range strings.Split(val, "\n") {
		t := strings.TrimSpace(l)
		if depth == 1 && strings.HasPrefix(t, "[") {
			return t
		}
		depth += strings.Count(l, "{") - strings.Count(l, "}")
	}
	return ""
}

// defRule describes a definition: its doc, or the strings it allows.
func (e *Evaluator) defRule(name string) string {
	d := e.def(name)
	if s := firstSentence(d); s != "" {
		return lowerFirst(strings.TrimSuffix(s, "."))
	}
	if op, args := d.Expr(); op == cue.OrOp {
		var vs []string
		for _, a := range args {
			if s, err := a.String(); err == nil {
				vs = append(vs, fmt.Sprintf("%q", s))
			}
		}
		if len(vs) == len(args) {
			return "one of " + strings.Join(vs, ", ")
		}
	}
	return "a key allowed by " + name
}

// def is a definition of the module by name, hidden ones (_#X) included.
func (e *Evaluator) def(name string) cue.Value {
	if strings.HasPrefix(name, "_") {
		return e.inst.LookupPath(cue.MakePath(cue.Hid(name, e.pkg)))
	}
	return e.inst.LookupPath(cue.ParsePath(name))
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
