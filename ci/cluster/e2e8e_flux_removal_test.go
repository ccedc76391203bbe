//go:build clustertest

package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxRemovalAsDocumented (Flux 4): docs/gitops.md's "Removing gVisor from a cluster" through commits only. The gVisor
// pods drained, `gvisor.installer.mode: uninstall` committed: Flux applies it and turns Ready only once the uninstall
// finished (config.toml byte-identical to the original, binaries and runsc.toml gone, one containerd restart). Then
// `gvisor.enabled: false` committed: Flux prunes what docs/gitops.md says it does (the installer's namespace with the
// DaemonSet, and the RuntimeClass; the StorageClass stays, it is still in the overlay) and the node, already clean,
// does not change. runc pods run throughout, and a gVisor pod is refused (RuntimeClass "gvisor" not found).
func TestFluxRemovalAsDocumented(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureFluxSynced(ctx, t, "")
		c.ensureRunning(ctx, t, runcSleeper)
		version := c.installed
		// drain first, as docs/gitops.md says: the uninstall refuses while gVisor sandboxes are on the node
		c.drainGVisorPods(ctx, t)
		stop := c.sampleRunscContainers(t)
		r0 := c.Restarts()
		c.fluxSync(ctx, t, version, "uninstall", nil, "uninstall gVisor", true)
		stop()
		clean := func(when string) { t.Helper(); c.cleanAfterUninstall(t, r0, when) }
		clean("uninstall applied (Kustomization Ready)")
		t.Logf("  .. uninstalled: config.toml byte-identical to the original, /usr/local/bin empty, %d containerd restart", c.Restarts()-r0)

		t0 := time.Now()
		c.fluxSync(ctx, t, version, "uninstall", gvisorOff, "gvisor.enabled: false", true)
		waitGone(ctx, t, "DaemonSet "+installerDS, func(ctx context.Context) error {
			_, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
			return err
		})
		waitGone(ctx, t, "RuntimeClass gvisor", func(ctx context.Context) error {
			_, err := c.Admin.NodeV1().RuntimeClasses().Get(ctx, "gvisor", metav1.GetOptions{})
			return err
		})
		waitGone(ctx, t, "Namespace "+installerNS, func(ctx context.Context) error {
			_, err := c.Admin.CoreV1().Namespaces().Get(ctx, installerNS, metav1.GetOptions{})
			return err
		})
		if _, err := c.Admin.StorageV1().StorageClasses().Get(ctx, "gvisor-workspace", metav1.GetOptions{}); err != nil {
			t.Errorf("the StorageClass (still in the overlay) is gone: %v", err)
		}
		t.Logf("  .. pruned in %.1fs: %s", time.Since(t0).Seconds(), c.fluxPruneEvent(ctx))
		clean("after the prune")
		c.untouched(ctx, t, runcSleeper.name)
		c.checkNewRuncPod(ctx, t)
		// the RuntimeClass is gone: the API server refuses a gVisor pod outright (no pod is left to fail on the node)
		_, err := c.Admin.CoreV1().Pods("default").Create(ctx, gvisorProbe.pod(), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), `RuntimeClass "gvisor" not found`) {
			t.Errorf("a gVisor pod after the prune: %v, want refused: RuntimeClass \"gvisor\" not found", err)
		}
		t.Logf("  .. runc-sleeper untouched, a new runc pod ran, a gVisor pod is refused: %v", err)
	})
}

// fluxPruneEvent is the Kustomization's latest event that names deleted objects (kustomize-controller's change set).
func (c *Cluster) fluxPruneEvent(ctx context.Context) string {
	l, err := c.Admin.CoreV1().Events(fluxNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + fluxName})
	if err != nil {
		return err.Error()
	}
	found := "(no event names a deletion)"
	var at time.Time
	for _, e := range l.Items {
		if strings.Contains(e.Message, "deleted") && !eventTime(e).Before(at) {
			found, at = strings.ReplaceAll(strings.TrimSpace(e.Message), "\n", "; "), eventTime(e)
		}
	}
	return found
}
