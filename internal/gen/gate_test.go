package gen

import (
	"cuelang.org/go/cue"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// gateKinds are the readiness gate's objects by kind, in the order they must
// be applied: the policy and its binding before the grant.
var gateKinds = []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole", "ClusterRoleBinding"}

type gateObject struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Scheduling struct {
		NodeSelector map[string]string `json:"nodeSelector"`
	} `json:"scheduling"`
	Spec struct {
		MatchConditions []struct{ Expression string } `json:"matchConditions"`
		Variables       []struct{ Name, Expression string }
		Template        struct {
			Spec struct {
				InitContainers []struct {
					Name string
					Args []string
				} `json:"initContainers"`
				Volumes []struct{ Name string }
			}
		}
	} `json:"spec"`
	Subjects []struct{ Name, Namespace string }
}

func gateObjects(t *testing.T, objs []eval.Object) map[string]gateObject {
	t.Helper()
	out := map[string]gateObject{}
	for _, o := range objs {
		var g gateObject
		if err := json.Unmarshal(o.JSON, &g); err != nil {
			t.Fatal(err)
		}
		out[o.Kind] = g
	}
	return out
}

// TestReadinessGate: with the gate on (the default), every committed target
// emits the policy, its binding and the grant, the policy and binding in an
// earlier Argo CD sync wave than the grant and before it in kustomize's
// output, the grant before the DaemonSet; the policy matches only the
// installer's account and names both labels; label-node is the last init
// container and sets both labels (the version the DaemonSet installs); the
// RuntimeClass selects the gate, merged with a target's own scheduling.
// Turned off, none of it is emitted; in uninstall mode unlabel-node is first.
func TestReadinessGate(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	const gate, version = "node-restriction.kubernetes.io/gvisor-runsc", "node-restriction.kubernetes.io/gvisor-runsc-version"
	for k, want := range map[string]string{"#GateLabels.ready": gate, "#GateLabels.version": version} {
		if got, err := ev.Instance().LookupPath(cue.ParsePath(k)).String(); err != nil || got != want {
			t.Fatalf("cue/ %s = %q (%v), want %s", k, got, err, want)
		}
	}
	out, err := Build(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	wave := map[string]string{"ValidatingAdmissionPolicy": "-2", "ValidatingAdmissionPolicyBinding": "-2",
		"ClusterRole": "-1", "ClusterRoleBinding": "-1", "DaemonSet": ""}
	for _, tg := range out.Result.Targets {
		objs := gateObjects(t, tg.Objects)
		for kind, w := range wave {
			o, ok := objs[kind]
			if !ok {
				t.Errorf("%s: no %s", tg.Name, kind)
				continue
			}
			if got := o.Metadata.Annotations["argocd.argoproj.io/sync-wave"]; got != w {
				t.Errorf("%s: %s in sync wave %q, want %q", tg.Name, kind, got, w)
			}
		}
		pol := objs["ValidatingAdmissionPolicy"]
		if len(pol.Spec.MatchConditions) != 1 || pol.Spec.MatchConditions[0].Expression != "request.userInfo.username == 'system:serviceaccount:gvisor-system:runsc-installer'" {
			t.Errorf("%s: the policy does not match exactly the installer's account: %+v", tg.Name, pol.Spec.MatchConditions)
		}
		if s := objs["ClusterRoleBinding"].Subjects; len(s) != 1 || s[0].Name != "runsc-installer" || s[0].Namespace != "gvisor-system" {
			t.Errorf("%s: the grant's subjects: %+v", tg.Name, s)
		}
		keysOK := false
		for _, v := range pol.Spec.Variables {
			keysOK = keysOK || v.Name == "gateKeys" && v.Expression == "['"+gate+"', '"+version+"']"
		}
		if !keysOK {
			t.Errorf("%s: the policy's gateKeys are not the two labels: %+v", tg.Name, pol.Spec.Variables)
		}
		ics := objs["DaemonSet"].Spec.Template.Spec.InitContainers
		last := ics[len(ics)-1]
		if last.Name != "label-node" || !slices.Contains(last.Args, gate+"=true") || !slices.Contains(last.Args, "$(NODE_NAME)") ||
			!slices.ContainsFunc(last.Args, func(a string) bool { return strings.HasPrefix(a, version+"=20") }) {
			t.Errorf("%s: the last init container is not label-node setting both labels: %+v", tg.Name, last)
		}
		if f := clientFlags(last.Args); len(f) > 0 {
			t.Errorf("%s: label-node passes kubectl client flags %v: kubectl then ignores the in-cluster config", tg.Name, f)
		}
		if sel := objs["RuntimeClass"].Scheduling.NodeSelector; sel[gate] != "true" {
			t.Errorf("%s: the RuntimeClass does not select the gate: %v", tg.Name, sel)
		}
		// kustomize's output order.
		var order []string
		for _, f := range out.Files {
			if path.Dir(f.Path) == path.Join(layout.GeneratedDir, tg.Name) {
				order = append(order, strings.SplitN(path.Base(f.Path), "-", 2)[0])
			}
		}
		pos := func(k string) int { return slices.Index(order, strings.ToLower(k)) }
		for i := 1; i < len(gateKinds); i++ {
			if pos(gateKinds[i-1]) < 0 || pos(gateKinds[i-1]) > pos(gateKinds[i]) {
				t.Errorf("%s: kustomize order %v: %s not before %s", tg.Name, order, gateKinds[i-1], gateKinds[i])
			}
		}
		if pos("ClusterRoleBinding") > pos("DaemonSet") {
			t.Errorf("%s: kustomize order %v: the grant after the DaemonSet", tg.Name, order)
		}
	}

	// The seed's node-pool scheduling keeps its keys and gains the gate.
	pool, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"},
		Sets: []string{`gvisor.scheduling.nodeSelector."cloud.google.com/gke-nodepool"=sandbox-pool`}})
	if err != nil {
		t.Fatal(err)
	}
	sel := gateObjects(t, pool.Result.Targets[0].Objects)["RuntimeClass"].Scheduling.NodeSelector
	if len(sel) != 2 || sel["cloud.google.com/gke-nodepool"] != "sandbox-pool" || sel[gate] != "true" {
		t.Errorf("node-pool scheduling merged with the gate: %v", sel)
	}

	// Off: no gate object, no label container, no token volume, no gate in the RuntimeClass.
	off, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"}, Sets: []string{"gvisor.readinessGate.enabled=false"}})
	if err != nil {
		t.Fatal(err)
	}
	objs := gateObjects(t, off.Result.Targets[0].Objects)
	for _, k := range gateKinds {
		if _, ok := objs[k]; ok {
			t.Errorf("gate off: %s still emitted", k)
		}
	}
	spec := objs["DaemonSet"].Spec.Template.Spec
	for _, c := range spec.InitContainers {
		if strings.Contains(c.Name, "label") {
			t.Errorf("gate off: init container %s", c.Name)
		}
	}
	for _, v := range spec.Volumes {
		if v.Name == "api-token" {
			t.Error("gate off: the token volume is still there")
		}
	}
	if _, ok := objs["RuntimeClass"].Scheduling.NodeSelector[gate]; ok {
		t.Error("gate off: the RuntimeClass still selects the gate")
	}

	// Uninstall: the gate closes first; the grant and the policy stay for it.
	un, err := Build(eval.Options{Root: repoRoot, Only: []string{"kind"}, Sets: []string{"gvisor.installer.mode=uninstall"}})
	if err != nil {
		t.Fatal(err)
	}
	objs = gateObjects(t, un.Result.Targets[0].Objects)
	ics := objs["DaemonSet"].Spec.Template.Spec.InitContainers
	if len(ics) != 2 || ics[0].Name != "unlabel-node" || !slices.Equal(ics[0].Args[len(ics[0].Args)-2:], []string{gate + "-", version + "-"}) ||
		ics[1].Name != "uninstall-runsc" {
		t.Errorf("uninstall: init containers %+v, want unlabel-node (removing both labels) then uninstall-runsc", ics)
	}
	if f := clientFlags(ics[0].Args); len(f) > 0 {
		t.Errorf("uninstall: unlabel-node passes kubectl client flags %v: kubectl then ignores the in-cluster config", f)
	}
	for _, k := range gateKinds {
		if _, ok := objs[k]; !ok {
			t.Errorf("uninstall: no %s (unlabel-node needs it)", k)
		}
	}
}

// clientFlags are the flags in kubectl args other than label's own --overwrite. Any client-config flag
// (--request-timeout, --server, --token, --as, ...) makes kubectl's loader see a non-default config and skip the
// in-cluster one: it dials localhost:8080 (kubernetes/kubernetes#93474; the cluster e2e caught it).
func clientFlags(args []string) []string {
	var f []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") && a != "--overwrite" {
			f = append(f, a)
		}
	}
	return f
}
