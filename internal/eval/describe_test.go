package eval

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEveryPatternIsDescribed: every pattern of the values (the files a
// user's values meet: values, delivery, profiles, targets) sits where a doc
// comment says what it wants, so that a failure says so instead of printing
// the regex. A pattern built by interpolation is left out (its source is not
// the pattern). objects.cue's patterns tighten rendered objects (vet
// --manifests) and are not covered yet.
func TestEveryPatternIsDescribed(t *testing.T) {
	ev, err := Load(Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range []string{"values.cue", "delivery.cue", "profiles.cue", "targets.cue"} {
		files = append(files, filepath.Join("../../cue", f))
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

func TestTranslate(t *testing.T) {
	d := describer{`^a+$`: "Some a's, at least one. More text."}
	for in, want := range map[string]string{
		`invalid value "b" (out of bound =~"^a+$")`: `invalid value "b": want some a's, at least one`,
		`invalid value "b" (out of bound =~"^c$")`:  `invalid value "b" (out of bound =~"^c$")`,
		`conflicting values "a" and "b"`:            `conflicting values "a" and "b"`,
	} {
		d2 := d
		d2[`^a+$`] = firstSentenceOf("Some a's, at least one. More text.")
		if got := d2.translate(in); got != want {
			t.Errorf("translate(%q) = %q, want %q", in, got, want)
		}
	}
}

// firstSentenceOf applies firstSentence's rule to a string.
func firstSentenceOf(s string) string {
	if loc := sentenceEnd.FindStringIndex(s); loc != nil {
		return s[:loc[0]+1]
	}
	return s
}
