package eval

import (
	"testing"

	"cuelang.org/go/cue"
)

// BenchmarkTargetParts is what one target costs in CUE, part by part: its
// values (schema, profile, validation, export), and each of #Render, #Delivery
// and #Smoke rendered from them. A target that shares its nameless parts pays
// values + #Delivery; one that shares nothing pays all four.
func BenchmarkTargetParts(b *testing.B) {
	e, err := Load(Options{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	ts, err := e.targets()
	if err != nil {
		b.Fatal(err)
	}
	var gke source
	for _, t := range ts {
		if t.name == "gke" {
			gke = t
		}
	}
	values := func() cue.Value {
		v := e.schema.Unify(gke.val).Unify(e.profile.LookupPath(cue.ParsePath("gke"))).FillPath(cue.ParsePath("target"), gke.name)
		if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
			b.Fatal(err)
		}
		if _, _, err := exportValues(v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	b.Run("values", func(b *testing.B) {
		for range b.N {
			values()
		}
	})
	v := values()
	for _, part := range []struct {
		name string
		def  cue.Value
	}{{"render", e.render}, {"delivery", e.deliver}, {"smoke", e.smoke}} {
		b.Run(part.name, func(b *testing.B) {
			for range b.N {
				if _, err := renderPart(part.def, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
