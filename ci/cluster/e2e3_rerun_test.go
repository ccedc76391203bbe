//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRerunIsIdempotentWithoutContainerdRestart (scenario 3): a rollout restart of the installer makes a new pod
// whose init containers both run again to exit 0, and containerd is restarted zero times; the gVisor pod is untouched.
func TestRerunIsIdempotentWithoutContainerdRestart(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		c.ensureRunning(ctx, t, gvisorSleeper)
		r0 := c.Restarts()
		old, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RolloutRestart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitRollout(ctx, t, installRollout); err != nil {
			t.Fatal(err)
		}
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name == old.Name {
			t.Fatalf("no new installer pod (still %s)", p.Name)
		}
		for _, name := range []string{"install-runsc", "configure-containerd"} {
			ok := false
			for _, s := range p.Status.InitContainerStatuses {
				ok = ok || s.Name == name && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
			}
			if !ok {
				t.Errorf("init container %s of %s did not run to exit 0", name, p.Name)
			}
		}
		c.logContainers(ctx, t, p, "install-runsc", "configure-containerd")
		n := c.Restarts() - r0
		t.Logf("  .. containerd restarts during the re-run: %d", n)
		if n != 0 {
			t.Errorf("the idempotent re-run restarted containerd %d times", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
	})
}

// RolloutRestart does what kubectl rollout restart does to the installer DaemonSet: a new restartedAt annotation on
// its pod template.
func (c *Cluster) RolloutRestart(ctx context.Context) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339))
	_, err := c.Admin.AppsV1().DaemonSets(installerNS).Patch(ctx, installerDS, types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "kubectl-rollout"})
	if err != nil {
		return fmt.Errorf("rollout restart: %w", err)
	}
	return nil
}
