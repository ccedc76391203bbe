package gen

import (
	"slices"
	"sort"
	"testing"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// TestPolicyNamesAgree: the policies a target can waive in the schema
// (#PolicyID in cue/values.cue) are exactly vet's Policies.
func TestPolicyNamesAgree(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	def := ev.Instance().LookupPath(cue.ParsePath("#PolicyID"))
	op, args := def.Expr()
	if op != cue.OrOp {
		t.Fatalf("#PolicyID is not a disjunction of names: %v", def)
	}
	var schema []string
	for _, a := range args {
		s, err := a.String()
		if err != nil {
			t.Fatalf("#PolicyID: %v", err)
		}
		schema = append(schema, s)
	}
	var goNames []string
	for id := range vet.Policies {
		goNames = append(goNames, id)
	}
	sort.Strings(schema)
	sort.Strings(goNames)
	if !slices.Equal(schema, goNames) {
		t.Fatalf("#PolicyID = %v, vet.Policies = %v", schema, goNames)
	}
}
