//go:build apiserver

package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The readiness gate against the real API server (Node and RBAC authorizers,
// NodeRestriction admission, service-account token signing): the generated
// policy, its binding and the RBAC grant of target kind are applied for real,
// two Node objects and an installer pod bound to the first exist (no kubelet
// runs: the pod only anchors a pod-bound token, as the kubelet's projected
// volume would get one), and every request says which layer decided it.

// Files of generated/<mutationTarget>/ the gate needs.
const (
	gatePolicy  = "validatingadmissionpolicy-gvisorgen-runsc-installer-node-labels.yaml"
	gateBinding = "validatingadmissionpolicybinding-gvisorgen-runsc-installer-node-labels.yaml"
	gateRole    = "clusterrole-gvisorgen-runsc-installer-node-labels.yaml"
	gateGrant   = "clusterrolebinding-gvisorgen-runsc-installer-node-labels.yaml"
)

const (
	nodeA       = "gvz-node-a"
	nodeB       = "gvz-node-b"
	installerNS = "gvisor-system"
	installerSA = "runsc-installer"
	nodeClaim   = "authentication.kubernetes.io/node-name"
)

// Layers as the server's messages name them.
const (
	layerRBAC     = "RBAC"
	layerPolicy   = "ValidatingAdmissionPolicy"
	layerNodeRstr = "NodeRestriction"
	layerStrategy = "node strategy (status dropped)"
	layerNone     = "-"
)

// layerOf names the layer that refused a request, from the server's message.
func layerOf(msg string) string {
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy"):
		return layerPolicy
	case strings.Contains(msg, "is not allowed to modify labels") || strings.Contains(msg, "is not allowed to modify node"):
		return layerNodeRstr
	case strings.Contains(msg, "cannot patch resource") || strings.Contains(msg, "cannot delete resource") ||
		strings.Contains(msg, "cannot create resource") || strings.Contains(msg, "cannot get resource"):
		return layerRBAC
	}
	return "?"
}

// gateClient is a client-go clientset for a bearer token that verifies the
// API server's certificate (the self-signed bundle kube-apiserver wrote),
// as kubectl's in-cluster config verifies the cluster's CA.
func (c *cluster) gateClient(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{
		Host:            c.server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.caFile()},
		Timeout:         30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// caFile is the certificate bundle kube-apiserver generated for itself (the
// serving certificate and the CA that signed it).
func (c *cluster) caFile() string { return filepath.Join(c.dir, "certs", "apiserver.crt") }

// tokenKubeconfig writes a kubeconfig for a bearer token, TLS verified.
func (c *cluster) tokenKubeconfig(t *testing.T, name, token string) string {
	t.Helper()
	p := filepath.Join(c.dir, "kubeconfig-"+name)
	writeFile(t, p, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %s, certificate-authority: %s}
users:
- name: %s
  user: {token: %s}
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, c.server, c.caFile(), name, token, name))
	return p
}

// labelArgs are the args of the rendered DaemonSet's label-node container
// (the last init container), as the kubelet runs them on node: $(NODE_NAME)
// expanded.
func labelArgs(t *testing.T, root, node string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "generated", mutationTarget, ds))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers []corev1.Container `json:"initContainers"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	ics := d.Spec.Template.Spec.InitContainers
	if len(ics) == 0 || ics[len(ics)-1].Name != "label-node" {
		t.Fatalf("%s: the last init container is not label-node", ds)
	}
	last := ics[len(ics)-1]
	if len(last.Command) != 1 || last.Command[0] != "/bin/kubectl" {
		t.Fatalf("label-node runs %v, not /bin/kubectl", last.Command)
	}
	var out []string
	for _, a := range last.Args {
		out = append(out, strings.ReplaceAll(a, "$(NODE_NAME)", node))
	}
	return out
}

// gateLabels reads the two label keys and their values from label-node's args.
func gateLabels(t *testing.T, args []string) (keys []string, values map[string]string) {
	values = map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "node-restriction.kubernetes.io/") {
			keys = append(keys, k)
			values[k] = v
		}
	}
	if len(keys) != 2 {
		t.Fatalf("label-node sets %d node-restriction labels (%v), want 2", len(keys), args)
	}
	return keys, values
}

// kubectlAs runs the cached kubectl with a kubeconfig, HOME read-only-ish
// (a folder of its own), and returns its output and exit code.
func (c *cluster) kubectlAs(kubeconfig string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(c.dir, "home-"+filepath.Base(kubeconfig)))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		out = append(out, []byte(err.Error())...)
	}
	return strings.TrimSpace(string(out)), code
}

// installerPod creates an installer pod on node (no kubelet runs it): the anchor of a pod-bound token, as the
// kubelet's projected volume would get one.
func installerPod(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, name, node string) *corev1.Pod {
	t.Helper()
	pod, err := admin.CoreV1().Pods(installerNS).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: installerNS},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: installerSA, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "c", Image: "gvz-e2e/busybox:e2e"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the installer pod %s: %v", name, err)
	}
	return pod
}

// podRef is what the kubelet binds a projected token to.
func podRef(p *corev1.Pod) *authnv1.BoundObjectReference {
	return &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
}

// installerToken is a 600 s token of the installer's service account, bound to an object or (nil) to nothing.
func installerToken(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, bound *authnv1.BoundObjectReference) string {
	t.Helper()
	exp := int64(600)
	tr, err := admin.CoreV1().ServiceAccounts(installerNS).CreateToken(ctx, installerSA, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp, BoundObjectRef: bound}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", installerNS, installerSA, err)
	}
	return tr.Status.Token
}

// gateCase is one request and what must happen to it.
type gateCase struct {
	name  string
	allow bool
	layer string // the layer that decides (for allowed requests: who let it through, or what dropped it)
	says  string // a part of the server's message that names the rule
	do    func() (msg string, err error)
	after func() error // checks the node after the request
}

func testGate(t *testing.T, c *cluster, root string) {
	ctx := context.Background()
	dir := filepath.Join(root, "generated", mutationTarget)
	// The installer's namespace and account, then policy and binding, then the grant: the order of the output.
	for _, f := range []string{ns, sa, gatePolicy, gateBinding, gateRole, gateGrant} {
		if out, err := c.apply(ctx, filepath.Join(dir, f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
	admin := c.gateClient(t, c.token)

	// Two nodes, each with a label, an annotation and a status of its own.
	for _, n := range []string{nodeA, nodeB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels:      map[string]string{"example.com/pool": "sandbox"},
			Annotations: map[string]string{"example.com/owner": "platform"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n, err)
		}
	}
	// The installer pod of node A: the anchor of its pod-bound token.
	pod := installerPod(ctx, t, admin, "runsc-installer-a", nodeA)
	// What the kubelet asks for a projected token: bound to the pod.
	tokA := installerToken(ctx, t, admin, podRef(pod))
	// A token of the same account bound to nothing: no node claim.
	tokPlain := installerToken(ctx, t, admin, nil)
	installer, plain := c.gateClient(t, tokA), c.gateClient(t, tokPlain)

	// The claim the policy reads, as the server sees it.
	for _, w := range []struct {
		name string
		cs   *kubernetes.Clientset
		want []string
	}{{"pod-bound token", installer, []string{nodeA}}, {"unbound token", plain, nil}} {
		r, err := w.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectReview (%s): %v", w.name, err)
		}
		u := r.Status.UserInfo
		got := []string(u.Extra[nodeClaim])
		t.Logf("whoami (%s): %s, %s=%v", w.name, u.Username, nodeClaim, got)
		if u.Username != "system:serviceaccount:"+installerNS+":"+installerSA || strings.Join(got, ",") != strings.Join(w.want, ",") {
			t.Fatalf("%s: user %s with %s=%v, want %v", w.name, u.Username, nodeClaim, got, w.want)
		}
	}

	args := labelArgs(t, root, nodeA)
	keys, values := gateLabels(t, args)
	gate, version := keys[0], keys[1]
	kcA := c.tokenKubeconfig(t, "installer-a", tokA)

	// The policy is enforced once the server has loaded it: a dry-run
	// request it must deny, repeated until it is denied (bounded).
	probe := []byte(`{"metadata":{"labels":{"example.com/probe":"x"}}}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := installer.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && layerOf(err.Error()) == layerPolicy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy denies nothing after 30 s (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	patch := func(cs *kubernetes.Clientset, node, body string, sub ...string) func() (string, error) {
		return func() (string, error) {
			_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
			if err != nil {
				return err.Error(), err
			}
			return "patched", nil
		}
	}
	kubectl := func(kc string, a ...string) func() (string, error) {
		return func() (string, error) {
			out, code := c.kubectlAs(kc, a...)
			if code != 0 {
				return out, fmt.Errorf("kubectl exit %d", code)
			}
			return out, nil
		}
	}
	getNode := func(n string) *corev1.Node {
		node, err := admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node %s: %v", n, err)
		}
		return node
	}
	labelJSON := func(k, v string) string {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{k: v}}})
		return string(b)
	}
	unlabel := []string{"label", "node", nodeA, gate + "-", version + "-"}

	// The kubelet of node A, as the Node authorizer and NodeRestriction know it.
	kubelet := c.gateClient(t, c.kubeletToken)

	// Another service account with the same grant: the policy does not match it.
	const otherNS, otherSA = "gate-other", "node-admin"
	if out, err := c.kubectl(ctx, "create", "namespace", otherNS); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := c.kubectl(ctx, "-n", otherNS, "create", "serviceaccount", otherSA); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := c.kubectl(ctx, "create", "clusterrolebinding", "gate-other", "--clusterrole=gvisorgen-runsc-installer-node-labels",
		"--serviceaccount="+otherNS+":"+otherSA); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	exp := int64(600)
	otr, err := admin.CoreV1().ServiceAccounts(otherNS).CreateToken(ctx, otherSA, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := c.gateClient(t, otr.Status.Token)

	statusBefore := getNode(nodeA).Status
	cases := []gateCase{
		{name: "own node: the gate labels (label-node's kubectl, as rendered)", allow: true, layer: layerNone,
			do: kubectl(kcA, args...),
			after: func() error {
				l := getNode(nodeA).Labels
				if l[gate] != values[gate] || l[version] != values[version] || l["example.com/pool"] != "sandbox" {
					return fmt.Errorf("node A's labels are %v", l)
				}
				return nil
			}},
		{name: "own node: again (idempotent, nothing to change)", allow: true, layer: layerNone, do: kubectl(kcA, args...)},
		{name: "another node: the gate label", allow: false, layer: layerPolicy, says: "of node " + nodeA + " may label only that node, not " + nodeB,
			do: kubectl(kcA, labelArgs(t, root, nodeB)...),
			after: func() error {
				if v, ok := getNode(nodeB).Labels[gate]; ok {
					return fmt.Errorf("node B has %s=%s", gate, v)
				}
				return nil
			}},
		{name: "own node: another label", allow: false, layer: layerPolicy, says: "may change only the labels", do: patch(installer, nodeA, labelJSON("example.com/pool", "other"))},
		{name: "own node: a new label", allow: false, layer: layerPolicy, says: "may change only the labels", do: patch(installer, nodeA, labelJSON("example.com/extra", "x"))},
		{name: "own node: remove another label", allow: false, layer: layerPolicy, says: "may change only the labels", do: patch(installer, nodeA, `{"metadata":{"labels":{"example.com/pool":null}}}`)},
		{name: "own node: an annotation", allow: false, layer: layerPolicy, says: "may not change a Node's spec", do: patch(installer, nodeA, `{"metadata":{"annotations":{"example.com/owner":"me"}}}`)},
		{name: "own node: a taint", allow: false, layer: layerPolicy, says: "may not change a Node's spec",
			do: patch(installer, nodeA, `{"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`)},
		{name: "own node: spec.unschedulable (cordon)", allow: false, layer: layerPolicy, says: "may not change a Node's spec", do: patch(installer, nodeA, `{"spec":{"unschedulable":true}}`)},
		{name: "own node: a finalizer", allow: false, layer: layerPolicy, says: "may not change a Node's spec", do: patch(installer, nodeA, `{"metadata":{"finalizers":["example.com/keep"]}}`)},
		{name: "own node: status through the main resource", allow: true, layer: layerStrategy,
			do: patch(installer, nodeA, `{"status":{"capacity":{"example.com/gpu":"8"}}}`),
			after: func() error {
				if st := getNode(nodeA).Status; st.Capacity["example.com/gpu"] != statusBefore.Capacity["example.com/gpu"] {
					return fmt.Errorf("status changed: %v", st.Capacity)
				}
				return nil
			}},
		{name: "own node: status subresource", allow: false, layer: layerRBAC, says: `cannot patch resource "nodes/status"`,
			do: patch(installer, nodeA, `{"status":{"capacity":{"example.com/gpu":"8"}}}`, "status")},
		{name: "own node: delete", allow: false, layer: layerRBAC, says: `cannot delete resource "nodes"`,
			do: func() (string, error) {
				err := installer.CoreV1().Nodes().Delete(ctx, nodeA, metav1.DeleteOptions{})
				if err != nil {
					return err.Error(), err
				}
				return "deleted", nil
			}},
		{name: "a new node (server-side apply creates)", allow: false, layer: "",
			do: func() (string, error) {
				body := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"gvz-node-c","labels":{"` + gate + `":"true"}}}`
				_, err := installer.CoreV1().Nodes().Patch(ctx, "gvz-node-c", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "gate-test"})
				if err != nil {
					return err.Error(), err
				}
				return "created", nil
			}},
		{name: "token without a node claim: the gate label on node A", allow: false, layer: layerPolicy, says: "token names no node",
			do: patch(plain, nodeA, labelJSON(gate, "true"))},
		{name: "another service account (same grant): a taint on node B", allow: true, layer: layerNone,
			do: patch(other, nodeB, `{"spec":{"taints":[{"key":"example.com/x","effect":"NoSchedule"}]}}`),
			after: func() error {
				if len(getNode(nodeB).Spec.Taints) != 1 {
					return fmt.Errorf("node B's taints: %v", getNode(nodeB).Spec.Taints)
				}
				_, err := other.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
				return err
			}},
		{name: "own node: unlabel-node's kubectl (uninstall)", allow: true, layer: layerNone, do: kubectl(kcA, unlabel...),
			after: func() error {
				l := getNode(nodeA).Labels
				if _, ok := l[gate]; ok {
					return fmt.Errorf("node A still has %s", gate)
				}
				if _, ok := l[version]; ok {
					return fmt.Errorf("node A still has %s", version)
				}
				return nil
			}},
		{name: "own node: unlabel again (labels absent)", allow: true, layer: layerNone, do: kubectl(kcA, unlabel...)},
		// The gate is closed again: node A's kubelet tries to open it itself.
		{name: "kubelet of node A: the gate label on node A", allow: false, layer: layerNodeRstr, says: "is not allowed to modify labels: " + gate,
			do: patch(kubelet, nodeA, labelJSON(gate, "true"))},
		{name: "kubelet of node A: the version label on node A", allow: false, layer: layerNodeRstr, says: "is not allowed to modify labels: " + version,
			do: patch(kubelet, nodeA, labelJSON(version, "20991231"))},
		{name: "kubelet of node A: a label of its own (allowed to it)", allow: true, layer: layerNone,
			do: patch(kubelet, nodeA, labelJSON("example.com/kubelet", "yes"))},
	}

	var tbl strings.Builder
	fmt.Fprintf(&tbl, "%-3s %-64s %-7s %-30s %s\n", "#", "request", "result", "layer", "server says")
	for i, gc := range cases {
		msg, err := gc.do()
		got := err == nil
		layer := layerNone
		if err != nil {
			layer = layerOf(msg)
		} else if gc.layer == layerStrategy {
			layer = layerStrategy
		}
		result := "denied"
		if got {
			result = "allowed"
		}
		fmt.Fprintf(&tbl, "%-3d %-64s %-7s %-30s %s\n", i+1, gc.name, result, layer, firstLine(msg, 220))
		switch {
		case got != gc.allow:
			t.Errorf("%s: %s, want %v; server: %s", gc.name, result, map[bool]string{true: "allowed", false: "denied"}[gc.allow], msg)
		case gc.layer != "" && layer != gc.layer:
			t.Errorf("%s: decided by %s, want %s; server: %s", gc.name, layer, gc.layer, msg)
		case gc.says != "" && !strings.Contains(msg, gc.says):
			t.Errorf("%s: the server's message does not say %q: %s", gc.name, gc.says, msg)
		}
		if gc.after != nil {
			if err := gc.after(); err != nil {
				t.Errorf("%s: after: %v", gc.name, err)
			}
		}
	}
	t.Logf("readiness gate (target %s; node %s's installer pod token, %s=%s):\n%s", mutationTarget, nodeA, nodeClaim, nodeA, tbl.String())
}
