//go:build clustertest

package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxVersionBumpRollsTheInstaller (Flux 2): gvisor.version bumped (fluxReleases: 20221219 -> 20240212 on
// containerd 1.6, 20221219 -> 20260801 on the others) by a commit (pin, generate, commit, push) and nothing else: the
// GitRepository's interval finds the commit (no reconcile is asked for), Flux applies it, the DaemonSet rolls and
// carries the new GVISOR_VERSION, the node's stamp names the new release, containerd is not restarted (the runtime
// block does not change: runsc.toml only), the runc pod is untouched, and the smoke pod runs on the new release. A
// gVisor pod running since before the bump is untouched, still execs (the 2022 runsc that started it), stops and is
// deleted cleanly, and the installer's next run removes the old release's folder.
func TestFluxVersionBumpRollsTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		first, next := fluxReleases(c.V)
		c.ensureFluxSynced(ctx, t, first)
		c.onRelease(ctx, t, gvisorSleeper, first)
		r0 := c.Restarts()
		ds0, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.fluxSync(ctx, t, next, "install", nil, "bump gVisor to "+next, false)
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Generation == ds0.Generation || !DaemonSetRolledOut(ds) {
			t.Errorf("the DaemonSet did not roll: generation %d -> %d, rolled out %v", ds0.Generation, ds.Generation, DaemonSetRolledOut(ds))
		}
		if v := envOf(ds.Spec.Template.Spec.InitContainers, "install-runsc", "GVISOR_VERSION"); v != next {
			t.Errorf("install-runsc's GVISOR_VERSION is %q, want %s", v, next)
		}
		if v := c.stamp("version"); v != next {
			t.Errorf("stamp says version %q, want %s", v, next)
		}
		n := c.Restarts() - r0
		t.Logf("  .. DaemonSet generation %d -> %d, stamp %s, containerd restarts by the bump: %d", ds0.Generation, ds.Generation, c.stamp("version"), n)
		if n != 0 {
			t.Errorf("the bump restarted containerd %d times, want 0", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		t.Logf("  .. gvisor-sleeper (started on %s) untouched", first)
		c.untouched(ctx, t, runcSleeper.name)
		c.acrossBump(ctx, t, gvisorSleeper.name, next)
		c.smoke(ctx, t)
		c.ensureRunning(ctx, t, gvisorSleeper)
	})
}

// envOf is the value of env var name of the container cname ("" when either is missing).
func envOf(cs []corev1.Container, cname, name string) string {
	for _, x := range cs {
		if x.Name != cname {
			continue
		}
		for _, e := range x.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}
