//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSandboxOverheadMeasured (scenario 2o) is the measurement behind the RuntimeClass's overhead.podFixed defaults
// (docs/security.md, "Sandbox overhead"): the same idle pod (busybox sleep) under gVisor and under runc, each pod's cgroup read
// from the node's cgroup v1 hierarchies after it settled: the working set (memory.usage_in_bytes minus
// total_inactive_file, as kubelet counts it) and the CPU time since start (cpuacct.usage), then again 10 s later for
// the CPU at rest. The gVisor pod's cgroup
// holds the sentry and the gofer, the runc pod's only its processes: the difference is what a sandbox costs at rest.
// It logs the figures; it fails only when a cgroup cannot be read.
func TestSandboxOverheadMeasured(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		c.ensureRunning(ctx, t, runcSleeper)
		c.ensureRunning(ctx, t, gvisorSleeper)
		time.Sleep(5 * time.Second) // past start-up
		type m struct{ ws, rss, cpu int64 }
		read := func(name string) m {
			p, err := c.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir := c.podCgroup(t, "memory", string(p.UID))
			usage := readInt(t, filepath.Join(dir, "memory.usage_in_bytes"))
			stat := readStat(t, filepath.Join(dir, "memory.stat"))
			cpu := readInt(t, filepath.Join(c.podCgroup(t, "cpuacct", string(p.UID)), "cpuacct.usage"))
			age := time.Since(p.CreationTimestamp.Time).Seconds()
			r := m{ws: usage - stat["total_inactive_file"], rss: stat["total_rss"], cpu: cpu}
			t.Logf("  .. %s: working set %.1f MiB, rss %.1f MiB, cpu %.0f ms over %.0f s (%.2f millicores)", name,
				mib(r.ws), mib(r.rss), float64(cpu)/1e6, age, float64(cpu)/1e6/age)
			return r
		}
		g, r := read(gvisorSleeper.name), read(runcSleeper.name)
		t.Logf("  .. gVisor - runc: working set %+.1f MiB, rss %+.1f MiB", mib(g.ws-r.ws), mib(g.rss-r.rss))
		// At rest: the CPU both use over the next 10 s.
		time.Sleep(10 * time.Second)
		g2, r2 := read(gvisorSleeper.name), read(runcSleeper.name)
		t.Logf("  .. at rest over 10 s: gVisor %.2f millicores, runc %.2f millicores", float64(g2.cpu-g.cpu)/1e6/10, float64(r2.cpu-r.cpu)/1e6/10)
	})
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// podCgroup finds a pod's cgroup in one v1 hierarchy under this node's cgroupRoot (any QoS class).
func (c *Cluster) podCgroup(t *testing.T, hierarchy, uid string) string {
	t.Helper()
	root := fmt.Sprintf("/sys/fs/cgroup/%s/%s", hierarchy, c.cgroupRoot())
	for _, pat := range []string{"*/pod" + uid, "*/*/pod" + uid} {
		if m, _ := filepath.Glob(filepath.Join(root, pat)); len(m) == 1 {
			return m[0]
		}
	}
	t.Fatalf("no cgroup of pod %s under %s", uid, root)
	return ""
}

func readInt(t *testing.T, p string) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}

func readStat(t *testing.T, p string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}
