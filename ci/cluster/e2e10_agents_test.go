//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Agent sandboxes (make e2e-agents, ci/cluster/README.md "Agent sandboxes"): SIG Apps' agent-sandbox controller
// (ci/agentsandbox/build.sh: cmd/agent-sandbox-controller and the CRDs of sigs.k8s.io/agent-sandbox) as a process
// beside the node's API server, its pods on a sandbox class of the product's. The objects are the README's "Agent
// sandboxes" example, in a namespace that enforces Pod Security restricted.

const (
	agentsNS    = "agents"
	agentClass  = "gvisor-agent"
	agentGate   = "node-restriction.kubernetes.io/gvisor-runsc-gvisor-agent"
	agentHealth = "127.0.0.1:19442" // the controller's health probe, in the node's network namespace
)

// The class the agents run on: the default flags, an overhead of its own.
const agentClassValues = `    gvisor-agent:
      overhead: {memory: 48Mi, cpu: 20m}
`

var (
	sandboxGVR  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	poolGVR     = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
)

// agentObject reads one of docs/agents/*.yaml, the README's example, as the test applies it: the image is the
// harness's imported busybox (no registry here), never pulled.
func agentObject(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/agents", file))
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	for _, r := range [][2]string{{"image: busybox:1.37.0-glibc", "image: " + img}, {"imagePullPolicy: IfNotPresent", "imagePullPolicy: Never"}} {
		if !strings.Contains(y, r[0]) && strings.Contains(file, "template") {
			t.Fatalf("docs/agents/%s has no %q", file, r[0])
		}
		y = strings.ReplaceAll(y, r[0], r[1])
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("docs/agents/%s: %v", file, err)
	}
	return &unstructured.Unstructured{Object: m}
}

// agentSandboxDir is ci/agentsandbox/build.sh's cache folder (the controller and crds/).
func agentSandboxDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("sh", filepath.Join(repoRoot, "ci/agentsandbox/build.sh"), "--dir").Output()
	if err != nil {
		t.Fatalf("ci/agentsandbox/build.sh --dir: %v", err)
	}
	d := strings.TrimSpace(string(out))
	for _, f := range []string{"agent-sandbox-controller", "crds"} {
		if !exists(filepath.Join(d, f)) {
			t.Fatalf("%s has no %s: run sh ci/agentsandbox/build.sh (make e2e-agents does)", d, f)
		}
	}
	return d
}

// startAgentSandbox applies the CRDs and the agents namespace (restricted) and starts the controller with its
// extensions (templates, warm pools, claims), Ready.
func (c *Cluster) startAgentSandbox(ctx context.Context, t *testing.T) {
	t.Helper()
	t0 := time.Now()
	dir := agentSandboxDir(t)
	if err := c.ApplyDir(ctx, filepath.Join(dir, "crds")); err != nil {
		t.Fatalf("agent-sandbox CRDs: %v", err)
	}
	// ApplyDir waited until discovery serves each CRD: the controller exits on a kind it does not list yet
	if err := c.Apply(ctx, agentObject(t, "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.waitDefaultServiceAccount(ctx, agentsNS); err != nil {
		t.Fatal(err)
	}
	args := []string{"-t", fmt.Sprint(c.pid), "-n", "-p", "--", filepath.Join(dir, "agent-sandbox-controller"),
		"--kubeconfig=" + filepath.Join(c.Dir, "conf/admin.kubeconfig"), "--leader-elect=false", "--extensions",
		"--metrics-bind-address=0", "--health-probe-bind-address=" + agentHealth}
	if err := c.startInNode("agent-sandbox-controller", args); err != nil {
		t.Fatal(err)
	}
	if err := c.waitHTTP(ctx, "http://"+agentHealth+"/readyz", 60*time.Second); err != nil {
		log, _ := tailFile(filepath.Join(c.Dir, "run/logs/agent-sandbox-controller.log"), 20)
		t.Fatalf("agent-sandbox-controller not ready: %v\n%s", err, log)
	}
	t.Logf("  .. agent-sandbox %s up in %.1fs: CRDs, namespace %s (restricted), controller with extensions",
		agentSandboxVersion(t), time.Since(t0).Seconds(), agentsNS)
}

func agentSandboxVersion(t *testing.T) string {
	out, err := exec.Command("sh", filepath.Join(repoRoot, "ci/agentsandbox/build.sh"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// createAgent creates an agent-sandbox object, retrying while its CRD is not served yet.
func (c *Cluster) createAgent(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, o *unstructured.Unstructured) {
	t.Helper()
	err := Poll(ctx, 500*time.Millisecond, 30*time.Second, "create "+gvr.Resource+" "+o.GetName(), func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(gvr).Namespace(agentsNS).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sandboxPods maps each Sandbox of the namespace to its pod (the pod a Sandbox owns).
func (c *Cluster) sandboxPods(ctx context.Context) (map[string]corev1.Pod, error) {
	pods, err := c.Admin.CoreV1().Pods(agentsNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "Sandbox" && p.DeletionTimestamp == nil {
				out[o.Name] = p
			}
		}
	}
	return out, nil
}

// agentRunsGVisor: the pod runs, its kernel is gVisor's ("Starting gVisor" in its dmesg), on release rel (its
// container's state in that release's runsc root on the host).
func (c *Cluster) agentRunsGVisor(ctx context.Context, t *testing.T, pod, rel string) {
	t.Helper()
	if _, err := c.WaitPodPhase(ctx, agentsNS, pod, corev1.PodRunning, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if log := c.waitLogIn(ctx, t, agentsNS, pod, "agent", "Starting gVisor", 20*time.Second); !strings.Contains(log, "Starting gVisor") {
		t.Fatalf("agent pod %s: no 'Starting gVisor' in its dmesg:\n%s", pod, clipLines(log, 10))
	}
	if got := c.podReleaseIn(ctx, t, agentsNS, pod); got != rel {
		t.Fatalf("agent pod %s runs on release %q, want %s", pod, got, rel)
	}
}

// TestAgentSandboxOnGVisorClasses: agent-sandbox's own controller on a class of the product's.
//   - A SandboxTemplate on class gvisor-agent and a SandboxWarmPool of 2, created while the class's gate is closed on
//     the node (its label removed, as on a node where the installer has not verified the class yet): the pool's pods
//     stay Pending, unscheduled. The installer's next run opens the gate (label-node): both run under gVisor.
//   - A SandboxClaim adopts a warm sandbox: its pod is one of the pool's, not a new one; the pool makes another.
//   - The claimed Sandbox suspended (operatingMode Suspended: its pod goes, the Sandbox stays) and resumed: a new
//     pod, under gVisor.
//   - A gVisor bump (20240212 -> 20260801) with that Sandbox running: its pod is untouched, still on 20240212, and
//     execs; a Sandbox created after the bump runs on 20260801.
func TestAgentSandboxOnGVisorClasses(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		// forEachVersion's bound holds: two installs (the bump's 61 MB archive took 4 min under the four suites' load
		// on the slow kind of machine, 2026-12-06) and the agent steps outlast the 10 minutes of its own it had.
		c.classes = agentClassValues
		c.generated = ""
		c.install(ctx, t, vGood, "install")
		c.startAgentSandbox(ctx, t)

		// The GPU template of the README: the CRD's schema takes it (no GPU here to run it).
		c.createAgent(ctx, t, templateGVR, agentObject(t, "sandboxtemplate-gpu.yaml"))

		// The gate closed: the class is not verified on this node (yet).
		patch := []byte(`{"metadata":{"labels":{"` + agentGate + `":null}}}`)
		if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		c.createAgent(ctx, t, templateGVR, agentObject(t, "sandboxtemplate-agent.yaml"))
		c.createAgent(ctx, t, poolGVR, agentObject(t, "sandboxwarmpool.yaml"))
		var warm map[string]corev1.Pod
		err := Poll(ctx, time.Second, 60*time.Second, "2 warm pods, Pending and unschedulable", func(ctx context.Context) (bool, error) {
			var err error
			if warm, err = c.sandboxPods(ctx); err != nil || len(warm) != 2 {
				return false, err
			}
			for _, p := range warm {
				if p.Status.Phase != corev1.PodPending || !unschedulable(&p) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%v (pods: %v)", err, podSummary(warm))
		}
		time.Sleep(3 * time.Second)
		if again, _ := c.sandboxPods(ctx); podSummary(again) != podSummary(warm) {
			t.Fatalf("the warm pods moved with the gate closed: %s", podSummary(again))
		}
		t.Logf("  .. gate %s closed: warm pods %s", agentGate, podSummary(warm))

		// The installer's next run opens it.
		c.rerunInstaller(ctx, t)
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || n.Labels[agentGate] != "true" {
			t.Fatalf("the installer's run did not open %s: %v %v", agentGate, n.Labels, err)
		}
		uids := map[types.UID]string{}
		for sb, p := range warm {
			c.agentRunsGVisor(ctx, t, p.Name, vGood)
			uids[p.UID] = sb
		}
		t.Logf("  .. gate open: both warm pods run under gVisor %s", vGood)

		// A claim adopts a warm sandbox.
		c.createAgent(ctx, t, claimGVR, agentObject(t, "sandboxclaim.yaml"))
		var claimed string
		err = Poll(ctx, time.Second, 60*time.Second, "claim task-1 bound to a sandbox", func(ctx context.Context) (bool, error) {
			u, err := c.dyn.Resource(claimGVR).Namespace(agentsNS).Get(ctx, "task-1", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			claimed, _, _ = unstructured.NestedString(u.Object, "status", "sandbox", "name")
			return claimed != "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := c.sandboxPods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cp, ok := pods[claimed]
		if !ok || uids[cp.UID] == "" {
			t.Fatalf("claim task-1's sandbox %s has pod %s (%s), not one of the warm pods %v", claimed, cp.Name, cp.UID, uids)
		}
		t.Logf("  .. claim task-1 adopted warm sandbox %s (pod %s, started before the claim)", claimed, cp.Name)
		err = Poll(ctx, time.Second, 90*time.Second, "the pool back at 2 warm sandboxes", func(ctx context.Context) (bool, error) {
			ps, err := c.sandboxPods(ctx)
			if err != nil {
				return false, err
			}
			ready := 0
			for sb, p := range ps {
				if sb != claimed && p.Status.Phase == corev1.PodRunning {
					ready++
				}
			}
			return ready == 2, nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// Suspended and resumed.
		mode := func(m string) {
			p := []byte(`{"spec":{"operatingMode":"` + m + `"}}`)
			if _, err := c.dyn.Resource(sandboxGVR).Namespace(agentsNS).Patch(ctx, claimed, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
				t.Fatalf("sandbox %s -> %s: %v", claimed, m, err)
			}
		}
		mode("Suspended")
		waitGone(ctx, t, "pod "+cp.Name, func(ctx context.Context) error {
			_, err := c.Admin.CoreV1().Pods(agentsNS).Get(ctx, cp.Name, metav1.GetOptions{})
			return err
		})
		if c.sandboxCondition(ctx, t, claimed, "Suspended") != "True" {
			t.Errorf("sandbox %s: condition Suspended is not True after its pod went", claimed)
		}
		mode("Running")
		var resumed corev1.Pod
		err = Poll(ctx, time.Second, 60*time.Second, "sandbox "+claimed+" resumed with a new pod", func(ctx context.Context) (bool, error) {
			ps, err := c.sandboxPods(ctx)
			resumed = ps[claimed]
			return err == nil && resumed.UID != "" && resumed.UID != cp.UID, err
		})
		if err != nil {
			t.Fatal(err)
		}
		c.agentRunsGVisor(ctx, t, resumed.Name, vGood)
		t.Logf("  .. sandbox %s suspended (pod gone, Suspended=True) and resumed: new pod %s under gVisor", claimed, resumed.Name)

		// The bump, with that sandbox running.
		r0 := c.Restarts()
		c.install(ctx, t, vUp, "install")
		if p, err := c.Admin.CoreV1().Pods(agentsNS).Get(ctx, resumed.Name, metav1.GetOptions{}); err != nil || p.UID != resumed.UID ||
			p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("sandbox %s's pod after the bump: %v (want pod %s, Running, no restart; got %+v)", claimed, err, resumed.UID, p)
		}
		if got := c.podReleaseIn(ctx, t, agentsNS, resumed.Name); got != vGood {
			t.Fatalf("sandbox %s's pod runs on %q after the bump, want %s (its own release)", claimed, got, vGood)
		}
		c.execAliveIn(ctx, t, agentsNS, resumed.Name)
		// a Sandbox of its own (no template, no pool), the template's pod
		tpl := agentObject(t, "sandboxtemplate-agent.yaml")
		podTemplate, _, _ := unstructured.NestedMap(tpl.Object, "spec", "podTemplate")
		sb := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
			"metadata": map[string]any{"name": "after-bump", "namespace": agentsNS}, "spec": map[string]any{"podTemplate": podTemplate}}}
		c.createAgent(ctx, t, sandboxGVR, sb)
		var fresh corev1.Pod
		err = Poll(ctx, time.Second, 60*time.Second, "sandbox after-bump has a pod", func(ctx context.Context) (bool, error) {
			ps, err := c.sandboxPods(ctx)
			fresh = ps["after-bump"]
			return err == nil && fresh.Name != "", err
		})
		if err != nil {
			t.Fatal(err)
		}
		c.agentRunsGVisor(ctx, t, fresh.Name, vUp)
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarted %d times across the bump", n)
		}
		t.Logf("  .. bump %s -> %s: sandbox %s untouched on %s and execs; sandbox after-bump runs on %s; 0 restarts", vGood, vUp, claimed, vGood, vUp)

		// Gone again: claims, pool, template, sandboxes; no agent pod left.
		for _, d := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{claimGVR, "task-1"}, {poolGVR, "python-pool"}, {sandboxGVR, "after-bump"}, {templateGVR, "python-agent"}, {templateGVR, "gpu-agent"}} {
			if err := c.dyn.Resource(d.gvr).Namespace(agentsNS).Delete(ctx, d.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", d.gvr.Resource, d.name, err)
			}
		}
		err = Poll(ctx, time.Second, 120*time.Second, "no agent pod left", func(ctx context.Context) (bool, error) {
			ps, err := c.Admin.CoreV1().Pods(agentsNS).List(ctx, metav1.ListOptions{})
			return err == nil && len(ps.Items) == 0, err
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// sandboxCondition: the status of a Sandbox's condition, "" when absent.
func (c *Cluster) sandboxCondition(ctx context.Context, t *testing.T, name, typ string) string {
	t.Helper()
	var st string
	_ = Poll(ctx, 500*time.Millisecond, 30*time.Second, "sandbox "+name+" condition "+typ, func(ctx context.Context) (bool, error) {
		u, err := c.dyn.Resource(sandboxGVR).Namespace(agentsNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, x := range conds {
			if m, ok := x.(map[string]any); ok && m["type"] == typ {
				st, _ = m["status"].(string)
			}
		}
		return st == "True", nil
	})
	return st
}

// unschedulable: the scheduler found no node because of the pod's node selector (the RuntimeClass's gate label).
func unschedulable(p *corev1.Pod) bool {
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse && cd.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(cd.Message, "node affinity/selector") {
			return true
		}
	}
	return false
}

// podSummary: "sandbox=pod/phase" for each, sorted.
func podSummary(ps map[string]corev1.Pod) string {
	var l []string
	for sb, p := range ps {
		l = append(l, sb+"="+p.Name+"/"+string(p.Status.Phase))
	}
	slices.Sort(l)
	return strings.Join(l, " ")
}
