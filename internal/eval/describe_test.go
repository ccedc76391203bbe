package eval

import (
	"os"

	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"
)

// TestEveryPatternIsDescribed: every pattern of the module (the values'
// and the objects' that vet --manifests checks) sits where a doc comment
// says what it wants, so that a failure says so instead of printing the
// regex. A pattern built by interpolation is left out (its source is not
// the pattern).
func TestEveryPatternIsDescribed(t *testing.T) {
	ev, err := Load(Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../cue/*.cue")
	if err != nil || len(files) < 8 {
		t.Fatalf("cue files: %v %v", files, err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range patternLit.FindAllStringSubmatch(string(b), -1) {
			re, err := strconv.Unquote(m[1])
			if err != nil || strings.Contains(m[1], `\(`) {
				continue
			}
			n++
			if ev.describer()[re] == "" {
				t.Errorf("%s: pattern %s has no description: put a doc comment on its definition or field", filepath.Base(f), m[1])
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d patterns found", n)
	}
}

// TestEveryBoundIsDescribed: a field with a numeric bound carries a doc
// comment, which the bound's message quotes after the range (the range
// itself is read from the constraint, so it cannot drift from the rule).
func TestEveryBoundIsDescribed(t *testing.T) {
	ev, err := Load(Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v cue.Value, path string)
	walk = func(v cue.Value, path string) {
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return
		}
		for it.Next() {
			p := strings.TrimPrefix(path+"."+it.Selector().Unquoted(), ".")
			if it.Value().IncompleteKind() == cue.StructKind {
				walk(it.Value(), p)
				continue
			}
			b, err := format.Node(it.Value().Source())
			if it.Value().Source() == nil || err != nil || !boundsInSrc.Match([]byte(stripComments(string(b)))) {
				continue
			}
			n++
			if firstSentence(it.Value()) == "" {
				t.Errorf("%s: a bound without a doc comment", p)
			}
			if msg, _ := ev.translate(ev.schema, p, "invalid value -1 (out of bound >=1)"); !strings.Contains(msg, "want a") {
				t.Errorf("%s: bound not translated: %s", p, msg)
			}
		}
	}
	walk(ev.schema, "")
	if n < 4 {
		t.Fatalf("only %d bounded fields found", n)
	}
}
