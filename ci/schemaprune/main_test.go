package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

// TestCommittedSchemasPruned: cue/cue.mod/gen is what `make schemas` writes,
// i.e. already pruned to what cue/*.cue reach.
func TestCommittedSchemasPruned(t *testing.T) {
	st, err := prune(filepath.Join("..", "..", "cue"), true)
	if err != nil {
		t.Fatal(err)
	}
	if st.rewritten != 0 || st.deleted != 0 {
		t.Fatalf("cue/cue.mod/gen is not pruned to what cue/*.cue use (%d files to rewrite, %d to delete): run `make schemas`",
			st.rewritten, st.deleted)
	}
	if st.keptDecls == 0 {
		t.Fatal("no declarations kept")
	}
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPrune: aliases, embedded and nested references, hidden declarations and
// cross-package references are followed; labels are not references; unused
// imports, empty files and empty packages go; a second run changes nothing.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"cue.mod/module.cue": "module: \"x.dev/x@v0\"\nlanguage: version: \"v0.17.1\"\n",
		"x.cue": `package x

import (
	alias "ex.com/a/v1"
	"ex.com/b"
)

out: alias.#Top & {n: q: "q", s: [{x: 1}]}
y:   b.#B & "y"
`,
		"cue.mod/gen/ex.com/a/v1/a.cue": `// Code generated. DO NOT EDIT.

package v1

import (
	bb "ex.com/b"
	"ex.com/c"
	"strings"
)

// Top is the root.
#Top: {
	#Embedded
	n: #Nested | *null
	s: [...{x: bb.#FromA}]
	local: {#Unused2: int}
}

// Embedded is embedded.
#Embedded: e: int | *1

#Nested: q: _hidden

_hidden: string

#Unused: c.#C

#Unused2: strings.ToUpper("x")
`,
		"cue.mod/gen/ex.com/a/v1/other.cue": "package v1\n\n#Drop: int\n",
		"cue.mod/gen/ex.com/b/b.cue":        "package b\n\n#B: string\n\n#FromA: int\n\n#NotUsed: bool\n",
		"cue.mod/gen/ex.com/c/c.cue":        "package c\n\n#C: int\n",
	})
	st, err := prune(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.keptDecls != 6 || st.rewritten != 2 || st.deleted != 2 || st.keptPkgs != 2 {
		t.Errorf("stats %+v, want 6 kept declarations, 2 files rewritten, 2 deleted, 2 packages", st)
	}
	a := read(t, filepath.Join(dir, "cue.mod/gen/ex.com/a/v1/a.cue"))
	for _, want := range []string{"// Code generated. DO NOT EDIT.", "// Top is the root.", "#Top:", "// Embedded is embedded.",
		"#Embedded:", "#Nested:", "_hidden:", `bb "ex.com/b"`} {
		if !strings.Contains(a, want) {
			t.Errorf("a.cue lacks %q:\n%s", want, a)
		}
	}
	for _, gone := range []string{"#Unused:", "#Unused2: strings", `"ex.com/c"`, `"strings"`} {
		if strings.Contains(a, gone) {
			t.Errorf("a.cue still has %q:\n%s", gone, a)
		}
	}
	b := read(t, filepath.Join(dir, "cue.mod/gen/ex.com/b/b.cue"))
	if !strings.Contains(b, "#B:") || !strings.Contains(b, "#FromA:") || strings.Contains(b, "#NotUsed") {
		t.Errorf("b.cue:\n%s", b)
	}
	for _, p := range []string{"cue.mod/gen/ex.com/a/v1/other.cue", "cue.mod/gen/ex.com/c"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s not deleted (%v)", p, err)
		}
	}

	// The pruned module still builds, to the same value.
	insts := load.Instances([]string{"."}, &load.Config{Dir: dir})
	if err := insts[0].Err; err != nil {
		t.Fatal(err)
	}
	v := cuecontext.New().BuildInstance(insts[0])
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"out":{"e":1,"n":{"q":"q"},"s":[{"x":1}],"local":{}},"y":"y"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}

	// A second run changes nothing.
	st, err = prune(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.rewritten != 0 || st.deleted != 0 || st.keptDecls != 6 {
		t.Errorf("second run: %+v", st)
	}
	if a2 := read(t, filepath.Join(dir, "cue.mod/gen/ex.com/a/v1/a.cue")); a2 != a {
		t.Errorf("second run rewrote a.cue:\n%s", a2)
	}
}
