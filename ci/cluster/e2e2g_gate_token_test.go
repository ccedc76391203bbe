//go:build clustertest

package cluster

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestInstallerTokenLabelsOnlyItsOwnNode (scenario 2g): the token the kubelet projected into the running installer
// pod's label-node container (read from the pod's volume on the node: the very token the product's kubectl used) may
// set the gate labels on its own Node and nothing else: not on a second Node object, no taint, no other label, no
// cordon. Each refusal comes from the product's ValidatingAdmissionPolicy, with the server's message.
func TestInstallerTokenLabelsOnlyItsOwnNode(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, "")
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok := c.projectedToken(ctx, t, p)
		cs, err := c.ClientForToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		who, err := WhoAmI(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("  .. the installer pod's projected token: %s, node claim %v", who.Username, who.Extra["authentication.kubernetes.io/node-name"])
		if who.Username != "system:serviceaccount:"+installerNS+":"+installerDS {
			t.Fatalf("the projected token is %s", who.Username)
		}
		const other = "gvz-other"
		c.otherNode(ctx, t, other)
		gk, vk := c.gateKeys(t)
		labels := func(kv ...string) string {
			m := map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": m}})
			return string(b)
		}
		taint := `{"spec":{"taints":[{"key":"example.com/evil","effect":"NoSchedule"}]}}`
		for _, tc := range []struct {
			what, node, patch string
			allow             bool
			says              string
		}{
			{"own node: the gate labels (what label-node sets)", nodeName, labels(gk, "true", vk, c.installed), true, ""},
			{"a second Node: the gate label", other, labels(gk, "true"), false, "may label only that node, not " + other},
			{"a second Node: a taint", other, taint, false, "may label only that node, not " + other},
			{"own node: a taint", nodeName, taint, false, "may not change a Node's spec"},
			{"own node: another label", nodeName, labels("example.com/pool", "sandbox"), false, "may change only the labels"},
			{"own node: cordon (spec.unschedulable)", nodeName, `{"spec":{"unschedulable":true}}`, false, "may not change a Node's spec"},
		} {
			_, err := cs.CoreV1().Nodes().Patch(ctx, tc.node, types.StrategicMergePatchType, []byte(tc.patch), metav1.PatchOptions{})
			switch {
			case tc.allow && err != nil:
				t.Errorf("%s: denied: %v", tc.what, err)
			case !tc.allow && err == nil:
				t.Errorf("%s: ALLOWED", tc.what)
			case !tc.allow && (!strings.Contains(err.Error(), "ValidatingAdmissionPolicy") || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("%s: denied, but not by the policy's rule %q: %v", tc.what, tc.says, err)
			case tc.allow:
				t.Logf("  .. %-48s allowed", tc.what)
			default:
				msg := err.Error()
				if _, r, ok := strings.Cut(msg, "denied request: "); ok {
					msg = r
				}
				t.Logf("  .. %-48s denied by the ValidatingAdmissionPolicy: %s", tc.what, clip(msg, 200))
			}
		}
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[gk] != "" || len(n.Spec.Taints) > 0 && n.Spec.Taints[0].Key == "example.com/evil" {
			t.Errorf("node %s was changed: labels %v, taints %v", other, n.Labels, n.Spec.Taints)
		}
	})
}

// projectedToken reads the service account token the kubelet projected for a pod (its projected volume with a
// serviceAccountToken source), from the pod's volume folder on the node (a tmpfs of the node's mount namespace).
func (c *Cluster) projectedToken(ctx context.Context, t *testing.T, p *corev1.Pod) string {
	t.Helper()
	vol := ""
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				vol = filepath.Join(v.Name, s.ServiceAccountToken.Path)
			}
		}
	}
	if vol == "" {
		t.Fatalf("pod %s has no projected service account token", p.Name)
	}
	f := filepath.Join(c.Dir, "kubelet/pods", string(p.UID), "volumes/kubernetes.io~projected", vol)
	b, err := c.nsenter(ctx, true, "cat", f)
	if err != nil {
		t.Fatalf("read %s on the node: %v: %s", f, err, b)
	}
	return strings.TrimSpace(string(b))
}
