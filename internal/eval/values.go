package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// userValues reads the -f files and the --set assignments, in that order.
func (e *Evaluator) userValues() ([]cue.Value, error) {
	var out []cue.Value
	var errs errors.Error
	for _, f := range e.opts.ValuesFiles {
		v, err := e.readValues(f)
		if err != nil {
			if ce, ok := err.(*Error); ok {
				errs = errors.Append(errs, errors.Newf(token.NoPos, "%s", ce.Msg))
				continue
			}
			return nil, err
		}
		if w := v.LookupPath(waivePath); w.Exists() {
			errs = errors.Append(errs, errors.Newf(w.Pos(), "-f %s: %s", f, waiveFromFlags))
			continue
		}
		out = append(out, v)
	}
	for _, s := range e.opts.Sets {
		if k, _, _ := strings.Cut(s, "="); k == "policy" || strings.HasPrefix(k, "policy.") {
			errs = errors.Append(errs, errors.Newf(token.NoPos, "--set %s: %s", s, waiveFromFlags))
			continue
		}
		v, err := e.setValue(s)
		if err != nil {
			errs = errors.Append(errs, errors.Promote(err, ""))
			continue
		}
		if v.LookupPath(waivePath).Exists() {
			errs = errors.Append(errs, errors.Newf(token.NoPos, "--set %s: %s", s, waiveFromFlags))
			continue
		}
		out = append(out, v)
	}
	if errs != nil {
		return nil, e.cueError(errs)
	}
	return out, nil
}

// waivePath is where a target waives policies. A waiver must show in the
// pull request that adds it, so it comes from committed inputs only.
var waivePath = cue.ParsePath("policy")

const waiveFromFlags = "policy: waivers are taken from committed inputs only (cue/, targets/), so that a reviewer sees them in the pull request; put it in the target's values"

// readValues reads one values file (.cue, .yaml, .yml or .json), keeping the
// positions of its fields for error messages. Errors are *Error for bad input
// and plain errors for I/O.
func (e *Evaluator) readValues(file string) (cue.Value, error) {
	abs, ext, src := "<stdin>", ".yaml", e.opts.Stdin
	if file != "-" {
		var err error
		if abs, err = filepath.Abs(file); err != nil {
			return cue.Value{}, err
		}
		ext = filepath.Ext(abs)
		// Stat first: reading a FIFO, a device or a socket could block or
		// never end.
		fi, err := os.Stat(abs)
		if err != nil {
			return cue.Value{}, fmt.Errorf("reading values: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return cue.Value{}, &Error{Msg: fmt.Sprintf("%s: %s, not a regular file: values come from a file (or from stdin with -f -)", e.rel(abs), fileType(fi.Mode()))}
		}
		if src, err = os.ReadFile(abs); err != nil {
			return cue.Value{}, fmt.Errorf("reading values: %w", err)
		}
	}
	var v cue.Value
	switch ext {
	case ".cue":
		v = e.ctx.CompileBytes(src, cue.Filename(abs))
	case ".yaml", ".yml":
		if msg := checkYAML(e.rel(abs), src); msg != "" {
			return cue.Value{}, &Error{Msg: msg}
		}
		f, err := cueyaml.Extract(abs, src)
		if err != nil {
			return cue.Value{}, e.cueError(err)
		}
		v = e.ctx.BuildFile(f)
	case ".json":
		x, err := cuejson.Extract(abs, src)
		if err != nil {
			return cue.Value{}, e.cueError(err)
		}
		v = e.ctx.BuildExpr(x)
	default:
		return cue.Value{}, &Error{Msg: fmt.Sprintf("%s: values files must end in .cue, .yaml, .yml or .json", e.rel(abs))}
	}
	if err := v.Err(); err != nil {
		return cue.Value{}, e.cueError(err)
	}
	if ds := controlStrings(v); len(ds) > 0 {
		return cue.Value{}, e.report(ds)
	}
	switch k := v.IncompleteKind(); {
	case k == cue.NullKind:
		// An empty YAML file sets nothing.
		return e.ctx.CompileString("{}"), nil
	case k&cue.StructKind == 0:
		return cue.Value{}, &Error{Msg: fmt.Sprintf("%s: values must be a mapping of fields (key: value), not %s", where(e, v, abs), k)}
	}
	return v, nil
}

// setValue turns "a.b.c=value" into a value. The value's type follows the
// schema: a string field takes the text as it is, other fields parse it as a
// CUE or JSON literal (numbers, booleans, lists, structs).
func (e *Evaluator) setValue(s string) (cue.Value, error) {
	name := "--set " + s
	k, raw, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return cue.Value{}, errors.Newf(token.NoPos, "%s: want path=value", name)
	}
	for _, r := range raw {
		if bad(r) {
			return cue.Value{}, errors.Newf(token.NoPos, "%s: invalid value: it holds %s, which no field takes; remove it", name, charName(r))
		}
	}
	sels, err := setPath(k)
	if err != nil {
		return cue.Value{}, errors.Newf(token.NoPos, "%s: bad path %q: %v", name, k, err)
	}
	p := cue.MakePath(sels...)
	// A path the schema does not take is built all the same: evaluation
	// reports it with every other error, saying what may have been meant.
	kind, _ := e.schemaKind(sels)
	build := func(expr string) cue.Value {
		return e.ctx.CompileString(setExpr(sels, expr), cue.Filename("--set "+k))
	}
	// The text as a literal when its kind fits and the schema takes it there
	// (a field matched only by a pattern has no kind to go by); otherwise, for
	// a field that takes strings, the text as a string: "100Mi" is a quantity
	// string, not CUE's number 104857600.
	takes := func(v cue.Value) bool { return v.Err() == nil && e.schema.Unify(v).LookupPath(p).Err() == nil }
	if literalFits(e, raw, kind) {
		v := build(raw)
		if takes(v) || kind&cue.StringKind == 0 {
			return v, nil
		}
		if sv := build(literal.String.Quote(raw)); takes(sv) {
			return sv, nil
		}
		// Neither is valid: keep the literal, whose error says what is wrong.
		return v, nil
	}
	if kind&cue.StringKind == 0 {
		return cue.Value{}, errors.Newf(token.NoPos, "%s: %s: invalid value %q: %s", name, k, raw, wantKind(kind.String(), strconv.Quote(raw)))
	}
	v := build(literal.String.Quote(raw))
	if err := v.Err(); err != nil {
		return cue.Value{}, err
	}
	return v, nil
}

// literalFits reports whether raw, read as a CUE literal, has a kind the field
// accepts.
func literalFits(e *Evaluator, raw string, kind cue.Kind) bool {
	if _, err := parser.ParseExpr("", raw); err != nil {
		return false
	}
	v := e.ctx.CompileString(raw)
	if v.Err() != nil {
		return false
	}
	return v.IncompleteKind()&^kind == 0
}

// schemaKind is the kind the values schema accepts at p. A field matched only
// by a pattern (e.g. a nodeSelector label), or not in the schema at all,
// accepts any kind as far as this check goes; unification decides.
func (e *Evaluator) schemaKind(sels []cue.Selector) (cue.Kind, bool) {
	cur := e.schema
	for _, sel := range sels {
		if sel.Type() == cue.IndexLabel {
			sel = cue.AnyIndex
		}
		next := cur.LookupPath(cue.MakePath(sel))
		if !next.Exists() && sel.Type() == cue.StringLabel {
			next = cur.LookupPath(cue.MakePath(sel.Optional()))
		}
		if !next.Exists() {
			if cur.IncompleteKind()&cue.StructKind != 0 && sel.Type() == cue.StringLabel && cur.Allows(sel) {
				return cue.TopKind, true
			}
			return cue.TopKind, false
		}
		cur = next
	}
	// A field whose rule refers to another field the target decides (installDir's "not containerdConfig's folder",
	// with containerdConfig a profile's default) has no kind before the target is known: unification decides.
	if k := cur.IncompleteKind(); k != cue.BottomKind {
		return k, true
	}
	return cue.TopKind, true
}

// setPath parses a --set path: labels joined by dots, quoted where they hold
// dots or slashes ("cloud.google.com/gke-nodepool"), and list indices as
// .N or [N] (gvisor.tolerations.0.operator, gvisor.tolerations[0].operator).
func setPath(k string) ([]cue.Selector, error) {
	var sels []cue.Selector
	var cur strings.Builder
	quoted, done := false, false
	flush := func() error {
		if !done && cur.Len() == 0 {
			return fmt.Errorf("empty label")
		}
		if !done {
			t := cur.String()
			if n, err := strconv.Atoi(t); err == nil && !quoted && n >= 0 {
				sels = append(sels, cue.Index(n))
			} else {
				sels = append(sels, cue.Str(t))
			}
		}
		cur.Reset()
		done = false
		return nil
	}
	rs := []rune(k)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '"' && cur.Len() == 0 && !done:
			j := i + 1
			for j < len(rs) && rs[j] != '"' {
				if rs[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unterminated quote")
			}
			u, err := strconv.Unquote(string(rs[i : j+1]))
			if err != nil {
				return nil, err
			}
			sels = append(sels, cue.Str(u))
			done, i = true, j
		case r == '.':
			if err := flush(); err != nil {
				return nil, err
			}
		case r == '[':
			j := strings.IndexRune(string(rs[i:]), ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated [")
			}
			if cur.Len() > 0 || done {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			idx := string(rs[i+1 : i+j])
			n, err := strconv.Atoi(idx)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("list index %q: want a number from 0", idx)
			}
			sels = append(sels, cue.Index(n))
			done, i = true, i+j
		default:
			if done {
				return nil, fmt.Errorf("want . after %q", string(rs[:i]))
			}
			cur.WriteRune(r)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return sels, nil
}

// setExpr is the CUE source that sets expr at sels. An index becomes a list
// whose other elements are left open (_): it sets one element of the list
// the target already has (or of a new one: earlier elements stay unset).
func setExpr(sels []cue.Selector, expr string) string {
	simple := true
	for _, s := range sels {
		simple = simple && s.Type() != cue.IndexLabel
	}
	if simple {
		var b strings.Builder
		for _, sel := range sels {
			b.WriteString(sel.String() + ": ")
		}
		return b.String() + expr
	}
	for i := len(sels) - 1; i >= 0; i-- {
		if sels[i].Type() == cue.IndexLabel {
			expr = "[" + strings.Repeat("_, ", int(sels[i].Index())) + expr + ", ...]"
		} else {
			expr = "{" + sels[i].String() + ": " + expr + "}"
		}
	}
	return expr
}

// where is a value's position, or its file.
func where(e *Evaluator, v cue.Value, file string) string {
	if p := v.Pos(); p.IsValid() {
		return e.rel(p)
	}
	return e.rel(file)
}

// fileType names what a non-regular file is.
func fileType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a folder"
	}
	return "not a plain file"
}

var yamlLine = regexp.MustCompile(`^\s*(?:yaml: )?line (\d+): (.*)$`)
