package gen

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestAppProjectAllowsWhatIsEmitted: every object of every committed target
// is of a kind, and in a namespace, that the generated AppProject allows, and
// every kind the project allows is emitted by some target (no allow-list
// entry without a use).
func TestAppProjectAllowsWhatIsEmitted(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	var proj appProject
	for _, o := range out.Result.Fleet {
		if o.Kind == "AppProject" {
			if err := json.Unmarshal(o.JSON, &proj); err != nil {
				t.Fatal(err)
			}
		}
	}
	if proj.Metadata.Name == "" {
		t.Fatal("no AppProject in delivery/")
	}
	allowed := map[groupKind]bool{}
	for _, gk := range append(proj.Spec.ClusterResourceWhitelist, proj.Spec.NamespaceResourceWhitelist...) {
		allowed[gk] = false
	}
	for _, tg := range out.Result.Targets {
		for _, o := range tg.Objects {
			allowed[groupKind{groupOf(o.APIVersion), o.Kind}] = true
		}
	}
	for gk, used := range allowed {
		if !used {
			t.Errorf("the AppProject allows %v, which no target emits", gk)
		}
	}
	if probs, err := projectProblems(out.Result); err != nil || len(probs) > 0 {
		t.Fatalf("the committed targets break their own project: %v %v", err, probs)
	}
}

// TestNewKindNotAllowedFails: an object of a kind the project does not
// allow (as a new kind in #Render without an #OverlayKinds entry would be,
// were CUE not to refuse it first) is refused, naming the one list to extend.
func TestNewKindNotAllowedFails(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"}})
	if err != nil {
		t.Fatal(err)
	}
	res := *out.Result
	tg := res.Targets[0]
	tg.Objects = append(append([]eval.Object(nil), tg.Objects...),
		eval.Object{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Name: "x", Namespace: "gvisor-system"})
	res.Targets = []eval.Target{tg}
	probs, err := projectProblems(&res)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || !strings.Contains(probs[0], "Role x is not allowed") || !strings.Contains(probs[0], "#OverlayKinds") {
		t.Fatalf("want one problem naming Role x and #OverlayKinds, got %q", probs)
	}
}

// TestApplicationSetTemplateIsTheApplication: the ApplicationSet's template
// and each target's Application carry the same finalizers, project, sync
// options, retry and automation (#ArgoApp rendered twice).
func TestApplicationSetTemplateIsTheApplication(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	type app struct {
		Metadata struct {
			Finalizers []string `json:"finalizers"`
		} `json:"metadata"`
		Spec struct {
			Project    string `json:"project"`
			SyncPolicy any    `json:"syncPolicy"`
		} `json:"spec"`
	}
	var set struct {
		Spec struct {
			Template app `json:"template"`
		} `json:"spec"`
	}
	for _, o := range out.Result.Fleet {
		if o.Kind == "ApplicationSet" {
			if err := json.Unmarshal(o.JSON, &set); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := set.Spec.Template
	if len(want.Metadata.Finalizers) == 0 || want.Spec.SyncPolicy == nil {
		t.Fatalf("ApplicationSet template without finalizer or syncPolicy: %+v", want)
	}
	n := 0
	for _, tg := range out.Result.Targets {
		for _, o := range tg.Delivery {
			if o.Kind != "Application" {
				continue
			}
			var got app
			if err := json.Unmarshal(o.JSON, &got); err != nil {
				t.Fatal(err)
			}
			n++
			if !reflect.DeepEqual(got.Metadata.Finalizers, want.Metadata.Finalizers) ||
				got.Spec.Project != want.Spec.Project || !reflect.DeepEqual(got.Spec.SyncPolicy, want.Spec.SyncPolicy) {
				t.Errorf("target %s: Application differs from the ApplicationSet's template:\n got %+v\nwant %+v", tg.Name, got, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Application")
	}
}
