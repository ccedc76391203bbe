package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	cueyaml "cuelang.org/go/encoding/yaml"
	yamlv3 "go.yaml.in/yaml/v3"
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
		// CUE's YAML reader unifies a duplicated key instead of refusing it.
		if err := yamlv3.Unmarshal(src, new(any)); err != nil {
			return cue.Value{}, &Error{Msg: yamlError(e.rel(abs), err)}
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
	switch k := v.IncompleteKind(); {
	case k == cue.NullKind:
		// An empty YAML file sets nothing.
		return e.ctx.CompileString("{}"), nil
	case k&cue.StructKind == 0:
		return cue.Value{}, &Error{Msg: fmt.Sprintf("%s: values must be a mapping of fields, not %s", e.rel(abs), k)}
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
	p := cue.ParsePath(k)
	if err := p.Err(); err != nil {
		return cue.Value{}, errors.Newf(token.NoPos, "%s: bad path %q: %v", name, k, err)
	}
	kind, ok := e.schemaKind(p)
	if !ok {
		return cue.Value{}, errors.Newf(token.NoPos, "%s: %s: field not allowed: not in the values schema (see docs/values.md)", name, k)
	}
	build := func(expr string) cue.Value {
		var b strings.Builder
		for _, sel := range p.Selectors() {
			b.WriteString(sel.String())
			b.WriteString(": ")
		}
		b.WriteString(expr)
		return e.ctx.CompileString(b.String(), cue.Filename("--set "+k))
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
		return cue.Value{}, errors.Newf(token.NoPos, "%s: %s: cannot use %q as %s", name, k, raw, kind)
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
// by a pattern (e.g. a nodeSelector label) accepts any kind as far as this
// check goes; unification decides.
func (e *Evaluator) schemaKind(p cue.Path) (cue.Kind, bool) {
	cur := e.schema
	for _, sel := range p.Selectors() {
		next := cur.LookupPath(cue.MakePath(sel))
		if !next.Exists() {
			if cur.IncompleteKind()&cue.StructKind != 0 && cur.Allows(sel) {
				return cue.TopKind, true
			}
			return 0, false
		}
		cur = next
	}
	return cur.IncompleteKind(), true
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

// yamlError turns the YAML parser's "line N: msg" lines into "file:N: msg".
func yamlError(file string, err error) string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if m := yamlLine.FindStringSubmatch(l); m != nil {
			out = append(out, fmt.Sprintf("%s:%s: %s", file, m[1], m[2]))
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("%s: %v", file, err)
	}
	return strings.Join(out, "\n")
}
