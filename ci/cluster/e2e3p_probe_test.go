//go:build clustertest

package cluster

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestReadinessTracksTheNodesGVisor (scenario 3p): the long-running runsc-ready container runs unprivileged — as
// the API server has it: not privileged, uid 65534, no privilege escalation, all capabilities dropped, read-only root
// and read-only host mounts — and still keeps the installer pod Ready only while the node really has the gVisor it
// installed: a runsc replaced on the host makes the pod unready within a probe period, the installed bytes put back
// make it Ready again, and containerd is not restarted.
func TestReadinessTracksTheNodesGVisor(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		r0 := c.Restarts()
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "runsc-ready" })
		if i < 0 {
			t.Fatalf("pod %s has no runsc-ready container", p.Name)
		}
		ready := p.Spec.Containers[i]
		sc := ready.SecurityContext
		switch {
		case sc == nil:
			t.Fatal("runsc-ready has no securityContext")
		case sc.Privileged != nil && *sc.Privileged:
			t.Error("runsc-ready is privileged")
		case sc.RunAsUser == nil || *sc.RunAsUser != 65534:
			t.Errorf("runsc-ready runs as %v, want 65534", sc.RunAsUser)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Error("runsc-ready allows privilege escalation")
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Error("runsc-ready's root filesystem is writable")
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
			t.Errorf("runsc-ready's capabilities: %+v, want all dropped, none added", sc.Capabilities)
		}
		for _, m := range ready.VolumeMounts {
			if m.MountPath != "/tmp" && !m.ReadOnly {
				t.Errorf("runsc-ready mounts %s read-write", m.MountPath)
			}
		}
		if !podReady(p) {
			if p, err = c.WaitPod(ctx, installerNS, p.Name, 75*time.Second, "Ready", podReady); err != nil {
				t.Fatal(err)
			}
		}

		// Replace, not rewrite: a running sandbox keeps executing the old inode (writing it would be ETXTBSY).
		bin := c.HostPath(c.runscPath())
		orig, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		swap := func(b []byte) {
			t.Helper()
			if err := os.WriteFile(bin+".gvz-e2e", b, fi.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(bin+".gvz-e2e", bin); err != nil {
				t.Fatal(err)
			}
		}
		swap(append(slices.Clone(orig), 0))
		restored := false
		defer func() {
			if !restored {
				swap(orig)
			}
		}()
		t0 := time.Now()
		if _, err := c.WaitPod(ctx, installerNS, p.Name, 75*time.Second, "not Ready after runsc changed on the host",
			func(p *corev1.Pod) bool { return !podReady(p) }); err != nil {
			t.Fatal(err)
		}
		t.Logf("  .. runsc changed on the host: the installer pod is not Ready after %.1fs", time.Since(t0).Seconds())
		swap(orig)
		restored = true
		t0 = time.Now()
		if _, err := c.WaitPod(ctx, installerNS, p.Name, 75*time.Second, "Ready again", podReady); err != nil {
			t.Fatal(err)
		}
		t.Logf("  .. the installed runsc back: Ready again after %.1fs", time.Since(t0).Seconds())
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd was restarted %d times", n)
		}
	})
}
