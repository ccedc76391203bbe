//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUninstallRestoresConfigByteIdentical (scenario 5): with the gVisor pods deleted first, installer mode
// uninstall leaves config.toml byte-identical to the original, removes runsc.toml, the binaries, the stamp and
// gvisor-bin/, and restarts containerd exactly once, last; runc pods run; a gVisor pod fails again like the
// negative control.
//
// The uninstall refuses while containerd lists any runsc container, running or stopped: it fails until kubelet's
// container GC (every minute) removed the deleted pods' stopped containers, and the kubelet's back-off adds to that.
// That is the product's behaviour, reported (runsc containers sampled every 0.5 s), not worked around.
func TestUninstallRestoresConfigByteIdentical(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, "")
		c.ensureRunning(ctx, t, runcSleeper)
		version := c.installed
		c.drainGVisorPods(ctx, t)
		stop := c.sampleRunscContainers(t)
		r0 := c.Restarts()
		t0 := time.Now()
		c.ensureTarget(ctx, t, version, "uninstall")
		closed := c.watchGateClose(ctx, t)
		c.install(ctx, t, version, "uninstall")
		stop()
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		at, perr := closed()
		c.gateClosedFirst(ctx, t, t0, p, at, perr)
		log, err := c.Logs(ctx, installerNS, p.Name, "uninstall-runsc", false)
		if err != nil {
			t.Fatalf("no uninstall-runsc log: %v", err)
		}
		c.logContainers(ctx, t, p, "uninstall-runsc")
		n := c.Restarts() - r0
		t.Logf("  .. containerd restarts by the uninstall: %d", n)
		if n != 1 {
			t.Errorf("containerd restarts by the uninstall: %d, want 1", n)
		}
		// restarted last: after the binaries are removed, and nothing but the wait for CRI follows it, and what only a
		// verified restart may remove: the config backup (issue 33)
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		rm, rs := -1, -1
		for i, l := range lines {
			if strings.Contains(l, "removed gVisor (every release, containerd-shim-runsc-v1, gvisorgen-runsc)") && rm < 0 {
				rm = i
			}
			if strings.Contains(l, "restarting containerd") {
				rs = i
			}
		}
		if rm < 0 || rs < rm {
			t.Errorf("containerd was not restarted after the binaries were removed (removed at line %d, restart at %d)", rm, rs)
		}
		if rs >= 0 {
			for _, l := range lines[rs+1:] {
				if !strings.Contains(l, "containerd is back") && !strings.Contains(l, "done: gVisor is removed") &&
					!strings.Contains(l, "removed /etc/containerd/config.toml.gvisorgen-backup: containerd serves CRI") &&
					!strings.Contains(l, "removed gvisorgen's drop-in") &&
					!strings.Contains(l, "(gvisorgen created it for its drop-in; empty now)") {
					t.Errorf("something happened after the containerd restart: %s", l)
				}
			}
		}
		c.uninstalledClean(t, "uninstall")
		t.Logf("  .. config.toml byte-identical to the original, runsc.toml gone, /usr/local/bin empty; left in /etc/containerd: %s",
			lsDir(c.HostPath("/etc/containerd")))
		c.untouched(ctx, t, runcSleeper.name)
		c.checkNewRuncPod(ctx, t)
		msg := c.negativeControl(ctx, t)
		t.Logf("  .. runc-sleeper untouched, a new runc pod ran, an ungated gVisor pod fails again: %s", clip(msg, 200))
	})
}

// watchGateClose samples the node's gate label every 0.25 s while the uninstall runs. The moment it is gone, it
// creates a gVisor pod of the product's RuntimeClass (gvisor-probe): created while the runtime is being removed, it
// must never reach the node. closed() stops the sampling and says when the gate went (zero if it did not).
func (c *Cluster) watchGateClose(ctx context.Context, t *testing.T) (closed func() (time.Time, error)) {
	gk, _ := c.gateKeys(t)
	c.deletePod(ctx, t, "default", gvisorProbe.name)
	done, finished := make(chan struct{}), make(chan struct{})
	var at time.Time
	var perr error
	go func() {
		defer close(finished)
		for {
			n, err := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err == nil && n.Labels[gk] == "" {
				at = time.Now()
				_, perr = c.Admin.CoreV1().Pods("default").Create(ctx, gvisorProbe.pod(), metav1.CreateOptions{})
				return
			}
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return func() (time.Time, error) {
		close(done)
		<-finished
		return at, perr
	}
}

// gateClosedFirst: the uninstall's first init container removed both labels before anything else ran (its
// finishedAt is not after uninstall-runsc's startedAt), the gate was gone before containerd restarted, and the gVisor
// pod created the moment it went stayed Pending on no node.
func (c *Cluster) gateClosedFirst(ctx context.Context, t *testing.T, t0 time.Time, p *corev1.Pod, at time.Time, perr error) {
	t.Helper()
	if at.IsZero() || perr != nil {
		t.Fatalf("the gate label was not seen gone during the uninstall (create of gvisor-probe: %v)", perr)
	}
	var unlabelEnd, uninstallStart time.Time
	for _, s := range p.Status.InitContainerStatuses {
		if x := s.State.Terminated; x != nil {
			switch s.Name {
			case "unlabel-node":
				unlabelEnd = x.FinishedAt.Time
			case "uninstall-runsc":
				uninstallStart = x.StartedAt.Time
			}
		}
	}
	if len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].Name != "unlabel-node" || unlabelEnd.IsZero() || uninstallStart.Before(unlabelEnd) {
		t.Errorf("unlabel-node did not run first and finish before uninstall-runsc started (finished %s, uninstall-runsc started %s)", unlabelEnd, uninstallStart)
	}
	gate, v := c.nodeLabels(ctx, t)
	if gate != "" || v != "" {
		t.Errorf("node labels after the uninstall: gate %q, version %q; want none", gate, v)
	}
	restart := c.lastRestart()
	t.Logf("  .. gate closed at +%.1fs (seen), unlabel-node finished +%.0fs, uninstall-runsc (its last run) started +%.0fs, containerd restarted +%.1fs",
		at.Sub(t0).Seconds(), unlabelEnd.Sub(t0.Truncate(time.Second)).Seconds(), uninstallStart.Sub(t0.Truncate(time.Second)).Seconds(), restart.Sub(t0).Seconds())
	if !restart.After(at) {
		t.Errorf("containerd restarted (%s) before the gate was seen closed (%s)", restart, at)
	}
	t.Logf("  .. gvisor-probe, created when the gate closed: Pending on no node (%s)", c.waitUnschedulable(ctx, t, gvisorProbe.name))
	c.deletePod(ctx, t, "default", gvisorProbe.name)
}

// sampleRunscContainers logs, when stopped, how many runsc containers containerd still held (and how many of them
// ran) while the uninstall waited for them.
func (c *Cluster) sampleRunscContainers(t *testing.T) (stop func()) {
	t0 := time.Now()
	done, finished := make(chan struct{}), make(chan struct{})
	var first string
	var noneRunning, noneLeft time.Duration = -1, -1
	go func() {
		defer close(finished)
		for {
			all, running, err := c.runscContainers()
			at := time.Since(t0)
			if err == nil {
				if first == "" {
					first = fmt.Sprintf("%d (%d running) at +%.1fs", all, running, at.Seconds())
				}
				if running == 0 && noneRunning < 0 {
					noneRunning = at
				}
				if all == 0 && noneLeft < 0 {
					noneLeft = at
				}
			}
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		s := "runsc containers in containerd after the gVisor pods were deleted: " + first
		if noneRunning >= 0 {
			s += fmt.Sprintf(", none running from +%.1fs", noneRunning.Seconds())
		}
		if noneLeft >= 0 {
			s += fmt.Sprintf(", none left (kubelet container GC) from +%.1fs", noneLeft.Seconds())
		}
		t.Logf("  .. %s", s)
	}
}

// runscContainers counts the node's runsc containers (ctr in its namespaces) and those of them with a running task.
func (c *Cluster) runscContainers() (all, running int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := c.ctr(ctx, "containers", "ls")
	if err != nil {
		return 0, 0, err
	}
	run, err := c.runningTasks(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(cs), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && strings.Contains(f[2], "runsc") {
			all++
			if run[f[0]] {
				running++
			}
		}
	}
	return all, running, nil
}

// ctr runs ctr in the node's namespaces against its containerd, in CRI's namespace (k8s.io).
func (c *Cluster) ctr(ctx context.Context, args ...string) ([]byte, error) {
	out, err := c.nsenter(ctx, true, "ctr", append([]string{"--address=/run/containerd/containerd.sock", "-n", "k8s.io"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// runningTasks is the IDs of the node's containers whose task runs.
func (c *Cluster) runningTasks(ctx context.Context) (map[string]bool, error) {
	ts, err := c.ctr(ctx, "tasks", "ls")
	if err != nil {
		return nil, err
	}
	run := map[string]bool{}
	for _, l := range strings.Split(string(ts), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == "RUNNING" {
			run[f[0]] = true
		}
	}
	return run, nil
}
