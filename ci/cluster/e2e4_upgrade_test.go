//go:build clustertest

package cluster

import (
	"context"
	"crypto/sha256"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestUpgradeToArchiveLayoutKeepsContainerdAndPods (scenario 4): gvisor.version 20221219 (binaries layout: Debian's
// 2022 runsc and shim, runsc network "none") -> 20260801 (archive layout: ci/gvisor/build.sh's gvisor.tar.bz2, the
// current runsc and shim with gvisor-bin/gvisor_sentry) and back, a gVisor pod running across each step. The DaemonSet
// pins the archive and carries the release's containerd floor (CONTAINERD_MIN_VERSION 1.7.0: its shim answers
// containerd 2's bootstrap handshake).
//   - c24, c17: it rolls, the stamp names 20260801 and the archive layout, gvisor-bin/gvisor_sentry is installed in the
//     release's folder, containerd is not restarted, the running 2022 pod is untouched, still execs (its own runsc),
//     stops and is deleted cleanly, and the installer's next run removes 20221219's folder; the smoke pod runs on
//     20260801. Then the rollback to 20221219 with a pod of 20260801 running: the same, the other way.
//   - c16: install-runsc refuses before downloading anything, naming containerd 1.6.20 and the floor; the installer
//     pod is never Ready, containerd is not restarted, config and stamp (20221219) unchanged, the running gVisor pod
//     untouched; 20240212 (the current runsc beside the 2022 shim) then rolls out with no restart, the 2022 pod execs,
//     stops and is deleted, 20221219's folder goes at the next run, and the smoke pod runs.
//
// Before releases lived side by side, a sandbox was stopped by whatever runsc was installed then: across this gap it
// could not be (containerd 2.4.2: `no control socket found for sandbox`; docs/gitops.md, Upgrading gVisor).
func TestUpgradeToArchiveLayoutKeepsContainerdAndPods(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vDeb)
		c.onRelease(ctx, t, gvisorSleeper, vDeb)
		t.Logf("  .. from %s: %s", vDeb, c.runscVersion(ctx, t))
		c.versionLabel(ctx, t, vDeb)
		c.smokePV(ctx, t)
		r0 := c.Restarts()
		c.ensureTarget(ctx, t, vUp, "install")
		if sum := c.published(t, vUp, "gvisor.tar.bz2"); !c.pinnedInDS(t, "gvisor.tar.bz2", sum) {
			t.Fatalf("the DaemonSet does not pin gvisor.tar.bz2 of %s to %s", vUp, sum)
		}
		if ds, _ := os.ReadFile(c.daemonSetFile()); !regexp.MustCompile(`name: CONTAINERD_MIN_VERSION\s+value: "?1\.7\.0"?\n`).Match(ds) {
			t.Fatalf("the DaemonSet does not carry %s's containerd floor 1.7.0", vUp)
		}
		if c.V == "16" {
			cfg0, _ := c.ReadHostFile("/etc/containerd/config.toml")
			log, err := c.applyRefused(ctx, t, "a release whose shim containerd 1.6 cannot start")
			msg := errLine(log, err)
			for _, want := range []string{"refusing to install gVisor " + vUp + ": its shim needs containerd >= 1.7.0", "this node runs containerd 1.6.20", "nothing was installed"} {
				if !strings.Contains(msg, want) {
					t.Errorf("install-runsc's refusal lacks %q: %s", want, msg)
				}
			}
			if strings.Contains(log, "downloading") {
				t.Errorf("install-runsc downloaded before refusing")
			}
			if cfg, _ := c.ReadHostFile("/etc/containerd/config.toml"); sha256.Sum256(cfg) != sha256.Sum256(cfg0) {
				t.Errorf("config.toml changed")
			}
			if v := c.stamp("version"); v != vDeb {
				t.Errorf("the stamp changed to version %q", v)
			}
			if _, err := os.Stat(c.HostPath("/usr/local/bin/gvisor-releases/" + vUp)); err == nil {
				t.Errorf("%s was installed", vUp)
			}
			if n := c.Restarts() - r0; n != 0 {
				t.Errorf("the refused upgrade restarted containerd %d times", n)
			}
			c.untouched(ctx, t, gvisorSleeper.name)
			// the node still runs what it ran: the gate stays open and names that release
			c.versionLabel(ctx, t, vDeb)
			t.Logf("  .. refused on containerd 1.6: stamp %s, config unchanged, 0 restarts, gvisor-sleeper untouched", c.stamp("version"))
			// on to a release this node can run: 20240212 (the current runsc beside the 2022 shim)
			c.install(ctx, t, vGood, "install")
			c.versionLabel(ctx, t, vGood)
			if n := c.Restarts() - r0; n != 0 {
				t.Errorf("installing %s after the refusal restarted containerd %d times", vGood, n)
			}
			c.untouched(ctx, t, gvisorSleeper.name)
			c.acrossBump(ctx, t, gvisorSleeper.name, vGood)
			c.smoke(ctx, t)
			return
		}
		c.install(ctx, t, vUp, "install")
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.logContainers(ctx, t, p, "install-runsc", "configure-containerd")
		c.versionLabel(ctx, t, vUp)
		if v := c.stamp("version"); v != vUp {
			t.Errorf("stamp says version %q, want %s", v, vUp)
		}
		if l := c.stamp("layout"); l != "archive" {
			t.Errorf("stamp says layout %q, want archive", l)
		}
		if fi, err := os.Stat(c.HostPath("/usr/local/bin/gvisor-releases/" + vUp + "/gvisor-bin/gvisor_sentry")); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("gvisor-bin/gvisor_sentry of the archive is not installed: %v", err)
		}
		if rt, _ := c.ReadHostFile("/etc/containerd/runsc/runsc.toml"); strings.Contains(string(rt), "network") {
			t.Errorf("runsc.toml still sets the network:\n%s", rt)
		}
		n := c.Restarts() - r0
		t.Logf("  .. stamp: version %s, layout %s; containerd restarts by the upgrade: %d", c.stamp("version"), c.stamp("layout"), n)
		if n != 0 {
			t.Errorf("the upgrade restarted containerd %d times, want 0", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		// the 2022 sandbox keeps Debian's runsc: it execs, stops and is deleted; its release goes at the next run
		c.acrossBump(ctx, t, gvisorSleeper.name, vUp)
		c.smoke(ctx, t)
		// and the rollback, a sandbox of the current release running across it
		c.onRelease(ctx, t, gvisorSleeper, vUp)
		r1 := c.Restarts()
		c.install(ctx, t, vDeb, "install")
		c.versionLabel(ctx, t, vDeb)
		if n := c.Restarts() - r1; n != 0 {
			t.Errorf("the rollback restarted containerd %d times, want 0", n)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.acrossBump(ctx, t, gvisorSleeper.name, vDeb)
		c.smoke(ctx, t)
	})
}
