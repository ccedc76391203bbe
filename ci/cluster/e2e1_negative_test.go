//go:build clustertest

package cluster

import (
	"context"
	"testing"
	"time"
)

// TestGVisorPodFailsBeforeInstall (scenario 1, the negative control): with the product's RuntimeClass but before the
// installer, a runtimeClassName: gvisor pod fails with containerd's 'no runtime for "runsc" is configured'; a runc
// pod runs (and keeps running through the next scenarios).
func TestGVisorPodFailsBeforeInstall(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureTarget(ctx, t, vGood, "install")
		objs, err := ReadObjects(c.generatedDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "RuntimeClass" {
				if err := c.Apply(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}
		c.createPod(ctx, t, runcSleeper)
		t.Logf("  .. event: %s", c.negativeControl(ctx, t))
		if _, err := c.WaitPodPhase(ctx, "default", runcSleeper.name, "Running", 60*time.Second); err != nil {
			t.Fatalf("the runc pod does not run: %v", err)
		}
		c.remember(ctx, t, runcSleeper.name)
		t.Logf("  .. runc-sleeper: %s", c.states[runcSleeper.name])
	})
}
