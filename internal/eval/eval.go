// Package eval loads the CUE module, the repository's targets and the user's
// values, and evaluates each target into its Kubernetes objects.
package eval

import (
	"bytes"
	"encoding/json"
	stderrors "errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// ReservedNames cannot name a target: they are folders of the tree itself.
var ReservedNames = map[string]bool{"base": true}

// Options say where the inputs are. The zero value of every slice means "none".
type Options struct {
	// Root is the repository root; CUEDir and TargetsDir are relative to it.
	Root       string
	CUEDir     string // default "cue"
	TargetsDir string // default "targets"
	// ValuesFiles are -f files (.cue, .yaml, .yml, .json), unified into every
	// target; "-" is Stdin, read as YAML (or JSON).
	ValuesFiles []string
	// Stdin is the content of the values file "-".
	Stdin []byte
	// Sets are --set path=value assignments, unified into every target.
	Sets []string
	// Only restricts evaluation to these targets; empty means all.
	Only []string
	// NoShare renders every target on its own, even where targets could
	// share the parts they render alike (tests compare both ways).
	NoShare bool
}

// Object is one rendered Kubernetes object.
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// JSON is the object as exported by CUE.
	JSON []byte
}

// Target is one cluster's evaluated output.
type Target struct {
	Name    string
	Profile string
	// Values are the final, concrete values of the target, as JSON (the CUE
	// value itself is dropped: it holds the whole evaluation in memory).
	Values []byte
	// Objects in declaration order: what the cluster gets (overlays/).
	Objects []Object
	// Delivery are the target's Argo CD and Flux objects (delivery/).
	Delivery []Object
	// Smoke are the target's smoke-test objects (smoke/).
	Smoke []Object
}

// Result is the evaluation of every selected target, sorted by name.
type Result struct {
	Targets []Target
	// All names every declared target, selected or not, sorted.
	All []string
	// Fleet are the fleet-wide delivery objects (the Argo CD ApplicationSet).
	Fleet []Object
	// Rendered counts the parts (#Render, #Delivery, #Smoke of a target)
	// evaluated by CUE, Shared those taken from another target's rendering.
	Rendered, Shared int
}

// Error is an input error: the inputs do not evaluate. Its message lists every
// CUE error with its position.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

type source struct {
	name string
	pos  string // where the target is declared, for duplicate-name errors
	val  cue.Value
}

// Evaluator holds the loaded module; it evaluates targets from it.
type Evaluator struct {
	opts    Options
	cwd     string
	ctx     *cue.Context
	inst    cue.Value
	schema  cue.Value // #Target: #Values and the name
	profile cue.Value // #Profiles
	render  cue.Value // #Render
	deliver cue.Value // #Delivery
	smoke   cue.Value // #Smoke
	memo    *memo
	// describe turns pattern failures into what is wanted; built on the
	// first error (see describer), not on every load.
	describe describer
	// userFiles are the module's files that declare targets: positions in
	// them are the user's, not the schema's.
	userFiles map[string]bool
	// pkg is the module's import path: hidden definitions are looked up
	// in it.
	pkg string
}

// Load loads and builds the CUE module.
func Load(opts Options) (*Evaluator, error) {
	if opts.CUEDir == "" {
		opts.CUEDir = layout.CUEDir
	}
	if opts.TargetsDir == "" {
		opts.TargetsDir = layout.TargetsDir
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	e := &Evaluator{opts: opts, cwd: cwd, ctx: cuecontext.New(), memo: newMemo(), userFiles: map[string]bool{}}
	dir := filepath.Join(opts.Root, opts.CUEDir)
	if _, err := os.Stat(dir); err != nil {
		if stderrors.Is(err, fs.ErrNotExist) {
			abs, _ := filepath.Abs(filepath.Join(opts.Root, opts.CUEDir))
			return nil, fmt.Errorf("no CUE module: %s does not exist%s", abs, rootHint(opts.Root, opts.CUEDir))
		}
		return nil, fmt.Errorf("loading CUE module: %w", err)
	}
	cfg := &load.Config{Dir: dir}
	if usesTag(dir, buildTag) {
		cfg.Tags = []string{buildTag}
	}
	insts := load.Instances([]string{"."}, cfg)
	if len(insts) != 1 {
		return nil, fmt.Errorf("loading CUE module %s: want one instance, got %d", dir, len(insts))
	}
	if err := insts[0].Err; err != nil {
		return nil, e.cueError(err)
	}
	e.pkg = insts[0].ImportPath
	e.inst = e.ctx.BuildInstance(insts[0])
	if err := e.inst.Err(); err != nil {
		return nil, e.cueError(err)
	}
	e.schema = e.inst.LookupPath(cue.ParsePath("#Target"))
	e.profile = e.inst.LookupPath(cue.ParsePath("#Profiles"))
	e.render = e.inst.LookupPath(cue.ParsePath("#Render"))
	e.deliver = e.inst.LookupPath(cue.ParsePath("#Delivery"))
	e.smoke = e.inst.LookupPath(cue.ParsePath("#Smoke"))
	for _, v := range []cue.Value{e.schema, e.profile, e.render, e.deliver, e.smoke} {
		if !v.Exists() {
			return nil, fmt.Errorf("CUE module %s lacks #Target, #Profiles, #Render, #Delivery or #Smoke", dir)
		}
	}
	return e, nil
}

// buildTag is set when loading the module: files for the stock cue CLI only
// (cue/rendered.cue, @if(!gvisorgen)) are left out.
const buildTag = "gvisorgen"

// usesTag reports whether a CUE file of dir mentions the tag in an @if
// attribute: CUE refuses a tag that no file uses, and a module may lack them.
func usesTag(dir, tag string) bool {
	attr := regexp.MustCompile(`@if\([^)]*\b` + regexp.QuoteMeta(tag) + `\b[^)]*\)`)
	files, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && attr.Match(b) {
			return true
		}
	}
	return false
}

// Context is the CUE context of the loaded module.
func (e *Evaluator) Context() *cue.Context { return e.ctx }

// Instance is the built CUE module.
func (e *Evaluator) Instance() cue.Value { return e.inst }

// Profiles is the #Profiles definition.
func (e *Evaluator) Profiles() cue.Value { return e.profile }

// Schema is the #Target definition: #Values and the target's name.
func (e *Evaluator) Schema() cue.Value { return e.schema }

// Evaluate evaluates every selected target. Every input error of every target
// is reported, not only the first.
func (e *Evaluator) Evaluate() (*Result, error) {
	targets, err := e.targets()
	if err != nil {
		return nil, err
	}
	user, err := e.userValues()
	if err != nil {
		return nil, err
	}
	res := &Result{}
	byName := map[string]source{}
	for _, t := range targets {
		res.All = append(res.All, t.name)
		byName[t.name] = t
	}
	selected := targets
	if len(e.opts.Only) > 0 {
		selected = nil
		for _, n := range e.opts.Only {
			t, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("--target %s: no such target (declared: %s)", n, strings.Join(res.All, ", "))
			}
			selected = append(selected, t)
		}
		sort.Slice(selected, func(i, j int) bool { return selected[i].name < selected[j].name })
	}
	outs, ds, err := e.evalAll(selected, user)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		fleet, err := objectsAt(e.inst.LookupPath(cue.ParsePath("fleetObjects")))
		if err != nil {
			ds = append(ds, e.diags(err)...)
		}
		res.Fleet = fleet
	}
	if len(ds) > 0 {
		return nil, e.report(ds)
	}
	res.Targets = outs
	res.Rendered, res.Shared = int(e.memo.rendered.Load()), int(e.memo.shared.Load())
	return res, nil
}

// Workers is how many evaluators a large fleet is spread over (one CUE
// context each: a context is not safe for concurrent use). Small runs stay on
// one, since loading the module again costs more than it saves.
var Workers = runtime.GOMAXPROCS(0)

// minPerWorker is the number of targets below which another worker does not pay.
const minPerWorker = 12

// evalAll evaluates the targets, in parallel for large fleets, and returns the
// results in the order of ts and every error, in the same order.
func (e *Evaluator) evalAll(ts []source, user []cue.Value) ([]Target, []diag, error) {
	n := min(Workers, len(ts)/minPerWorker)
	if n < 2 {
		outs, ds := e.evalChunk(ts, user)
		return outs, ds, nil
	}
	type result struct {
		outs []Target
		ds   []diag
		err  error
	}
	chunks := make([][]source, n)
	for i, t := range ts {
		chunks[i*n/len(ts)] = append(chunks[i*n/len(ts)], t)
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[w]
			if w == 0 {
				r.outs, r.ds = e.evalChunk(chunks[w], user)
				return
			}
			// A worker of its own: its own context, module, targets and values.
			we, err := Load(e.opts)
			if err != nil {
				r.err = err
				return
			}
			we.memo = e.memo
			srcs, err := we.targets()
			if err != nil {
				r.err = err
				return
			}
			byName := map[string]source{}
			for _, s := range srcs {
				byName[s.name] = s
			}
			wuser, err := we.userValues()
			if err != nil {
				r.err = err
				return
			}
			mine := make([]source, 0, len(chunks[w]))
			for _, t := range chunks[w] {
				mine = append(mine, byName[t.name])
			}
			r.outs, r.ds = we.evalChunk(mine, wuser)
		}()
	}
	wg.Wait()
	var outs []Target
	var ds []diag
	for _, r := range results {
		if r.err != nil {
			return nil, nil, r.err
		}
		outs = append(outs, r.outs...)
		ds = append(ds, r.ds...)
	}
	return outs, ds, nil
}

// evalChunk evaluates targets in order; each failing target adds its errors.
func (e *Evaluator) evalChunk(ts []source, user []cue.Value) ([]Target, []diag) {
	var outs []Target
	var ds []diag
	for _, t := range ts {
		out, err := e.evalTarget(t, user)
		if err != nil {
			ds = append(ds, e.targetDiags(t, user, err)...)
			continue
		}
		outs = append(outs, *out)
	}
	return outs, ds
}

func (e *Evaluator) evalTarget(t source, user []cue.Value) (*Target, error) {
	v := e.schema.Unify(t.val)
	for _, u := range user {
		v = v.Unify(u)
	}
	p := v.LookupPath(cue.ParsePath("profile"))
	profile, err := p.String()
	if err != nil {
		// Without a profile the target cannot be complete: say so, with every
		// error its values have already.
		var errs errors.Error
		if p.Err() != nil {
			errs = errors.Promote(p.Err(), "")
		} else {
			errs = errors.Newf(t.val.Pos(), "profile: must be set to one of %s (target %q declared at %s)", strings.Join(e.ProfileNames(), ", "), t.name, t.pos)
		}
		if err := v.Validate(); err != nil {
			errs = errors.Append(errs, errors.Promote(err, ""))
		}
		return nil, targetErr(t.name, errs)
	}
	prof := e.profile.LookupPath(cue.MakePath(cue.Str(profile)))
	if !prof.Exists() {
		return nil, targetErr(t.name, errors.Newf(p.Pos(), "profile: unknown profile %q (want one of %s)", profile, strings.Join(e.ProfileNames(), ", ")))
	}
	v = v.Unify(prof).FillPath(cue.ParsePath("target"), t.name)
	if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, targetErr(t.name, err)
	}
	values, nameless, err := exportValues(v)
	if err != nil {
		return nil, targetErr(t.name, err)
	}
	out := &Target{Name: t.name, Profile: profile, Values: values}
	for i, part := range []struct {
		def cue.Value
		dst *[]Object
		// named: the part gets the name (its objects carry it).
		named bool
	}{{e.render, &out.Objects, false}, {e.deliver, &out.Delivery, true}, {e.smoke, &out.Smoke, false}} {
		var objs []Object
		if part.named {
			e.memo.rendered.Add(1)
			objs, err = renderPart(part.def, v)
		} else {
			objs, err = e.shared(i, part.def, nameless)
		}
		if err != nil {
			return nil, targetErr(t.name, err)
		}
		*part.dst = objs
	}
	return out, nil
}

// shared renders #Render or #Smoke. They get the target's concrete values
// without its name (#Values has no target field), so what they render is a
// function of those values: it is rendered once per distinct values and
// shared by every target with the same (most targets of a fleet differ only
// in their name and a few values). With or without sharing the input is the
// same, so sharing cannot change a byte.
func (e *Evaluator) shared(i int, def cue.Value, nameless []byte) ([]Object, error) {
	m := e.memo
	key := string(nameless)
	if !e.opts.NoShare {
		m.mu.Lock()
		objs, ok := m.objs[i][key]
		m.mu.Unlock()
		if ok {
			m.shared.Add(1)
			return objs, nil
		}
	}
	m.rendered.Add(1)
	in := e.ctx.CompileBytes(nameless)
	if err := in.Err(); err != nil {
		return nil, err
	}
	objs, err := renderPart(def, in)
	if err != nil {
		return nil, err
	}
	if !e.opts.NoShare {
		m.mu.Lock()
		m.objs[i][key] = objs
		m.mu.Unlock()
	}
	return objs, nil
}

func renderPart(def, values cue.Value) ([]Object, error) {
	return objectsAt(def.FillPath(cue.ParsePath("values"), values).LookupPath(cue.ParsePath("objects")))
}

// memo holds the parts rendered from nameless values, shared by every worker
// of a run: the objects are plain data.
type memo struct {
	mu   sync.Mutex
	objs [3]map[string][]Object
	// Counts for Result.
	rendered, shared atomic.Int64
}

func newMemo() *memo {
	m := &memo{}
	for i := range m.objs {
		m.objs[i] = map[string][]Object{}
	}
	return m
}

// exportValues returns a target's values as JSON, and the same without the
// target's name: what #Render and #Smoke are rendered from.
func exportValues(v cue.Value) (values, nameless []byte, err error) {
	var b, n bytes.Buffer
	it, err := v.Fields()
	if err != nil {
		return nil, nil, err
	}
	b.WriteByte('{')
	n.WriteByte('{')
	for it.Next() {
		j, err := it.Value().MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		name := it.Selector().Unquoted()
		label, _ := json.Marshal(name)
		member(&b, label, j)
		if name != "target" {
			member(&n, label, j)
		}
	}
	b.WriteByte('}')
	n.WriteByte('}')
	return b.Bytes(), n.Bytes(), nil
}

// member appends "label":value to a JSON object being written.
func member(w *bytes.Buffer, label, value []byte) {
	if w.Len() > 1 {
		w.WriteByte(',')
	}
	w.Write(label)
	w.WriteByte(':')
	w.Write(value)
}

// objectsAt validates a struct of objects and exports them in declaration order.
func objectsAt(objs cue.Value) ([]Object, error) {
	if err := objs.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, err
	}
	it, err := objs.Fields()
	if err != nil {
		return nil, err
	}
	var out []Object
	for it.Next() {
		o, err := object(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func object(v cue.Value) (Object, error) {
	var o Object
	b, err := v.MarshalJSON()
	if err != nil {
		return o, err
	}
	o.JSON = b
	str := func(p string) string {
		s, _ := v.LookupPath(cue.ParsePath(p)).String()
		return s
	}
	o.APIVersion = str("apiVersion")
	o.Kind = str("kind")
	o.Name = str("metadata.name")
	o.Namespace = str("metadata.namespace")
	return o, nil
}

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

// targets returns the declared targets: inline ones from the CUE module's
// `targets` and one per file of the targets folder. A name declared twice is
// an error naming both places.
func (e *Evaluator) targets() ([]source, error) {
	var out []source
	seen := map[string]source{}
	var errs errors.Error
	add := func(s source, pos token.Pos) {
		if prev, ok := seen[s.name]; ok {
			errs = errors.Append(errs, errors.Newf(pos, "target %q is declared twice: at %s and at %s", s.name, prev.pos, s.pos))
			return
		}
		if ReservedNames[s.name] {
			errs = errors.Append(errs, errors.Newf(pos, "target name %q is reserved", s.name))
			return
		}
		if !validName(s.name) {
			errs = errors.Append(errs, errors.Newf(pos, "target name %q: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)", s.name))
			return
		}
		seen[s.name] = s
		out = append(out, s)
	}

	inline := e.inst.LookupPath(cue.ParsePath("targets"))
	if inline.Exists() {
		it, err := inline.Fields()
		if err != nil {
			return nil, e.cueError(err)
		}
		for it.Next() {
			name := it.Selector().Unquoted()
			pos := it.Value().Pos()
			if pos.IsValid() {
				e.userFiles[pos.Filename()] = true
			}
			add(source{name: name, pos: e.rel(pos), val: it.Value()}, pos)
		}
	}

	dir := filepath.Join(e.opts.Root, e.opts.TargetsDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading targets folder: %w", err)
	}
	for _, ent := range entries {
		if ent.IsDir() || strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		ext := filepath.Ext(ent.Name())
		if !valuesExt[ext] {
			continue
		}
		file := filepath.Join(dir, ent.Name())

		v, err := e.readValues(file)
		if err != nil {
			if ce, ok := err.(*Error); ok {
				errs = errors.Append(errs, errors.Newf(token.NoPos, "%s", ce.Msg))
				continue
			}
			return nil, err
		}
		name := strings.TrimSuffix(ent.Name(), ext)
		pos := token.NoPos
		add(source{name: name, pos: e.rel(file), val: v}, pos)
	}
	if errs != nil {
		return nil, e.cueError(errs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

var valuesExt = map[string]bool{".cue": true, ".yaml": true, ".yml": true, ".json": true}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// rel renders a position or a path relative to the working directory.
func (e *Evaluator) rel(p any) string {
	switch p := p.(type) {
	case token.Pos:
		if !p.IsValid() {
			return "-"
		}
		return fmt.Sprintf("%s:%d:%d", e.rel(p.Filename()), p.Line(), p.Column())
	case string:
		if r, err := filepath.Rel(e.cwd, p); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
		return p
	}
	return fmt.Sprint(p)
}

// rootHint says where the repository's root is when gvisorgen runs below it
// (the module folder is found in a parent), or how to name it.
func rootHint(root, cueDir string) string {
	abs, err := filepath.Abs(root)
	if err != nil {
		return ""
	}
	for d, up := filepath.Dir(abs), ".."; d != filepath.Dir(d); d, up = filepath.Dir(d), up+"/.." {
		if fi, err := os.Stat(filepath.Join(d, cueDir)); err == nil && fi.IsDir() {
			return fmt.Sprintf(": %s is below the repository's root %s; run gvisorgen there, or pass --root %s", abs, d, up)
		}
	}
	return ": run gvisorgen from the repository's root (where " + cueDir + "/ is), or pass --root <that folder>"
}
