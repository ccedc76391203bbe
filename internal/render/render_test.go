package render

import (
	"bytes"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestOrderCacheMatchesKustomize: an overlay rendered from the order cache is
// byte for byte what the in-process kustomize build gives, for every target
// and for a second target of the same shape (the cache hit).
func TestOrderCacheMatchesKustomize(t *testing.T) {
	for _, sets := range [][]string{nil, {"gvisor.enabled=false"}, {"storageClass.create=false", "gvisor.nodeSelector.pool=x"}} {
		ev, err := eval.Load(eval.Options{Root: "../..", Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ev.Evaluate()
		if err != nil {
			t.Fatal(err)
		}
		cached := NewRenderer()
		always := &Renderer{orders: map[string][]int{}, Always: true}
		for _, tg := range res.Targets {
			for round := 0; round < 2; round++ {
				ao, err := cached.Target(t.TempDir(), tg)
				if err != nil {
					t.Fatal(err)
				}
				bo, err := always.Target(t.TempDir(), tg)
				if err != nil {
					t.Fatal(err)
				}
				a, b := ao.Files, bo.Files
				if len(a) != len(b) {
					t.Fatalf("%v %s: %d files vs %d", sets, tg.Name, len(a), len(b))
				}
				for i := range a {
					if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
						t.Errorf("%v %s round %d: %s differs from kustomize's %s", sets, tg.Name, round, a[i].Path, b[i].Path)
					}
				}
			}
		}
		if len(cached.orders) == 0 {
			t.Errorf("%v: the order cache was never filled", sets)
		}
	}
}

func TestFileName(t *testing.T) {
	for _, c := range []struct{ kind, name, ns, want string }{
		{"DaemonSet", "runsc-installer", "", "daemonset-runsc-installer.yaml"},
		{"RuntimeClass", "gvisor", "", "runtimeclass-gvisor.yaml"},
		{"ConfigMap", "x", "gvisor-system", "configmap-gvisor-system-x.yaml"},
	} {
		if got := FileName(c.kind, c.name, c.ns); got != c.want {
			t.Errorf("FileName(%s, %s, %s) = %s, want %s", c.kind, c.name, c.ns, got, c.want)
		}
	}
}
