//go:build clustertest

package cluster

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxRejectedCommitLeavesTheNodeAlone (Flux 3): a commit that vet and generate accept but the API server refuses
// on update: the StorageClass's parameters changed (immutable), together with a change of the installer's pod
// template (its memory limit). The Kustomization reports Ready=False with the server's message and keeps the last
// applied revision; nothing was applied (Flux applies the StorageClass in a stage before the DaemonSet: the DaemonSet
// keeps its generation), nothing on the node changed (config, stamp, no restart, pods untouched). A fix commit (the
// values back) makes it Ready again.
func TestFluxRejectedCommitLeavesTheNodeAlone(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureFluxSynced(ctx, t, "")
		c.ensureRunning(ctx, t, gvisorSleeper)
		ks0, err := c.fluxGet(ctx, ksGVR)
		if err != nil {
			t.Fatal(err)
		}
		r0 := c.Restarts()
		cfg0, _ := c.ReadHostFile("/etc/containerd/config.toml")
		ds0, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bad := func(y string) string {
			y = strings.Replace(y, "  installer:\n", "  installer:\n    resources: {limits: {memory: 300Mi}}\n", 1)
			return y + "storageClass: {parameters: {gvisorgen-e2e: changed}}\n"
		}
		sha := c.fluxCommit(ctx, t, c.installed, "install", bad, "StorageClass parameters changed (immutable) and the installer's memory limit")
		c.fluxReconcile(ctx, t, true)
		ks := c.waitFlux(ctx, t, 2*time.Minute, "the bad commit refused", func(s fluxStatus) bool {
			return s.ready == "False" && strings.HasSuffix(s.attempt, sha)
		}, nil)
		t.Logf("  .. Kustomization Ready=False %s: %s", ks.reason, clip(ks.message, 400))
		for _, want := range []string{"StorageClass/gvisor-workspace", "parameters", "immutable"} {
			if !strings.Contains(ks.message, want) {
				t.Errorf("the Kustomization's message lacks %q: %s", want, ks.message)
			}
		}
		if ks.applied != ks0.applied {
			t.Errorf("the last applied revision moved: %s -> %s", ks0.applied, ks.applied)
		}
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Generation != ds0.Generation {
			t.Errorf("the DaemonSet changed: generation %d -> %d", ds0.Generation, ds.Generation)
		}
		sc, err := c.Admin.StorageV1().StorageClasses().Get(ctx, "gvisor-workspace", metav1.GetOptions{})
		if err != nil || sc.Parameters["gvisorgen-e2e"] != "" {
			t.Errorf("the StorageClass changed (%v): %v", err, sc.Parameters)
		}
		if cfg, _ := c.ReadHostFile("/etc/containerd/config.toml"); sha256.Sum256(cfg) != sha256.Sum256(cfg0) {
			t.Errorf("config.toml changed")
		}
		if v := c.stamp("version"); v != c.installed {
			t.Errorf("the stamp says %q, want %s", v, c.installed)
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarted %d times", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.untouched(ctx, t, runcSleeper.name)
		t.Logf("  .. DaemonSet generation %d unchanged, StorageClass unchanged, node unchanged (config, stamp %s, 0 restarts), pods untouched",
			ds.Generation, c.stamp("version"))
		// the fix: the values back, a new commit
		c.fluxSync(ctx, t, c.installed, "install", nil, "StorageClass parameters back", true)
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarted %d times", n)
		}
	})
}
