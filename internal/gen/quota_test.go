package gen

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// TestPriorityQuota: every committed target (all use system-node-critical)
// carries the priority-class quota, scoped to its class, in the DaemonSet's
// namespace, in an earlier Argo CD sync wave and earlier in kustomize's
// output; priorityQuota.create: false and a class outside
// #CriticalPriorityClasses both omit it.
func TestPriorityQuota(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range out.Result.Targets {
		var q struct {
			Metadata struct {
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				ScopeSelector struct {
					MatchExpressions []struct {
						ScopeName string   `json:"scopeName"`
						Operator  string   `json:"operator"`
						Values    []string `json:"values"`
					} `json:"matchExpressions"`
				} `json:"scopeSelector"`
			} `json:"spec"`
		}
		found := false
		for _, o := range tg.Objects {
			if o.Kind == "ResourceQuota" {
				found = true
				if err := json.Unmarshal(o.JSON, &q); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !found {
			t.Errorf("%s: no priority-class ResourceQuota", tg.Name)
			continue
		}
		m := q.Spec.ScopeSelector.MatchExpressions
		if q.Metadata.Namespace != "gvisor-system" || len(m) != 1 || m[0].ScopeName != "PriorityClass" || m[0].Operator != "In" ||
			len(m[0].Values) != 1 || m[0].Values[0] != "system-node-critical" {
			t.Errorf("%s: quota not scoped to the installer's class in its namespace: %+v", tg.Name, q)
		}
		if w := q.Metadata.Annotations["argocd.argoproj.io/sync-wave"]; w != "-1" {
			t.Errorf("%s: quota in sync wave %q, want -1 (the DaemonSet's is 0)", tg.Name, w)
		}
		// kustomize's output order (generated/<t>/ files in build order).
		var order []string
		for _, f := range out.Files {
			if path.Dir(f.Path) == path.Join(layout.GeneratedDir, tg.Name) {
				order = append(order, path.Base(f.Path))
			}
		}
		iq, id := -1, -1
		for i, n := range order {
			if strings.HasPrefix(n, "resourcequota-") {
				iq = i
			}
			if strings.HasPrefix(n, "daemonset-") {
				id = i
			}
		}
		if iq < 0 || id < 0 || iq > id {
			t.Errorf("%s: kustomize order %v does not put the quota before the DaemonSet", tg.Name, order)
		}
	}
	for _, set := range []string{"gvisor.installer.priorityQuota.create=false", "gvisor.installer.priorityClassName=gvisor-installer"} {
		out, err := Build(eval.Options{Root: repoRoot, Only: []string{"gke"}, Sets: []string{set}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Result.Targets[0].Objects {
			if o.Kind == "ResourceQuota" {
				t.Errorf("--set %s: the quota is still emitted", set)
			}
		}
	}
}
