package schema_test

import (
	"testing"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// TestClassHandlerAgrees holds vet's copy of a class handler's shape
// (vet.IsClassHandler, which the runtimeclass-handler policy reads) to the
// schema's #ClassHandler on the shared corpus (strings/ClassHandler).
func TestClassHandlerAgrees(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	def := ev.Instance().LookupPath(cue.ParsePath("#ClassHandler"))
	n := 0
	for _, f := range corpus(t).Files {
		if f.Name != "strings/ClassHandler" {
			continue
		}
		for _, s := range corpusStrings(t, f) {
			n++
			cueOK := def.Unify(ev.Context().Encode(s)).Validate(cue.Concrete(true)) == nil
			if got := vet.IsClassHandler(s); got != cueOK {
				t.Errorf("%q: vet says %v, #ClassHandler says %v", s, got, cueOK)
			}
		}
	}
	if n < 10 {
		t.Fatalf("the corpus has %d class handlers", n)
	}
}
