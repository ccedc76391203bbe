//go:build clustertest

package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxFirstSyncReadyAfterTheInstaller (Flux 1, make e2e-flux): the e2e target committed (fluxReleases: the
// release the next scenario bumps from) and only delivery/e2e/ applied: Flux's controllers fetch the commit, apply
// overlays/e2e and report the Kustomization Ready; the installer rolled out (one containerd restart), and a gVisor
// pod logs "Starting gVisor". The Kustomization's health check (wait: true) turned Ready only after the DaemonSet was
// ready: never Ready while the DaemonSet had not rolled out (checked at every poll), and its Ready time is not before
// the installer pod's.
func TestFluxFirstSyncReadyAfterTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		t0 := time.Now()
		c.ensureRunning(ctx, t, runcSleeper)
		r0 := c.Restarts()
		r := c.flux(ctx, t)
		first, _ := fluxReleases(c.V)
		sha := c.fluxCommit(ctx, t, first, "install", nil, "e2e target: gVisor "+first)
		c.fluxApplied(ctx, t)
		early := 0
		ks := c.waitFlux(ctx, t, syncRollout, "first sync Ready", appliedReady(sha), func(ctx context.Context, ks fluxStatus) {
			if ks.ready != "True" {
				return
			}
			// read after the Kustomization: a rollout does not go back, so a DaemonSet not rolled out now was not then
			ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
			if err != nil || !DaemonSetRolledOut(ds) {
				early++
			}
		})
		r.synced, c.installed = first+" install", first
		if early > 0 {
			t.Errorf("the Kustomization was Ready %d times while the installer DaemonSet had not rolled out", early)
		}
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil || !DaemonSetRolledOut(ds) {
			t.Fatalf("Kustomization Ready but the installer DaemonSet has not rolled out: %v", err)
		}
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var podReady time.Time
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				podReady = cd.LastTransitionTime.Time
			}
		}
		// both times are whole seconds: equal is "not before"
		t.Logf("  .. installer pod Ready at %s, Kustomization Ready at %s (%+.0fs later)", podReady.Format("15:04:05"),
			ks.since.Format("15:04:05"), ks.since.Sub(podReady).Seconds())
		if podReady.IsZero() || ks.since.Before(podReady) {
			t.Errorf("the Kustomization turned Ready (%s) before the installer pod (%s)", ks.since, podReady)
		}
		if v := c.stamp("version"); v != first {
			t.Errorf("stamp says version %q, want %s", v, first)
		}
		if n := c.Restarts() - r0; n != 1 {
			t.Errorf("containerd restarts by the first sync: %d, want 1", n)
		}
		t.Logf("  .. synced (+%.1fs): stamp %s, %d containerd restart, %s", time.Since(t0).Seconds(), c.stamp("version"),
			c.Restarts()-r0, c.runscVersion(ctx, t))
		c.smokePV(ctx, t)
		c.smoke(ctx, t)
		c.untouched(ctx, t, runcSleeper.name)
	})
}

// fluxReleases are the releases of the first sync and of the bump, per containerd version: from Debian's 2022 runsc
// (20221219) to the newest this containerd can start, 20240212 on 1.6 (the current runsc beside the 2022 shim;
// 20260801's shim needs containerd 1.7), 20260801 (archive layout) on the others. A gVisor pod runs across the bump
// (TestFluxVersionBumpRollsTheInstaller): its release stays on the node until it is gone.
func fluxReleases(v string) (first, next string) {
	if v == "16" {
		return vDeb, vGood
	}
	return vDeb, vUp
}
