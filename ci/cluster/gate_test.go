//go:build clustertest

package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The readiness gate as the scenarios see it: the two node labels the product's label-node container sets, read from
// the rendered DaemonSet (their one home is cue/ #GateLabels), and a RuntimeClass of the harness's own that selects
// no gate.

// ungated is the harness's RuntimeClass with the product's handler and no scheduling: a pod of it lands on the node
// whatever its labels say, so it shows what the node's containerd can run (the negative control).
const ungated = "gvisor-ungated"

var gvisorUngatedProbe = podSpec{"gvisor-ungated-probe", ungated, "Never", "dmesg"}

// gateKeys reads the gate and version label keys from the rendered DaemonSet: label-node's "key=value" args (install)
// or unlabel-node's "key-" args (uninstall), the gate first.
func (c *Cluster) gateKeys(t *testing.T) (gate, version string) {
	t.Helper()
	b, err := os.ReadFile(c.daemonSetFile())
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ct := range ds.Spec.Template.Spec.InitContainers {
		if ct.Name != "label-node" && ct.Name != "unlabel-node" {
			continue
		}
		for _, a := range ct.Args {
			if k, _, ok := strings.Cut(a, "="); ok && !strings.HasPrefix(a, "-") {
				keys = append(keys, k)
			} else if strings.HasSuffix(a, "-") && strings.Contains(a, "/") {
				keys = append(keys, strings.TrimSuffix(a, "-"))
			}
		}
	}
	if len(keys) != 2 {
		t.Fatalf("the rendered DaemonSet's (un)label-node sets %d labels (%v), want the gate and the version", len(keys), keys)
	}
	return keys[0], keys[1]
}

// nodeLabels returns the node's gate and version labels ("" when absent).
func (c *Cluster) nodeLabels(ctx context.Context, t *testing.T) (gate, version string) {
	t.Helper()
	gk, vk := c.gateKeys(t)
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[gk], n.Labels[vk]
}

// versionLabel checks that the gate is open and the version label names version (kubectl get nodes -L shows it).
func (c *Cluster) versionLabel(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	gate, v := c.nodeLabels(ctx, t)
	t.Logf("  .. node labels: gate=%q version=%q", gate, v)
	if gate != "true" || v != version {
		t.Errorf("node labels: gate %q, version %q; want true and %s", gate, v, version)
	}
}

// labelledAt is when the node's labels were last changed by kubectl label (its managedFields entry: the API server
// records the time of each manager's last change, to the second).
func (c *Cluster) labelledAt(ctx context.Context, t *testing.T) time.Time {
	t.Helper()
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range n.ManagedFields {
		if strings.HasPrefix(m.Manager, "kubectl") && m.Time != nil {
			return m.Time.Time
		}
	}
	return time.Time{}
}

// ensureUngatedRuntimeClass creates the harness's RuntimeClass without scheduling.
func (c *Cluster) ensureUngatedRuntimeClass(ctx context.Context, t *testing.T) {
	t.Helper()
	u, err := ReadObjects(c.generatedDir())
	if err != nil {
		t.Fatal(err)
	}
	handler := ""
	for _, o := range u {
		if o.GetKind() == "RuntimeClass" {
			handler, _ = o.Object["handler"].(string)
		}
	}
	if handler == "" {
		t.Fatal("no RuntimeClass with a handler in the generated folder")
	}
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": ungated}, "handler": handler,
	}}
	if err := c.Apply(ctx, rc); err != nil {
		t.Fatalf("the harness's RuntimeClass %s: %v", ungated, err)
	}
}

// waitUnschedulable waits until a pod is Pending because no node matches its node selector (the RuntimeClass's),
// and checks that no node ever got it: no nodeName, no sandbox event.
func (c *Cluster) waitUnschedulable(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	p, err := c.WaitPod(ctx, "default", name, 60*time.Second, "Unschedulable", func(p *corev1.Pod) bool {
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse && cd.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod %s: node %q, phase %s: want Pending on no node", name, p.Spec.NodeName, p.Status.Phase)
	}
	var msg string
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodScheduled {
			msg = cd.Message
		}
	}
	if !strings.Contains(msg, "didn't match Pod's node affinity/selector") {
		t.Errorf("pod %s is unschedulable for another reason: %s", name, msg)
	}
	if l, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedCreatePodSandBox"}); err == nil && len(l.Items) > 0 {
		t.Errorf("pod %s: a sandbox was attempted: %s", name, l.Items[0].Message)
	}
	return msg
}

// scheduledAt is when a pod's PodScheduled condition turned true (zero while it is not scheduled).
func scheduledAt(p *corev1.Pod) time.Time {
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionTrue {
			return cd.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// otherNode creates a second Node object (no kubelet behind it) and removes it when the test ends.
func (c *Cluster) otherNode(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if _, err := c.Admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
}
