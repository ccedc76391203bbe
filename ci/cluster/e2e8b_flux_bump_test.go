//go:build clustertest

package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxVersionBumpRollsTheInstaller (Flux 2): gvisor.version 20221219 -> 20240212 committed (pin, generate, commit,
// push) and nothing else: the GitRepository's interval finds the commit (no reconcile is asked for), Flux applies it,
// the DaemonSet rolls and carries the new GVISOR_VERSION, the node's stamp names 20240212, containerd is not
// restarted (runsc.toml loses the 2022 runsc's network line: no restart needed), the running gVisor pod (started by
// the 2022 runsc) is untouched, and the smoke pod runs on the new runsc.
func TestFluxVersionBumpRollsTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureFluxSynced(ctx, t, vDeb, "install")
		c.ensureRunning(ctx, t, gvisorSleeper)
		r0 := c.Restarts()
		ds0, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.fluxSync(ctx, t, vGood, "install", nil, "bump gVisor to "+vGood, false)
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Generation == ds0.Generation || !DaemonSetRolledOut(ds) {
			t.Errorf("the DaemonSet did not roll: generation %d -> %d, rolled out %v", ds0.Generation, ds.Generation, DaemonSetRolledOut(ds))
		}
		if v := envOf(ds.Spec.Template.Spec.InitContainers, "install-runsc", "GVISOR_VERSION"); v != vGood {
			t.Errorf("install-runsc's GVISOR_VERSION is %q, want %s", v, vGood)
		}
		if v := c.stamp("version"); v != vGood {
			t.Errorf("stamp says version %q, want %s", v, vGood)
		}
		n := c.Restarts() - r0
		t.Logf("  .. DaemonSet generation %d -> %d, stamp %s, containerd restarts by the bump: %d", ds0.Generation, ds.Generation, c.stamp("version"), n)
		if n != 0 {
			t.Errorf("the bump restarted containerd %d times, want 0", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.untouched(ctx, t, runcSleeper.name)
		c.smoke(ctx, t)
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
