// Package vet validates rendered objects against the Kubernetes Go types
// (unknown fields rejected) and warns about risky values.
package vet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// Report is the outcome of vetting.
type Report struct {
	Objects  int
	Errors   []string
	Warnings []warn.Warning
	// Syntax are files that are not YAML at all (vet --manifests): no
	// object of theirs was read.
	Syntax []string
	// Found are the objects read (vet --manifests), for Missing.
	Found []Ref
	// Waived are the waivers that let a finding through, by target and
	// policy; WaiverNotes reports them.
	Waived map[[2]string]bool
}

// types maps apiVersion/kind to a constructor of its Go type.
var types = map[string]func() any{
	"v1/Namespace":                                    func() any { return &corev1.Namespace{} },
	"v1/ResourceQuota":                                func() any { return &corev1.ResourceQuota{} },
	"v1/ServiceAccount":                               func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                                    func() any { return &corev1.ConfigMap{} },
	"v1/Pod":                                          func() any { return &corev1.Pod{} },
	"v1/PersistentVolumeClaim":                        func() any { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/DaemonSet":                               func() any { return &appsv1.DaemonSet{} },
	"node.k8s.io/v1/RuntimeClass":                     func() any { return &nodev1.RuntimeClass{} },
	"storage.k8s.io/v1/StorageClass":                  func() any { return &storagev1.StorageClass{} },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() any { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any { return &rbacv1.ClusterRoleBinding{} },
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": func() any {
		return &admissionv1.ValidatingAdmissionPolicy{}
	},
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": func() any {
		return &admissionv1.ValidatingAdmissionPolicyBinding{}
	},
}

// Object decodes one object strictly into its Kubernetes type.
func Object(apiVersion, kind string, data []byte) error {
	mk, ok := types[apiVersion+"/"+kind]
	if !ok {
		return fmt.Errorf("unknown type %s %s", apiVersion, kind)
	}
	// data is JSON (CUE's export): decoded as such, strictly, as the YAML
	// path (sigs.k8s.io/yaml) would after converting it, at a fraction of the cost.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(mk()); err != nil {
		return err
	}
	return nil
}

// Targets vets every object of every target and the targets' values.
// Targets of a fleet share most of their objects byte for byte: each distinct
// object is vetted once.
func Targets(ts []eval.Target, f Facts) Report {
	var r Report
	// done[decode] holds the findings by the object's JSON.
	done := map[bool]map[string][]finding{true: {}, false: {}}
	// vetted returns the findings of one object; decode says whether the Go
	// types decode it (delivery objects have none here: the CUE types generated
	// from their CRDs check them during evaluation).
	vetted := func(o eval.Object, decode bool) []finding {
		if found, ok := done[decode][string(o.JSON)]; ok {
			return found
		}
		var found []finding
		if decode {
			if err := Object(o.APIVersion, o.Kind, o.JSON); err != nil {
				found = append(found, finding{msg: err.Error()})
			}
		}
		// The cross-field rules and the policies, on every object the target
		// writes (overlays/, smoke/ and delivery/).
		for _, pr := range Check(f, o.APIVersion, o.Kind, o.JSON) {
			found = append(found, finding{msg: pr.String(), policy: pr.Policy})
		}
		done[decode][string(o.JSON)] = found
		return found
	}
	for _, t := range ts {
		w := newWaiver(t.Name, Waivers(t.Values))
		for _, part := range []struct {
			objs   []eval.Object
			decode bool
		}{{t.Objects, true}, {t.Smoke, true}, {t.Delivery, false}} {
			for _, o := range part.objs {
				if part.decode {
					r.Objects++
				}
				for _, f := range vetted(o, part.decode) {
					if !w.waived(f.policy) {
						r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s %s: %s", t.Name, o.Kind, o.Name, f.msg))
					}
				}
			}
		}
		errs, warns := pinFindings(t)
		rerrs, rwarns := runscFindings(t)
		errs, warns = append(errs, rerrs...), append(warns, rwarns...)
		for _, f := range errs {
			if !w.waived(f.policy) {
				r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s%s", t.Name, f.msg, t.Where(f.field)))
			}
		}
		r.Warnings = append(r.Warnings, warns...)
		r.Warnings = append(r.Warnings, containerdFindings(t)...)
		w.record(&r)
	}
	return r
}

// finding is one problem of an object or a target, the policy it breaks, if
// any, and the values field it is about, if one (its line is shown).
type finding struct{ msg, policy, field string }

// Waivers reads policy.waive from a target's values (JSON): the waived
// policies and their reasons.
func Waivers(values []byte) map[string]string {
	var v struct {
		Policy struct {
			Waive map[string]string `json:"waive"`
		} `json:"policy"`
	}
	if json.Unmarshal(values, &v) != nil {
		return nil
	}
	return v.Policy.Waive
}

// waiver applies one target's waivers and remembers which it used.
type waiver struct {
	target string
	waive  map[string]string
	used   map[string]bool
}

func newWaiver(target string, waive map[string]string) *waiver {
	return &waiver{target: target, waive: waive, used: map[string]bool{}}
}

func (w *waiver) waived(policy string) bool {
	if policy == "" {
		return false
	}
	if _, ok := w.waive[policy]; ok {
		w.used[policy] = true
		return true
	}
	return false
}

func (w *waiver) record(r *Report) {
	for id := range w.used {
		if r.Waived == nil {
			r.Waived = map[[2]string]bool{}
		}
		r.Waived[[2]string{w.target, id}] = true
	}
}

// WaiverNotes says, for each waiver of each target, what it let through, or
// that nothing needs it: a waiver is visible in every run, not only in the
// pull request that added it.
func WaiverNotes(ts []eval.Target, r Report) []warn.Warning {
	var out []warn.Warning
	for _, t := range ts {
		waive := Waivers(t.Values)
		for _, id := range sortedKeys(waive) {
			w := warn.Warning{Target: t.Name, Subject: id, Example: t.Example}
			if r.Waived[[2]string{t.Name, id}] {
				w.Cause, w.Action = warn.Waived, waive[id]
				w.Message = fmt.Sprintf("target %s: policy %s waived (%s): %s", t.Name, id, Policies[id], waive[id])
			} else {
				w.Cause, w.Action = warn.UnusedWaiver, "remove the waiver"
				w.Message = fmt.Sprintf("target %s: policy %s is waived but nothing breaks it: remove the waiver", t.Name, id)
			}
			out = append(out, w)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
