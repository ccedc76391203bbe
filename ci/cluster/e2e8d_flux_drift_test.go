//go:build clustertest

package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxRevertsAHandEdit (Flux 5, drift): GVISOR_VERSION of every container of the installer DaemonSet edited by
// hand (an update by another field manager, as kubectl edit does) to a release nothing pins; the next reconcile
// (asked for with the requestedAt annotation, as flux reconcile does) puts the committed value back, the DaemonSet
// rolls out again, and the node keeps its release without a containerd restart.
func TestFluxRevertsAHandEdit(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureFluxSynced(ctx, t, "")
		c.ensureRunning(ctx, t, gvisorSleeper)
		r0 := c.Restarts()
		want := c.installed
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edited := 0
		for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
			for i := range cs {
				for j := range cs[i].Env {
					if cs[i].Env[j].Name == "GVISOR_VERSION" {
						cs[i].Env[j].Value = vBad
						edited++
					}
				}
			}
		}
		ds, err = c.Admin.AppsV1().DaemonSets(installerNS).Update(ctx, ds, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		if err != nil {
			t.Fatalf("the hand edit: %v", err)
		}
		t0 := time.Now()
		t.Logf("  .. edited GVISOR_VERSION of %d containers to %s: DaemonSet generation %d", edited, vBad, ds.Generation)
		tok := c.fluxReconcile(ctx, t, false)
		var back time.Duration // when the committed value was back (the Kustomization turns Ready after the rollout)
		c.waitFlux(ctx, t, 2*time.Minute, "reconcile "+tok+" handled", func(s fluxStatus) bool {
			return s.handled == tok && s.ready == "True"
		}, func(ctx context.Context, _ fluxStatus) {
			if back > 0 {
				return
			}
			if d, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{}); err == nil &&
				envOf(d.Spec.Template.Spec.InitContainers, "install-runsc", "GVISOR_VERSION") == want {
				back = time.Since(t0)
			}
		})
		ds, err = c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range [][]corev1.Container{ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers} {
			for _, x := range cs {
				for _, e := range x.Env {
					if e.Name == "GVISOR_VERSION" && e.Value != want {
						t.Errorf("%s's GVISOR_VERSION is %q after the reconcile, want %s", x.Name, e.Value, want)
					}
				}
			}
		}
		t.Logf("  .. reverted by the reconcile %.1fs after the edit, Ready after %.1fs: DaemonSet generation %d",
			back.Seconds(), time.Since(t0).Seconds(), ds.Generation)
		if err := c.WaitRollout(ctx, t, installRollout); err != nil {
			t.Fatal(err)
		}
		if v := c.stamp("version"); v != want {
			t.Errorf("stamp says %q, want %s", v, want)
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarted %d times", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.untouched(ctx, t, runcSleeper.name)
	})
}
