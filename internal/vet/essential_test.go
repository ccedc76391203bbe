package vet

import (
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// TestMissing: what a target exists for, removed, renamed or moved by a
// patch, is an error naming the target, the object and the patch files that
// mention it (else all of them); what the values leave out is not asked for.
func TestMissing(t *testing.T) {
	objs := []eval.Object{
		{APIVersion: "v1", Kind: "Namespace", Name: "gvisor-system"},
		{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "runsc-installer", Namespace: "gvisor-system"},
		{APIVersion: "node.k8s.io/v1", Kind: "RuntimeClass", Name: "gvisor"},
		{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "gvisor-workspace"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "scripts", Namespace: "gvisor-system"},
	}
	want := Essentials(objs)
	if len(want) != 3 {
		t.Fatalf("Essentials = %v, want the DaemonSet, the RuntimeClass and the StorageClass", want)
	}
	all := func() []Ref {
		var out []Ref
		for _, o := range objs {
			out = append(out, RefOf(o.APIVersion, o.Kind, o.Namespace, o.Name))
		}
		return out
	}
	without := func(kind string, add ...Ref) []Ref {
		var out []Ref
		for _, r := range all() {
			if r.Kind != kind {
				out = append(out, r)
			}
		}
		return append(out, add...)
	}
	patches := []tree.File{
		{Path: "overlays/t/patches/delete.yaml", Data: []byte("kind: DaemonSet\nmetadata: {name: runsc-installer}\n$patch: delete\n")},
		{Path: "overlays/t/patches/pool.yaml", Data: []byte("kind: RuntimeClass\nmetadata: {name: gvisor}\n")},
	}
	for _, c := range []struct {
		name    string
		found   []Ref
		patches []tree.File
		want    []string // one substring per message, in order
	}{
		{"all there", all(), patches, nil},
		// A ConfigMap is no essential: a patch may remove it.
		{"other object removed", without("ConfigMap"), patches, nil},
		{"deleted, the patch that names it", without("DaemonSet"), patches, []string{
			"target t: DaemonSet runsc-installer (namespace gvisor-system) is missing after the patches overlays/t/patches/delete.yaml: it is the installer, without it no node gets runsc; a patch may change it, not remove, rename or move it: to leave it out, set gvisor.enabled: false"}},
		{"moved", without("DaemonSet", RefOf("apps/v1", "DaemonSet", "other", "runsc-installer")), patches, []string{
			"DaemonSet runsc-installer (namespace gvisor-system) was moved to namespace other after the patches overlays/t/patches/delete.yaml:"}},
		{"renamed, no patch names it: all of them", without("StorageClass", RefOf("storage.k8s.io/v1", "StorageClass", "", "fast")), patches, []string{
			"StorageClass gvisor-workspace is missing (renamed? the output holds StorageClass fast) after the patches overlays/t/patches/delete.yaml, overlays/t/patches/pool.yaml: it is the sandbox workspace class the values create"}},
		{"another group's kind of that name is not it", without("RuntimeClass", RefOf("example.com/v1", "RuntimeClass", "", "gvisor")), nil, []string{
			"target t: RuntimeClass gvisor is missing: it is what pods select gVisor by"}},
	} {
		got := Missing("t", want, c.found, c.patches)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d messages, want %d: %q", c.name, len(got), len(c.want), got)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s:\n got %s\nwant %s", c.name, got[i], w)
			}
		}
	}
}
