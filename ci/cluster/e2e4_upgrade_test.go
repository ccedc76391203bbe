//go:build clustertest

package cluster

import (
	"context"
	"os"
	"testing"
)

// TestUpgradeToArchiveLayoutKeepsContainerdAndPods (scenario 4): gvisor.version 20240212 (binaries layout) ->
// 20260801 (archive layout: gvisor.tar.bz2 with gvisor-bin/): the DaemonSet pins the archive and rolls, the stamp
// names 20260801 and the archive layout, gvisor-bin/ is installed, containerd is not restarted, the running gVisor
// pod is untouched, and the smoke pod runs again.
func TestUpgradeToArchiveLayoutKeepsContainerdAndPods(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		c.ensureRunning(ctx, t, gvisorSleeper)
		c.smokePV(ctx, t)
		r0 := c.Restarts()
		c.ensureTarget(ctx, t, vUp, "install")
		if sum := published(t, vUp, "gvisor.tar.bz2"); !c.pinnedInDS(t, "gvisor.tar.bz2", sum) {
			t.Fatalf("the DaemonSet does not pin gvisor.tar.bz2 of %s to %s", vUp, sum)
		}
		c.install(ctx, t, vUp, "install")
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.logContainers(ctx, t, p, "install-runsc", "configure-containerd")
		if v := c.stamp("version"); v != vUp {
			t.Errorf("stamp says version %q, want %s", v, vUp)
		}
		if l := c.stamp("layout"); l != "archive" {
			t.Errorf("stamp says layout %q, want archive", l)
		}
		if fi, err := os.Stat(c.HostPath("/usr/local/bin/gvisor-bin/e2e-helper")); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("gvisor-bin/ of the archive is not installed: %v", err)
		}
		n := c.Restarts() - r0
		t.Logf("  .. stamp: version %s, layout %s; containerd restarts by the upgrade: %d", c.stamp("version"), c.stamp("layout"), n)
		if n != 0 {
			t.Errorf("the upgrade restarted containerd %d times, want 0", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.smoke(ctx, t)
	})
}
