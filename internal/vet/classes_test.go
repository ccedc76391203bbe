package vet

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestClassHandlerAgrees holds vet's copy of a class handler's shape
// (IsClassHandler, which the runtimeclass-handler policy reads) to the
// schema's #ClassHandler on the shared corpus (strings/ClassHandler).
func TestClassHandlerAgrees(t *testing.T) {
	root := filepath.Join("..", "..")
	ev, err := eval.Load(eval.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := txtar.ParseFile(filepath.Join(root, "internal/schema/testdata/corpus.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	def := ev.Instance().LookupPath(cue.ParsePath("#ClassHandler"))
	n := 0
	for _, f := range ar.Files {
		if f.Name != "strings/ClassHandler" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
			var s string
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			n++
			cueOK := def.Unify(ev.Context().Encode(s)).Validate(cue.Concrete(true)) == nil
			if got := IsClassHandler(s); got != cueOK {
				t.Errorf("%q: vet says %v, #ClassHandler says %v", s, got, cueOK)
			}
		}
	}
	if n < 10 {
		t.Fatalf("the corpus has %d class handlers", n)
	}
}
