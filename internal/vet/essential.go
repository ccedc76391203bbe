package vet

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// Ref names an object: its API group, kind, namespace and name.
type Ref struct {
	Group, Kind, Namespace, Name string
}

// RefOf names an object of apiVersion (group/version, or version for the
// core group).
func RefOf(apiVersion, kind, namespace, name string) Ref {
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = ""
	}
	return Ref{Group: group, Kind: kind, Namespace: namespace, Name: name}
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return fmt.Sprintf("%s %s (namespace %s)", r.Kind, r.Name, r.Namespace)
}

// essential are the kinds of object a target exists for: a patch may change
// them, but not remove, rename or move them (what syncs would then install
// nothing, or leave the installer's token unchecked), and a run refuses the
// output without them. Each says what it is, what breaks without it, and
// which value leaves it out on purpose. Not a waivable policy: the value
// that leaves it out says so in words a reviewer reads.
var essential = map[string]struct{ what, without, off string }{
	"apps/DaemonSet": {"the installer", "no node gets runsc",
		"gvisor.enabled: false (after a rollout with gvisor.installer.mode: uninstall)"},
	"node.k8s.io/RuntimeClass": {"what pods select gVisor by", "no pod runs in the sandbox",
		"gvisor.enabled: false"},
	"storage.k8s.io/StorageClass": {"the sandbox workspace class the values create", "claims that name it stay pending",
		"storageClass.create: false"},
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy": {"the readiness gate's admission policy", "the installer's token may change any node",
		"gvisor.readinessGate.enabled: false"},
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": {"what puts the readiness gate's admission policy in force", "the installer's token may change any node",
		"gvisor.readinessGate.enabled: false"},
}

// Essentials picks, from the objects a target's values emit, those the
// product is for: the installer DaemonSet in the installer namespace, the
// RuntimeClass, the StorageClass when the values create one, and the
// readiness gate's admission policy and binding when the gate is on. What
// the values leave out is not asked for.
func Essentials(objs []eval.Object) []Ref {
	var out []Ref
	for _, o := range objs {
		r := RefOf(o.APIVersion, o.Kind, o.Namespace, o.Name)
		if _, ok := essential[r.Group+"/"+r.Kind]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Missing says, for each of want that found lacks, that the output is not
// what the target is for: removed or renamed, or moved to another
// namespace. patches are the overlay's patch files, which kustomize keeps
// no record of: the message names those that mention the object (a
// `$patch: delete`, a JSON 6902 target), else all of them. An empty
// patches is output read from elsewhere (vet --manifests).
func Missing(target string, want, found []Ref, patches []tree.File) []string {
	have := map[Ref]bool{}
	for _, r := range found {
		have[r] = true
	}
	var out []string
	for _, w := range want {
		if have[w] {
			continue
		}
		e := essential[w.Group+"/"+w.Kind]
		var moved, other []string
		for _, r := range found {
			if r.Group != w.Group || r.Kind != w.Kind {
				continue
			}
			switch {
			case r.Name == w.Name:
				moved = append(moved, r.Namespace)
			case r.Namespace == w.Namespace && !slices.Contains(want, r):
				other = append(other, r.Name)
			}
		}
		how := "is missing"
		switch {
		case len(moved) > 0:
			how = "was moved to namespace " + strings.Join(moved, ", ")
		case len(other) > 0:
			how = fmt.Sprintf("is missing (renamed? the output holds %s %s)", w.Kind, strings.Join(other, ", "))
		}
		by := ""
		if len(patches) > 0 {
			by = " after the patches " + strings.Join(suspects(w, patches), ", ")
		}
		out = append(out, fmt.Sprintf("target %s: %s %s%s: it is %s, without it %s; a patch may change it, not remove, rename or move it: to leave it out, set %s in the target's values",
			target, w, how, by, e.what, e.without, e.off))
	}
	return out
}

// suspects are the patch files that mention the object by kind and name,
// or, when none does (a Component's namespace or name transformer), all of
// them.
func suspects(r Ref, patches []tree.File) []string {
	var all, named []string
	for _, p := range patches {
		all = append(all, p.Path)
		if bytes.Contains(p.Data, []byte(r.Kind)) && bytes.Contains(p.Data, []byte(r.Name)) {
			named = append(named, p.Path)
		}
	}
	if len(named) > 0 {
		return named
	}
	return all
}

// patchNames are the patch files' paths.
func patchNames(patches []tree.File) []string {
	out := make([]string, len(patches))
	for i, p := range patches {
		out[i] = p.Path
	}
	return out
}
