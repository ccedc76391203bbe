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

// TestProjectPermitsAsArgoCD: destinations are matched as Argo CD v3.6
// matches them (cases from its TestAppProject_IsDestinationPermitted, and
// the one that refused the generated Application before it named its
// namespace).
func TestProjectPermitsAsArgoCD(t *testing.T) {
	const svc = "https://kubernetes.default.svc"
	for _, c := range []struct {
		name string
		proj []destination
		app  destination
		want bool
	}{
		{"server and namespace match", []destination{{Server: svc, Namespace: "default"}}, destination{Server: svc, Namespace: "default"}, true},
		{"namespace does not match", []destination{{Server: svc, Namespace: "default"}}, destination{Server: svc, Namespace: "kube-system"}, false},
		{"server does not match", []destination{{Server: "https://my-cluster", Namespace: "default"}}, destination{Server: svc, Namespace: "default"}, false},
		{"wildcard namespace", []destination{{Server: svc, Namespace: "*"}}, destination{Server: svc, Namespace: "kube-system"}, true},
		{"wildcard server", []destination{{Server: "https://*.default.svc", Namespace: "default"}}, destination{Server: svc, Namespace: "default"}, true},
		{"wildcard server mismatch", []destination{{Server: "https://team1-*", Namespace: "default"}}, destination{Server: "https://test2-dev-cluster", Namespace: "default"}, false},
		{"namespace prefix", []destination{{Server: svc, Namespace: "test-*"}}, destination{Server: svc, Namespace: "test-foo"}, true},
		{"namespace prefix without suffix", []destination{{Server: svc, Namespace: "test-*"}}, destination{Server: svc, Namespace: "test"}, false},
		{"by name", []destination{{Namespace: "*", Name: "test"}}, destination{Name: "test", Namespace: "test"}, true},
		{"by other name", []destination{{Namespace: "*", Name: "test2"}}, destination{Name: "test", Namespace: "test"}, false},
		{"negated namespaces", []destination{
			{Name: "host-cluster", Server: svc, Namespace: "!{kube-system,argocd}"},
			{Name: "destination-cluster-01", Server: "https://eks.example", Namespace: "*"},
		}, destination{Server: "https://eks.example", Namespace: "kube-system"}, true},
		{"negated namespace refuses", []destination{{Server: svc, Namespace: "!kube-system"}}, destination{Server: svc, Namespace: "kube-system"}, false},
		// What gvisorgen emitted before: no namespace, against its own project.
		{"empty namespace", []destination{{Server: "*", Namespace: "gvisor-system"}}, destination{Server: svc}, false},
		{"generated", []destination{{Server: "*", Namespace: "gvisor-system"}}, destination{Server: svc, Namespace: "gvisor-system"}, true},
		{"ApplicationSet template", []destination{{Server: "*", Namespace: "gvisor-system"}}, destination{Server: "{{ .server }}", Namespace: "gvisor-system"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := appProject{}
			p.Spec.Destinations = c.proj
			if got := p.permits(c.app); got != c.want {
				t.Errorf("permits(%v) = %v, want %v", c.app, got, c.want)
			}
		})
	}
}

// TestProjectPermitsSourceAsArgoCD: sourceRepos as Argo CD's IsSourcePermitted
// matches them (cases from its app_project_types_test.go): "/" separates, so
// a "*" covers one path segment; "!" patterns refuse.
func TestProjectPermitsSourceAsArgoCD(t *testing.T) {
	for _, c := range []struct {
		repos []string
		repo  string
		want  bool
	}{
		{[]string{"https://github.com/gvisorgen/gvisorgen.git"}, "https://github.com/gvisorgen/gvisorgen.git", true},
		{[]string{"https://github.com/gvisorgen/gvisorgen.git"}, "oci://ghcr.io/acme/gvisor/kind", false},
		{[]string{"*"}, "oci://ghcr.io/acme/gvisor/kind", true},
		{[]string{"oci://ghcr.io/acme/gvisor/*"}, "oci://ghcr.io/acme/gvisor/kind", true},
		{[]string{"oci://ghcr.io/acme/gvisor/*"}, "oci://ghcr.io/acme/gvisor/team/kind", false},
		{[]string{"oci://ghcr.io/acme/**"}, "oci://ghcr.io/acme/gvisor/team/kind", true},
		{[]string{"*", "!oci://ghcr.io/acme/gvisor/kind"}, "oci://ghcr.io/acme/gvisor/kind", false},
		{[]string{"*", "!oci://ghcr.io/acme/gvisor/kind"}, "oci://ghcr.io/acme/gvisor/eks", true},
	} {
		p := appProject{}
		p.Spec.SourceRepos = c.repos
		if got := p.permitsSource(c.repo); got != c.want {
			t.Errorf("sourceRepos %v: permitsSource(%s) = %v, want %v", c.repos, c.repo, got, c.want)
		}
	}
}

// TestApplicationWithoutNamespaceRefused: an Application (or the
// ApplicationSet's template) whose destination the project does not allow
// is refused by generate, naming the target and the project's destinations.
func TestApplicationWithoutNamespaceRefused(t *testing.T) {
	out, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"}})
	if err != nil {
		t.Fatal(err)
	}
	res := *out.Result
	strip := func(o eval.Object, path ...string) eval.Object {
		var m map[string]any
		if err := json.Unmarshal(o.JSON, &m); err != nil {
			t.Fatal(err)
		}
		d := m
		for _, k := range path {
			d = d[k].(map[string]any)
		}
		delete(d, "namespace")
		o.JSON, _ = json.Marshal(m)
		return o
	}
	tg := res.Targets[0]
	tg.Delivery = append([]eval.Object(nil), tg.Delivery...)
	for i, o := range tg.Delivery {
		if o.Kind == "Application" {
			tg.Delivery[i] = strip(o, "spec", "destination")
		}
	}
	res.Targets = []eval.Target{tg}
	res.Fleet = append([]eval.Object(nil), res.Fleet...)
	for i, o := range res.Fleet {
		if o.Kind == "ApplicationSet" {
			res.Fleet[i] = strip(o, "spec", "template", "spec", "destination")
		}
	}
	probs, err := projectProblems(&res)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 2 || !strings.Contains(probs[0], `target kind: the Application's destination {cluster "https://kubernetes.default.svc", namespace ""}`) ||
		!strings.Contains(probs[1], "ApplicationSet gvisor: the template's destination") || !strings.Contains(probs[1], `namespace "gvisor-system"`) {
		t.Fatalf("want the Application and the ApplicationSet refused, got %q", probs)
	}
}
