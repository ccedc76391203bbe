//go:build clustertest

package cluster

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGVisorPodPendingBeforeInstall (scenario 1, the negative control): before the installer, a runtimeClassName:
// gvisor pod stays Pending on no node (the product's RuntimeClass selects the readiness gate's label, which no node
// has yet) — no sandbox is attempted, no CreateContainerError. It stays for scenario 2, which sees it run once the gate
// opens. The node really cannot run gVisor yet: a pod of the harness's ungated RuntimeClass (same handler, no
// scheduling) fails with containerd's 'no runtime for "runsc" is configured'. A runc pod runs (and keeps running
// through the next scenarios).
func TestGVisorPodPendingBeforeInstall(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureTarget(ctx, t, vGood, "install")
		gk, _ := c.gateKeys(t)
		objs, err := ReadObjects(c.generatedDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "RuntimeClass" {
				continue
			}
			if v, _, _ := unstructured.NestedString(o.Object, "scheduling", "nodeSelector", gk); v != "true" {
				t.Fatalf("the RuntimeClass does not select the gate %s=true: %v", gk, o.Object["scheduling"])
			}
			if err := c.Apply(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		c.createPod(ctx, t, runcSleeper)
		c.createPod(ctx, t, gvisorSleeper)
		t0 := time.Now()
		t.Logf("  .. gvisor-sleeper (runtimeClassName gvisor), created before the installer: Pending on no node (%s)",
			c.waitUnschedulable(ctx, t, gvisorSleeper.name))
		t.Logf("  .. event (ungated RuntimeClass): %s", c.negativeControl(ctx, t))
		c.waitUnschedulable(ctx, t, gvisorSleeper.name)
		t.Logf("  .. gvisor-sleeper still Pending after %.1fs, no sandbox attempted", time.Since(t0).Seconds())
		if _, err := c.WaitPodPhase(ctx, "default", runcSleeper.name, "Running", 60*time.Second); err != nil {
			t.Fatalf("the runc pod does not run: %v", err)
		}
		c.remember(ctx, t, runcSleeper.name)
		c.early = true
		t.Logf("  .. runc-sleeper: %s", c.states[runcSleeper.name])
	})
}
