//go:build clustertest

package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Releases side by side on the node (issue 27): /usr/local/bin/gvisor-releases/<version>/, one per release kept.

// releasesOnNode: the release folders on the node, sorted.
func (c *Cluster) releasesOnNode() []string {
	ents, _ := os.ReadDir(c.HostPath("/usr/local/bin/gvisor-releases"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (c *Cluster) assertReleases(t *testing.T, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := c.releasesOnNode(); !slices.Equal(got, want) {
		t.Errorf("release folders on the node: %v, want %v", got, want)
	}
}

// runscPath: the current release's runsc on the node (the stamp's version).
func (c *Cluster) runscPath() string {
	return "/usr/local/bin/gvisor-releases/" + c.stamp("version") + "/runsc"
}

// execAlive: an exec in the pod's container through the node's containerd (`ctr task exec`, in the node's mount, PID
// and network namespaces): the runsc that started the sandbox runs it.
func (c *Cluster) execAlive(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	c.execAliveIn(ctx, t, "default", name)
}

// execAliveIn: execAlive for a pod of namespace ns.
func (c *Cluster) execAliveIn(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	id := c.containerIDIn(ctx, t, ns, name)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// Judged by the exit status, which ctr passes on: with the suites side by side, ctr once returned 0 and none of
	// the process's output (its copy of the FIFO lost the race with the exit), so output is checked only when it came.
	out, err := exec.CommandContext(cctx, "nsenter", "-t", fmt.Sprint(c.pid), "-m", "-p", "-n", "--",
		"ctr", "-n", "k8s.io", "task", "exec", "--exec-id", fmt.Sprintf("gvz-e2e-%d", time.Now().UnixNano()),
		id, "/bin/sh", "-c", "echo alive; exit 7").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || (len(out) > 0 && strings.TrimSpace(string(out)) != "alive") {
		t.Fatalf("exec in %s (%s): want exit status 7 and \"alive\" (or nothing): %v: %s", name, id, err, out)
	}
}

func (c *Cluster) containerID(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	return c.containerIDIn(ctx, t, "default", name)
}

func (c *Cluster) containerIDIn(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s: %v", name, err)
	}
	return strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
}

// podRelease: the release whose runsc state root holds the pod's container (runsc's state file
// <container>_sandbox:<sandbox>.state), "" when none does.
func (c *Cluster) podRelease(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	return c.podReleaseIn(ctx, t, "default", name)
}

// podReleaseIn: podRelease for a pod of namespace ns.
func (c *Cluster) podReleaseIn(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	id := c.containerIDIn(ctx, t, ns, name)
	out, _ := c.nsenter(ctx, true, "sh", "-c", `ls -d /run/gvisorgen/runsc/*/k8s.io/"$1"_sandbox:*.state 2>/dev/null`, "sh", id)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(l, "/"); len(f) > 5 {
			return f[4]
		}
	}
	return ""
}

// waitReleaseUnused waits until no process runs a file of this node's release rel folder (as the installer checks
// before it removes a release: by the files' inodes). Not by path: every cluster's node has a folder of that name, and
// with the suites side by side another node's sandboxes run its own copy of the release (found when the controller
// suites ran beside make e2e-cluster, whose readiness scenario replaces its node's runsc under running pods).
func (c *Cluster) waitReleaseUnused(ctx context.Context, t *testing.T, rel string) {
	t.Helper()
	dir := c.HostPath("/usr/local/bin/gvisor-releases/" + rel)
	files := map[[2]uint64]string{}
	// every file under the folder, links followed (the installer's find -type f and stat -L)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		var st syscall.Stat_t
		if err == nil && !e.IsDir() && syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			files[[2]uint64{st.Dev, st.Ino}] = strings.TrimPrefix(p, dir+"/")
		}
		return err
	})
	if len(files) == 0 {
		t.Fatalf("release %s: no file in the node's folder %s to look for (%v): removed before its pod stopped?", rel, dir, err)
	}
	var users []string
	err = Poll(ctx, 250*time.Millisecond, 60*time.Second, "no process runs a file of "+dir, func(ctx context.Context) (bool, error) {
		users = users[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/exe")
		for _, p := range procs {
			var st syscall.Stat_t
			if syscall.Stat(p, &st) != nil {
				continue
			}
			if f, ok := files[[2]uint64{st.Dev, st.Ino}]; ok {
				users = append(users, filepath.Base(filepath.Dir(p))+" "+f)
			}
		}
		return len(users) == 0, nil
	})
	if err != nil {
		t.Fatalf("release %s still in use after its pod was deleted: %v (%s)", rel, err, strings.Join(users, "; "))
	}
}

// onRelease: the harness pod s runs, started on release rel (recreated when it runs on another).
func (c *Cluster) onRelease(ctx context.Context, t *testing.T, s podSpec, rel string) {
	t.Helper()
	if _, ok := c.states[s.name]; ok && c.podRelease(ctx, t, s.name) != rel {
		c.deletePod(ctx, t, "default", s.name)
		delete(c.states, s.name)
	}
	c.ensureRunning(ctx, t, s)
	if got := c.podRelease(ctx, t, s.name); got != rel {
		t.Fatalf("%s runs on release %q, want %s", s.name, got, rel)
	}
}

// acrossBump: the pod `name`, started on an older release, after the node moved to release to: its release is still
// on the node, the pod still execs (its runsc), it stops and is deleted cleanly, and the installer's next run leaves
// only to's folder, with no containerd restart.
func (c *Cluster) acrossBump(ctx context.Context, t *testing.T, name, to string) {
	t.Helper()
	r0 := c.Restarts()
	from := c.podRelease(ctx, t, name)
	if from == "" || from == to {
		t.Fatalf("%s runs on release %q, not on one older than %s", name, from, to)
	}
	if got := c.releasesOnNode(); !slices.Contains(got, from) || !slices.Contains(got, to) {
		t.Errorf("release folders on the node: %v, want %s and %s among them", got, from, to)
	}
	c.execAlive(ctx, t, name)
	c.restartInSandbox(ctx, t, name, from)
	c.deletePod(ctx, t, "default", name)
	delete(c.states, name)
	// The API forgets the pod before its sandbox's processes (runsc, the release's shim) have all exited: seen on
	// containerd 1.6 with the 2022 shim (stop 43's CI run: the installer rightly kept the release a process still
	// ran). The installer keeps a release while any process runs one of its files, so wait for them first.
	c.waitReleaseUnused(ctx, t, from)
	c.rerunInstaller(ctx, t)
	c.assertReleases(t, to)
	if n := c.Restarts() - r0; n != 0 {
		t.Errorf("containerd restarted %d times", n)
	}
	t.Logf("  .. %s (started on %s) exec'd, restarted its container on %s, stopped and was deleted on %s; the next installer run left only %s; 0 restarts", name, from, from, to, to)
}

// restartInSandbox: the pod's container is killed and the kubelet restarts it, a new container in the same sandbox,
// which the shim creates with the runsc.toml of now (the release after the bump): gvisorgen-runsc runs it with the
// runsc of the release that started the sandbox (before it, runsc failed: "cannot load sandbox"). It runs on that
// release (its state file is in that release's root) and execs.
func (c *Cluster) restartInSandbox(ctx context.Context, t *testing.T, name, rel string) {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s: %v", name, err)
	}
	id, n0 := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://"), p.Status.ContainerStatuses[0].RestartCount
	if out, err := c.nsenter(ctx, true, "ctr", "-n", "k8s.io", "task", "kill", "-s", "SIGKILL", id); err != nil {
		t.Fatalf("kill the container of %s: %v: %s", name, err, out)
	}
	t0 := time.Now()
	var last string
	err = Poll(ctx, 500*time.Millisecond, sandboxRestart, name+"'s container restarted and running", func(ctx context.Context) (bool, error) {
		p, err := c.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		s := p.Status.ContainerStatuses[0]
		if w := s.State.Waiting; w != nil {
			last = w.Reason + ": " + w.Message
		}
		return s.RestartCount > n0 && s.State.Running != nil && strings.TrimPrefix(s.ContainerID, "containerd://") != id, nil
	})
	if err != nil {
		t.Fatalf("%v (last waiting: %s)", err, last)
	}
	if got := c.podRelease(ctx, t, name); got != rel {
		t.Fatalf("%s's restarted container runs on release %q, want %s (its sandbox's)", name, got, rel)
	}
	c.execAlive(ctx, t, name)
	t.Logf("  .. %s's container killed: restarted in its sandbox in %.1fs, on %s, and execs", name, time.Since(t0).Seconds(), rel)
}

// rerunInstaller: the installer's next run on the node as docs/gitops.md gives it without a new rollout: its pod on the
// node deleted, the DaemonSet's new pod runs the init containers again. Not a rollout restart: that edits the
// DaemonSet, which Flux owns and reverts in the Flux scenarios (a second rollout, seen by the next scenario).
func (c *Cluster) rerunInstaller(ctx context.Context, t *testing.T) {
	t.Helper()
	old, err := c.InstallerPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := c.Admin.CoreV1().Pods(installerNS).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the installer pod %s: %v", old.Name, err)
	}
	err = Poll(ctx, 500*time.Millisecond, installRollout, "a new installer pod Ready", func(ctx context.Context) (bool, error) {
		p, err := c.InstallerPod(ctx)
		if err != nil {
			return false, nil
		}
		return p.UID != old.UID && podReady(p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("  .. installer pod %s deleted: the new one ran and is Ready in %.1fs", old.Name, time.Since(t0).Seconds())
}
