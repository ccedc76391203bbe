package eval

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"
)

// The failure kinds of CUE that translate turns into the user's words.
var (
	outOfBound  = regexp.MustCompile(`^invalid value (.+) \(out of bound ([=!]~)("(?:[^"\\]|\\.)*")\)$`)
	notEqual    = regexp.MustCompile(`^invalid value (.+) \(out of bound !=(.+)\)$`)
	numBound    = regexp.MustCompile(`^invalid value (.+) \(out of bound ([<>]=?)(-?[0-9.]+)\)$`)
	mismatch    = regexp.MustCompile(`^conflicting values (.+?) and (.+?) \(mismatched types (\w+) and (\w+)\)$`)
	cannotUse   = regexp.MustCompile(`^cannot use (.+) as (\w+)`)
	bothValues  = regexp.MustCompile(`^conflicting values ("[^"]*"|[-0-9.]+|true|false) and ("[^"]*"|[-0-9.]+|true|false)$`)
	notAllowed  = "field not allowed"
	incomplete  = regexp.MustCompile(`^incomplete value (.+)$`)
	boundsInSrc = regexp.MustCompile(`([<>]=?)\s*(-?[0-9]+(?:\.[0-9]+)?)`)
)

// translate rewrites one CUE failure at path into what is wanted. explain
// says whether the schema's positions explain the message (a value fixed by
// a profile) or only repeat the rule the message already states.
func (e *Evaluator) translate(root cue.Value, path, msg string) (string, bool) {
	if m := outOfBound.FindStringSubmatch(msg); m != nil {
		if want := e.describer().pattern(m[3]); want != "" {
			return "invalid value " + m[1] + ": " + latest(m[1]) + "want " + want, false
		}
		return msg, true
	}
	if m := notEqual.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid value %s: %sanything but %s%s", m[1], latest(m[1]), m[2], e.aboutField(root, path)), false
	}
	if m := numBound.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid value %s: want %s%s", m[1], e.bounds(root, path, m[2], m[3]), e.aboutField(root, path)), false
	}
	if m := mismatch.FindStringSubmatch(msg); m != nil {
		got, want := m[1], m[4]
		if isTypeName(m[1]) {
			got, want = m[2], m[3]
		}
		return "invalid value " + got + ": " + wantKind(want, got), false
	}
	if m := cannotUse.FindStringSubmatch(msg); m != nil {
		return "invalid value " + m[1] + ": " + wantKind(m[2], m[1]), false
	}
	if m := incomplete.FindStringSubmatch(msg); m != nil {
		if strings.Contains(m[1], " | ") {
			return "undecided: " + m[1] + ": want one value; pick one (or mark the default with *)", false
		}
		return "must be set: want " + m[1], true
	}
	if msg == notAllowed {
		return e.unknownAt(root, path), false
	}
	return msg, bothValues.MatchString(msg)
}

// latest says why "latest" is refused before the rule it breaks.
func latest(v string) string {
	if v != `"latest"` {
		return ""
	}
	return `refused by policy: "latest" moves, and a GitOps tree pins what the nodes get (no waiver applies: a moving version cannot be reviewed); `
}

// pattern is what a pattern wants, from the doc comment next to it.
func (d describer) pattern(quoted string) string {
	re, err := strconv.Unquote(quoted)
	if err != nil {
		return ""
	}
	want, ok := d[re]
	if !ok {
		return ""
	}
	return lowerFirst(strings.TrimSuffix(want, "."))
}

// bounds describes a numeric field's range from its own constraint in the
// schema (so the message cannot drift from the rule), or from the one bound
// CUE reports.
func (e *Evaluator) bounds(root cue.Value, path, op, n string) string {
	lo, hi := "", ""
	whole := false
	if f := schemaAt(root, path); f.Exists() {
		if b, err := format.Node(f.Source()); err == nil && f.Source() != nil {
			src := string(b)
			whole = strings.Contains(src, "int")
			for _, m := range boundsInSrc.FindAllStringSubmatch(src, -1) {
				switch m[1] {
				case ">=":
					lo = m[2]
				case "<=":
					hi = m[2]
				}
			}
		}
	}
	kind := "a number"
	if whole {
		kind = "a whole number"
	}
	switch {
	case lo != "" && hi != "":
		return fmt.Sprintf("%s from %s to %s", kind, lo, hi)
	case lo != "":
		return fmt.Sprintf("%s of at least %s", kind, lo)
	case hi != "":
		return fmt.Sprintf("%s of at most %s", kind, hi)
	}
	words := map[string]string{">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}
	return fmt.Sprintf("%s %s %s", kind, words[op], n)
}

// aboutField is ", <the field's doc>" for messages that state a bare rule.
func (e *Evaluator) aboutField(root cue.Value, path string) string {
	if s := firstSentence(schemaAt(root, path)); s != "" {
		return " (" + lowerFirst(strings.TrimSuffix(s, ".")) + ")"
	}
	return ""
}

// schemaAt is a schema's field at a user path (list indices match any
// element); a path that does not parse matches nothing.
func schemaAt(root cue.Value, path string) cue.Value {
	sels, err := userSels(path)
	if err != nil {
		return cue.Value{}
	}
	return schemaAtSels(root, sels)
}

func schemaAtSels(root cue.Value, sels []cue.Selector) cue.Value {
	v := root
	for _, sel := range sels {
		if sel.Type() == cue.IndexLabel {
			v = v.LookupPath(cue.MakePath(cue.AnyIndex))
		} else {
			next := v.LookupPath(cue.MakePath(sel))
			if !next.Exists() {
				next = v.LookupPath(cue.MakePath(sel.Optional()))
			}
			if !next.Exists() {
				next = v.LookupPath(cue.MakePath(cue.AnyString))
			}
			v = next
		}
		if !v.Exists() {
			return v
		}
	}
	return v
}

// userSels parses a path as messages print it (and --set takes it): labels
// joined by dots, quoted where needed, list indices as numbers.
func userSels(path string) ([]cue.Selector, error) {
	if path == "" {
		return nil, nil
	}
	return setPath(path)
}

var typeNames = map[string]bool{"string": true, "int": true, "float": true, "number": true, "bool": true, "bytes": true, "struct": true, "list": true, "null": true}

func isTypeName(s string) bool { return typeNames[s] }

// wantKind says what kind a field wants, and how to write it.
func wantKind(kind, got string) string {
	switch kind {
	case "string":
		if !strings.HasPrefix(got, `"`) && got != "{...}" && got != "[...]" {
			return fmt.Sprintf("want a string: quote it (%q)", got)
		}
		return "want a string"
	case "int":
		return "want a whole number, written without quotes"
	case "float", "number":
		return "want a number, written without quotes"
	case "bool":
		return "want true or false, written without quotes"
	case "struct":
		return "want a mapping of fields"
	case "list":
		return "want a list"
	}
	return "want " + kind
}
