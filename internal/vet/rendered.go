package vet

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// Merge adds another report's findings to r.
func (r *Report) Merge(o Report) {
	r.Objects += o.Objects
	r.Errors = append(r.Errors, o.Errors...)
	r.Warnings = append(r.Warnings, o.Warnings...)
	for k := range o.Waived {
		if r.Waived == nil {
			r.Waived = map[[2]string]bool{}
		}
		r.Waived[k] = true
	}
}

// Rendered vets a target's rendered files — kustomize's output over an
// overlay with the user's patches, which is what Argo CD or Flux syncs — with
// the same rules as the objects gvisorgen emits: a strict decoding into the
// Kubernetes types, the cross-field rules and the policies. An object of a
// type gvisorgen has no schema for (a patch may add one) gets a warning.
// kustomize keeps no record of which patch changed an object, so findings
// name every patch file of the overlay (patches: paths from the repository
// root, and contents). The target's waivers apply (the values' run already
// reported them). want are the objects the target exists for (Essentials of
// its values' objects): one the patches removed, renamed or moved to another
// namespace is an error (Missing).
func Rendered(facts Facts, target string, patches []tree.File, files []tree.File, waive map[string]string, want []Ref) Report {
	var r Report
	w := newWaiver(target, waive)
	by := fmt.Sprintf("after the patches %s", strings.Join(patchNames(patches), ", "))
	var found []Ref
	for _, f := range files {
		data, err := yaml.YAMLToJSON(tree.StripHeader(f.Data))
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s: %v (%s)", target, f.Path, err, by))
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("target %s: %s: %v (%s)", target, f.Path, err, by))
			continue
		}
		found = append(found, RefOf(meta.APIVersion, meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name))
		where := fmt.Sprintf("target %s: %s %s", target, meta.Kind, meta.Metadata.Name)
		if _, ok := types[meta.APIVersion+"/"+meta.Kind]; !ok {
			// Never an example's warning: only a patch adds such an object.
			r.Warnings = append(r.Warnings, warn.Warning{Cause: warn.UnknownType, Target: target, Subject: meta.APIVersion + " " + meta.Kind,
				Action:  "make sure the patches mean to add it",
				Message: fmt.Sprintf("%s: %s %s is not a type gvisorgen knows: not validated (%s)", where, meta.APIVersion, meta.Kind, by)})
			continue
		}
		r.Objects++
		if err := Object(meta.APIVersion, meta.Kind, data); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v (%s)", where, err, by))
			continue
		}
		for _, pr := range Check(facts, meta.APIVersion, meta.Kind, data) {
			if !w.waived(pr.Policy) {
				r.Errors = append(r.Errors, fmt.Sprintf("%s: %s (%s)", where, pr, by))
			}
		}
	}
	r.Errors = append(r.Errors, Missing(target, want, found, patches)...)
	w.record(&r)
	return r
}
