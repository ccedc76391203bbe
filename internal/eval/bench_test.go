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
	values := func() (cue.Value, []byte) {
		v := e.schema.Unify(gke.val).Unify(e.profile.LookupPath(cue.ParsePath("gke"))).FillPath(cue.ParsePath("target"), gke.name)
		if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
			b.Fatal(err)
		}
		_, nameless, err := exportValues(v)
		if err != nil {
			b.Fatal(err)
		}
		return v, nameless
	}
	b.Run("values", func(b *testing.B) {
		for range b.N {
			values()
		}
	})
	v, nameless := values()
	for _, part := range []struct {
		name string
		def  cue.Value
		// named: the part gets the name; the others get the nameless
		// values, compiled from JSON as shared() does.
		named bool
	}{{"render", e.render, false}, {"delivery", e.deliver, true}, {"smoke", e.smoke, false}} {
		b.Run(part.name, func(b *testing.B) {
			for range b.N {
				in := v
				if !part.named {
					in = e.ctx.CompileBytes(nameless)
				}
				if _, err := renderPart(part.def, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
