package vet

import (
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestContainerdFindings: a release whose shim needs a newer containerd than the target's nodes may run is a
// warning naming both versions and the ways out; nodes at or above the floor, no floor, or gVisor disabled: nothing.
// The floor itself comes from CUE (ci/node's TestContainerdFloorAgrees holds it to the installer's check).
func TestContainerdFindings(t *testing.T) {
	val := func(enabled, floor, nodes string) eval.Target {
		return eval.Target{Name: "x", Values: []byte(`{"gvisor":{"enabled":` + enabled + `,"version":"20260801","release":{"containerdFloor":"` + floor + `"},"host":{"containerd":"` + nodes + `"}}}`)}
	}
	w := containerdFindings(val("true", "1.7.0", "1.6"))
	if len(w) != 1 {
		t.Fatalf("want one warning, got %+v", w)
	}
	for _, s := range []string{"target x: gVisor 20260801's shim needs containerd >= 1.7.0", "may run containerd 1.6", "upgrade those nodes' containerd", "pin gvisor.version", "set gvisor.host.containerd"} {
		if !strings.Contains(w[0].Message, s) {
			t.Errorf("warning lacks %q: %s", s, w[0].Message)
		}
	}
	for _, c := range [][3]string{{"true", "1.7.0", "1.7"}, {"true", "1.7.0", "2.0"}, {"true", "", "1.6"}, {"false", "1.7.0", "1.6"}, {"true", "1.7.0", "1.7.0"}} {
		if w := containerdFindings(val(c[0], c[1], c[2])); len(w) != 0 {
			t.Errorf("enabled %s floor %q nodes %s: want nothing, got %+v", c[0], c[1], c[2], w)
		}
	}
	for _, c := range []struct {
		a, b string
		less bool
	}{{"1.6", "1.7.0", true}, {"1.6.99", "1.7", true}, {"1.7", "1.7.0", false}, {"1.10.0", "1.9.9", false}, {"2.0", "1.7.0", false}, {"1.7.0", "1.7.1", true}} {
		if VersionLess(c.a, c.b) != c.less {
			t.Errorf("VersionLess(%s, %s) != %v", c.a, c.b, c.less)
		}
	}
}

// TestAdoptForeignRunscWarns: gvisor.host.adoptForeignRunsc true is a warning naming the target, what is then not
// applied and where docs/security.md explains it; false (the default) or gVisor disabled: nothing.
func TestAdoptForeignRunscWarns(t *testing.T) {
	val := func(enabled, adopt string) eval.Target {
		return eval.Target{Name: "x", Values: []byte(`{"gvisor":{"enabled":` + enabled + `,"version":"20260801","host":{"containerd":"2.0","adoptForeignRunsc":` + adopt + `}}}`)}
	}
	w := containerdFindings(val("true", "true"))
	if len(w) != 1 {
		t.Fatalf("want one warning, got %+v", w)
	}
	for _, s := range []string{"target x: gvisor.host.adoptForeignRunsc is true", "without gvisor.runsc.config", "runsc-isolation", "you vouch"} {
		if !strings.Contains(w[0].Message, s) {
			t.Errorf("warning lacks %q: %s", s, w[0].Message)
		}
	}
	for _, c := range [][2]string{{"true", "false"}, {"false", "true"}} {
		if w := containerdFindings(val(c[0], c[1])); len(w) != 0 {
			t.Errorf("enabled %s adopt %s: want nothing, got %+v", c[0], c[1], w)
		}
	}
}
