package eval

import (
	"testing"

	"cuelang.org/go/cue/cuecontext"
)

// TestShippedExample: the rule that lets a run fold a target's warnings
// (shippedExample), one case per clause.
func TestShippedExample(t *testing.T) {
	ctx := cuecontext.New()
	for _, c := range []struct {
		name, decl, profile string
		want                bool
	}{
		{"kind", `profile: "kind"`, "kind", true},
		{"gke", `profile: "gke", policy: waive: {"unpinned-release": "example target: run pin", "unpinned-image": "example target: x"}`, "gke", true},
		// Added: another name, even with an example's declaration.
		{"dev", `profile: "kind"`, "kind", false},
		{"prod", `profile: "gke", policy: waive: "unpinned-image": "example target: x"`, "gke", false},
		// Changed: any other value, or a waiver of the user's.
		{"kind", `profile: "kind", gvisor: version: "20250101"`, "kind", false},
		{"kind", `profile: "kind", gvisor: {}`, "kind", false},
		{"gke", `profile: "gke", policy: waive: "unpinned-image": "trial cluster, ticket 42"`, "gke", false},
		{"gke", `profile: "gke", policy: {waive: "unpinned-image": "example target: x", requirePins: false}`, "gke", false},
		{"kind", `profile: "kind", storageClass?: {}`, "kind", false},
	} {
		v := ctx.CompileString(c.decl)
		if v.Err() != nil {
			t.Fatalf("%s: %v", c.decl, v.Err())
		}
		if got := shippedExample(source{name: c.name, val: v}, c.profile); got != c.want {
			t.Errorf("target %s {%s}: shippedExample = %v, want %v", c.name, c.decl, got, c.want)
		}
	}

	// The module's own targets, evaluated: the four examples as shipped; any
	// -f or --set makes every target the user's.
	for _, sets := range [][]string{nil, {"gvisor.installer.image.pullPolicy=Always"}} {
		ev, err := Load(Options{Root: root, Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ev.Evaluate()
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range res.Targets {
			if tg.Example != (sets == nil) {
				t.Errorf("--set %v: target %s: Example = %v", sets, tg.Name, tg.Example)
			}
		}
	}
}
