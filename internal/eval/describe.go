package eval

import (
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"
)

// describer turns CUE's pattern failures into the user's words: every
// pattern in the schema sits in a definition or a field whose doc comment
// says what is wanted; its first sentence replaces the regex in messages.
type describer map[string]string // regex source → what is wanted

// patternLit finds pattern constraints (=~"…" and !~"…") in CUE source.
var patternLit = regexp.MustCompile(`[=!]~("(?:[^"\\]|\\.)*")`)

// newDescriber collects the patterns of the module's definitions and of
// every field of #Values, each with its doc's first sentence. A
// definition's doc wins over a field's (it is about the pattern itself).
func newDescriber(inst cue.Value) describer {
	d := describer{}
	add := func(v cue.Value, override bool) {
		doc := firstSentence(v)
		if doc == "" {
			return
		}
		b, err := format.Node(v.Source())
		if v.Source() == nil || err != nil {
			return
		}
		for _, m := range patternLit.FindAllStringSubmatch(string(b), -1) {
			re, err := strconv.Unquote(m[1])
			if err != nil {
				continue
			}
			if _, ok := d[re]; !ok || override {
				d[re] = doc
			}
		}
	}
	// Leaves first: a struct's source holds its children's patterns too, so
	// a struct's doc only describes the patterns no child describes (the
	// keys of a map, say).
	var structs []cue.Value
	var walk func(v cue.Value, depth int)
	walk = func(v cue.Value, depth int) {
		if depth > 8 {
			return
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			f := it.Value()
			if f.IncompleteKind() == cue.ListKind {
				// A list's elements: env vars, ports, tolerations.
				if el := f.LookupPath(cue.MakePath(cue.AnyIndex)); el.Exists() && el.IncompleteKind() == cue.StructKind {
					walk(el, depth+1)
				}
			}
			if f.IncompleteKind() == cue.StructKind {
				structs = append(structs, f)
				walk(f, depth+1)
				continue
			}
			add(f, false)
		}
	}
	walk(inst.LookupPath(cue.ParsePath("#Values")), 0)
	// The objects' schema (vet --manifests) and the module's struct
	// definitions, hidden ones included.
	defs, _ := inst.Fields(cue.Definitions(true), cue.Hidden(true))
	for defs != nil && defs.Next() {
		if defs.Selector().IsDefinition() && defs.Value().IncompleteKind() == cue.StructKind {
			structs = append(structs, defs.Value())
			walk(defs.Value(), 0)
		}
	}
	for _, v := range structs {
		add(v, false)
	}
	// Named constraints (#AbsPath, #ReleaseTag, …) describe their pattern
	// best; struct definitions hold other patterns.
	if it, err := inst.Fields(cue.Definitions(true), cue.Hidden(true)); err == nil {
		for it.Next() {
			if it.Selector().IsDefinition() && it.Value().IncompleteKind() != cue.StructKind {
				add(it.Value(), true)
			}
		}
	}
	return d
}

// describer is the module's describer, built when an error first needs it:
// a run without errors (and every worker of a fleet) never walks the schema.
func (e *Evaluator) describer() describer {
	if e.describe == nil {
		e.describe = newDescriber(e.inst)
	}
	return e.describe
}

// firstSentence is the first sentence of a value's doc comment, or "".
func firstSentence(v cue.Value) string {
	var parts []string
	for _, g := range v.Doc() {
		parts = append(parts, g.Text())
	}
	s := strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
	if loc := sentenceEnd.FindStringIndex(s); loc != nil {
		s = s[:loc[0]+1]
	}
	return s
}

// sentenceEnd is a full stop followed by a new sentence (". _ -" in a list
// of characters is not one).
var sentenceEnd = regexp.MustCompile(`\.\s+[A-Z]`)

// lowerFirst lower-cases a sentence's first letter to continue a message ("want a DNS subdomain"), unless its first
// word is a name with more capitals than its first letter ("DNS labels", "StorageClass parameters").
func lowerFirst(s string) string {
	w, _, _ := strings.Cut(s, " ")
	if s == "" || len(w) > 1 && strings.ToLower(w[1:]) != w[1:] {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
