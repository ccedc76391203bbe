// Package vet validates rendered objects against the Kubernetes Go types
// (unknown fields rejected) and warns about risky values.
package vet

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// Report is the outcome of vetting.
type Report struct {
	Objects  int
	Errors   []string
	Warnings []string
}

// types maps apiVersion/kind to a constructor of its Go type.
var types = map[string]func() any{
	"v1/Namespace":                                    func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount":                               func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                                    func() any { return &corev1.ConfigMap{} },
	"v1/Pod":                                          func() any { return &corev1.Pod{} },
	"v1/PersistentVolumeClaim":                        func() any { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/DaemonSet":                               func() any { return &appsv1.DaemonSet{} },
	"node.k8s.io/v1/RuntimeClass":                     func() any { return &nodev1.RuntimeClass{} },
	"storage.k8s.io/v1/StorageClass":                  func() any { return &storagev1.StorageClass{} },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() any { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any { return &rbacv1.ClusterRoleBinding{} },
}

// Object decodes one object strictly into its Kubernetes type.
func Object(apiVersion, kind string, data []byte) error {
	mk, ok := types[apiVersion+"/"+kind]
	if !ok {
		return fmt.Errorf("unknown type %s %s", apiVersion, kind)
	}
	if err := yaml.UnmarshalStrict(data, mk()); err != nil {
		return err
	}
	return nil
}

// Targets vets every object of every target and the targets' values.
func Targets(ts []eval.Target) Report {
	var r Report
	for _, t := range ts {
		// Delivery objects (Argo CD, Flux) have no Go types here: the CUE types
		// generated from their CRDs check them during evaluation.
		for _, o := range append(append([]eval.Object{}, t.Objects...), t.Smoke...) {
			r.Objects++
			if err := Object(o.APIVersion, o.Kind, o.JSON); err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s %s: %v", t.Name, o.Kind, o.Name, err))
			}
		}
		// The cross-field rules and the policies, on every object the target
		// writes (overlays/, smoke/ and delivery/).
		for _, o := range append(append(append([]eval.Object{}, t.Objects...), t.Smoke...), t.Delivery...) {
			for _, pr := range Check(o.APIVersion, o.Kind, o.JSON) {
				r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s %s: %s", t.Name, o.Kind, o.Name, pr))
			}
		}
		r.Warnings = append(r.Warnings, warnings(t)...)
	}
	return r
}

// warnings flags values that evaluate fine but weaken a real cluster.
func warnings(t eval.Target) []string {
	var out []string
	str := func(p string) string {
		s, _ := t.Values.LookupPath(cue.ParsePath(p)).String()
		return s
	}
	enabled, _ := t.Values.LookupPath(cue.ParsePath("gvisor.enabled")).Bool()
	if !enabled {
		return nil
	}
	pins := t.Values.LookupPath(cue.ParsePath("gvisor.release.sha512"))
	n := 0
	if it, err := pins.Fields(); err == nil {
		for it.Next() {
			n++
		}
	}
	if n == 0 && t.Profile != "kind" {
		out = append(out, fmt.Sprintf("target %s: gvisor.release.sha512 pins no digest: the installer trusts the .sha512 published beside the artifact, which only detects corruption (busybox wget does not verify TLS)", t.Name))
	}
	if _, err := t.Values.LookupPath(cue.ParsePath("gvisor.installer.image.digest")).String(); err != nil && t.Profile != "kind" {
		out = append(out, fmt.Sprintf("target %s: gvisor.installer.image has no digest: the tag %q can move under a committed tree", t.Name, str("gvisor.installer.image.tag")))
	}
	return out
}
