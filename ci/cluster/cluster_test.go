//go:build clustertest

package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// Cluster is one simulated node (ci/cluster/node.sh as PID 1 of its own user, mount, pid, net, uts and ipc
// namespaces) running a single-node cluster on containerd V, and what the tests know of its state.
type Cluster struct {
	V    string            // containerd version: "16", "17" or "24"
	Dir  string            // its scratch folder: work/c<V>
	Repo string            // the test target's root (a temp copy of cue/, plus targets/e2e.yaml)
	env  map[string]string // node.sh's environment (node.env, prepare.sh)

	pid    int                  // the namespaces' PID 1 (node.sh), as this process sees it
	exited chan struct{}        // closed when PID 1 has exited
	netns  *os.File             // its network namespace, where the API server and the mirror listen
	Admin  kubernetes.Interface // a client with the admin token (system:masters)
	token  string               // the admin token
	mapper *restmapper.DeferredDiscoveryRESTMapper
	dyn    dynamic.Interface

	failed string // the first test that failed on this cluster: later ones skip
	up     error  // why it did not come up

	// state the scenarios leave for the next (so that each can also run alone: see the ensure* helpers)
	installed string            // the gVisor version installed by the product, "" when none is
	generated string            // "<version> <mode>" the generated folder was last rendered for
	registry  bool              // the OCI registry serves in the node's network namespace (serveRegistry)
	noQuota   bool              // render the target without its priority-class quota (scenario 2q)
	classes   string            // gvisor.classes of the target, YAML under "  classes:" ("" for none: scenario 3c)
	early     bool              // gvisor-sleeper was created before the installer and waits for the gate (scenario 1)
	fetched   string            // install-runsc's log of an earlier pod that downloaded the release (scenario 1f)
	states    map[string]string // a harness pod's "containerID restartCount phase" when it was last checked
}

// use starts the test of one containerd version: in parallel with the other versions, on its cluster (brought up
// at first use), skipped when an earlier test failed on that cluster, with a dump when this one fails.
func use(t *testing.T, v string) *Cluster {
	t.Helper()
	t.Parallel()
	t0 := time.Now() // the bring-up, when this test brings the cluster up, is part of its time
	c := cluster(t, v)
	if c.failed != "" {
		t.Skipf("skipped: %s failed on this cluster", c.failed)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.failed = t.Name()
			c.dump(t)
		}
		r := fmt.Sprintf("%s %s %5.1fs", map[bool]string{true: "FAIL", false: "PASS"}[t.Failed()], t.Name(), time.Since(t0).Seconds())
		t.Log(r)
		summaryMu.Lock()
		summary = append(summary, "c"+v+" "+r)
		summaryMu.Unlock()
	})
	return c
}

// cluster returns version v's cluster, bringing it up the first time.
func cluster(t *testing.T, v string) *Cluster {
	t.Helper()
	clustersMu.Lock()
	c := clusters[v]
	if c == nil {
		c = &Cluster{V: v, Dir: filepath.Join(work, "c"+v), states: map[string]string{}}
		c.Repo = filepath.Join(c.Dir, "repo")
		clusters[v] = c
		clustersMu.Unlock()
		t0 := time.Now()
		if c.up = c.start(); c.up != nil {
			c.failed = "the bring-up"
		} else {
			t.Logf("c%s: cluster up in %.1fs: %s", v, time.Since(t0).Seconds(), c.nodeLogSummary())
		}
	} else {
		clustersMu.Unlock()
	}
	if c.up != nil {
		tail, _ := tailFile(filepath.Join(c.Dir, "run/logs/node.log"), 40)
		t.Fatalf("containerd %s: the cluster did not come up: %v\nnode.log:\n%s", v, c.up, tail)
	}
	return c
}

// start brings the node up: kubelet's cgroupRoot in every v1 hierarchy, node.sh as PID 1 of new namespaces, then a
// bounded wait for its READY (node.sh bounds each of its own steps too).
func (c *Cluster) start() error {
	env, err := readEnv(filepath.Join(c.Dir, "node.env"))
	if err != nil {
		return err
	}
	c.env = env
	if err := c.writeAdmissionConfig(); err != nil {
		return err
	}
	if err := c.makeCgroups(); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(c.Dir, "run/logs/node.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("bash", filepath.Join(repoRoot, "ci/cluster/node.sh"))
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		UidMappings: m, GidMappings: m, GidMappingsEnableSetgroups: true,
		Setsid: true, // a Ctrl-C goes to this process, which stops the nodes (TestMain)
	}
	if !keep {
		// the node dies with this test binary, even when it is killed (-timeout, SIGKILL)
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	started := make(chan error)
	c.exited = make(chan struct{})
	go func() {
		// Pdeathsig fires when the thread that started the child exits: keep this one for the node's lifetime.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
			close(c.exited)
		}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start node.sh: %w", err)
	}
	c.pid = cmd.Process.Pid
	os.WriteFile(filepath.Join(c.Dir, "run/ns.pid"), []byte(fmt.Sprint(c.pid)), 0o644)
	ready, failed := filepath.Join(c.Dir, "run/READY"), filepath.Join(c.Dir, "run/FAILED")
	for end := time.Now().Add(240 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if exists(ready) {
			break
		}
		if exists(failed) {
			return errors.New("node.sh failed")
		}
		select {
		case <-c.exited:
			return errors.New("node.sh exited")
		default:
		}
		if time.Now().After(end) {
			return errors.New("not Ready within 240s")
		}
	}
	if c.netns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", c.pid)); err != nil {
		return fmt.Errorf("the node's network namespace: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "conf/admin.token"))
	if err != nil {
		return err
	}
	c.token = strings.TrimSpace(string(b))
	c.Admin, err = c.ClientForToken(c.token)
	return err
}

// cgroupRoot is kubelet's cgroupRoot (prepare.sh names it: gvisorgen-e2e-<V>-<run>), without its leading slash.
func (c *Cluster) cgroupRoot() string { return c.env["GVZ_CGROUP_ROOT"] }

func (c *Cluster) cgroups() []string {
	if c.cgroupRoot() == "" {
		return nil
	}
	m, _ := filepath.Glob("/sys/fs/cgroup/*/" + c.cgroupRoot())
	return m
}

// makeCgroups creates kubelet's cgroupRoot in every v1 hierarchy.
func (c *Cluster) makeCgroups() error {
	if c.cgroupRoot() == "" {
		return fmt.Errorf("node.env names no GVZ_CGROUP_ROOT")
	}
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() || filepath.Base(h) == "unified" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(h, c.cgroupRoot()), 0o755); err != nil {
			return fmt.Errorf("cgroupRoot: %w", err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile("/sys/fs/cgroup/cpuset/" + f)
		if err == nil {
			err = os.WriteFile("/sys/fs/cgroup/cpuset/"+c.cgroupRoot()+"/"+f, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("cgroupRoot %s: %w", f, err)
		}
	}
	return nil
}

// stop kills the namespaces' PID 1 (every process in them dies with it) and removes the cgroups.
func (c *Cluster) stop() error {
	if c.pid != 0 {
		syscall.Kill(c.pid, syscall.SIGKILL)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
		}
		c.pid = 0
		os.Remove(filepath.Join(c.Dir, "run/ns.pid"))
	}
	if c.netns != nil {
		c.netns.Close()
		c.netns = nil
	}
	for i := 0; i < 50; i++ {
		left := c.cgroups()
		if len(left) == 0 {
			return nil
		}
		for _, d := range left {
			removeCgroup(d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("containerd %s: cgroups left: %s", c.V, strings.Join(c.cgroups(), " "))
}

// removeCgroup removes a cgroup and its children, deepest first (rmdir only: cgroupfs has no files to delete).
func removeCgroup(d string) {
	var dirs []string
	filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, p := range dirs {
		syscall.Rmdir(p)
	}
}

// nsenter runs a command of the machine in the node's network namespace (-n), and its mount namespace too with
// mount=true: the mirror and the API server listen only there, the node's containerd socket is in its private /run.
func (c *Cluster) nsenter(ctx context.Context, mount bool, name string, args ...string) ([]byte, error) {
	a := []string{"-t", fmt.Sprint(c.pid), "-n"}
	if mount {
		a = append(a, "-m")
	}
	a = append(append(a, "--", name), args...)
	return exec.CommandContext(ctx, "nsenter", a...).CombinedOutput()
}

// HostPath maps a path of the simulated node's host to the scratch folder node.sh binds over it (the binds file);
// other paths are the machine's own.
func (c *Cluster) HostPath(p string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "binds"))
	for _, l := range strings.Split(string(b), "\n") {
		if d, s, ok := strings.Cut(l, " "); ok && (p == d || strings.HasPrefix(p, d+"/")) {
			return filepath.Join(c.Dir, "host", s, strings.TrimPrefix(p, d))
		}
	}
	return p
}

// ReadHostFile reads a file of the node's host (see HostPath).
func (c *Cluster) ReadHostFile(p string) ([]byte, error) { return os.ReadFile(c.HostPath(p)) }

// RestartLog is the node's "systemd" log of containerd restarts (node.sh writes a line per restart the fake
// systemctl asked for).
func (c *Cluster) RestartLog() []string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "run/logs/systemd.log"))
	var l []string
	for _, s := range strings.Split(string(b), "\n") {
		if strings.Contains(s, "restart containerd") {
			l = append(l, s)
		}
	}
	return l
}

// lastRestart is the time of the node's last containerd restart (zero when none).
func (c *Cluster) lastRestart() time.Time {
	l := c.RestartLog()
	if len(l) == 0 {
		return time.Time{}
	}
	f, err := strconv.ParseFloat(strings.Fields(l[len(l)-1])[0], 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(f*1e9))
}

// Restarts counts the containerd restarts so far.
func (c *Cluster) Restarts() int { return len(c.RestartLog()) }

func (c *Cluster) nodeLogSummary() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "run/logs/node.log"))
	var s []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "containerd ok") || strings.Contains(l, "CLUSTER UP") {
			if i := strings.Index(l, "+"); i >= 0 {
				l = l[i:]
			}
			s = append(s, l)
		}
	}
	return strings.Join(s, ", ")
}

func readEnv(p string) (map[string]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("node environment: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			env[k] = v
		}
	}
	return env, s.Err()
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// tailFile returns the last n lines of a file.
func tailFile(p string, n int) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n"), nil
}

// forEachVersion runs a scenario as one subtest per containerd version (c16, c17, c24), side by side, each bounded.
func forEachVersion(t *testing.T, f func(ctx context.Context, t *testing.T, c *Cluster)) {
	// go test reports a parent of parallel subtests as taking 0s: the scenario's wall time, for both versions
	t0 := time.Now()
	t.Cleanup(func() {
		t.Logf("%s: wall time %.1fs (versions %s)", t.Name(), time.Since(t0).Seconds(), strings.Join(versions, ", "))
	})
	for _, v := range versions {
		t.Run("c"+v, func(t *testing.T) {
			c := use(t, v)
			// a scenario's own bound: 20 minutes, above its waits (installRollout, syncRollout: a bump on the slow
			// kind of machine outlasted the 6 minutes this was, 2026-12-06)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
			defer cancel()
			f(ctx, t, c)
		})
	}
}
