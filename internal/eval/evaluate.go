package eval

import (
	"bytes"
	"encoding/json"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/errors"
)

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
		if err := CheckTargets(e.opts.Only, res.All); err != nil {
			return nil, err
		}
		selected = nil
		for _, n := range e.opts.Only {
			selected = append(selected, byName[n])
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
	// A profile the module does not declare, named with every one it does (CUE's own disjunction error lists only
	// some of them once there are several).
	if raw := t.val.LookupPath(cue.ParsePath("profile")); raw.Exists() {
		if s, err := raw.String(); err == nil && !slices.Contains(e.ProfileNames(), s) {
			var want []string
			for _, n := range e.ProfileNames() {
				want = append(want, strconv.Quote(n))
			}
			// the value's own position, not its field's
			pos := raw.Pos()
			if f, ok := raw.Source().(*ast.Field); ok && f.Value != nil && f.Value.Pos().IsValid() {
				pos = f.Value.Pos()
			}
			return nil, targetErr(t.name, errors.Newf(pos, "profile: %q is not allowed: want one of %s", s, strings.Join(want, ", ")))
		}
	}
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
	out := &Target{Name: t.name, Profile: profile, Values: values, Example: len(user) == 0 && shippedExample(t, profile)}
	out.where = e.positions(append([]cue.Value{t.val}, user...))
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
