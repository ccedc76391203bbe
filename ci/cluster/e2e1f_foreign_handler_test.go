//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestForeignRunscHandlerKeepsTheGateClosed (scenario 1f, issue 33): the node's containerd config carries a `runsc`
// handler of runtime type io.containerd.runc.v2 (a site drop-in in conf.d on 2.4, the main config on 1.6 and 1.7,
// whose default config imports nothing). The installer refuses it: configure-containerd fails naming the file and
// the runtime type, again on its retries; the config is unchanged, containerd is not restarted, the gate stays
// closed and gvisor-sleeper (scenario 1) stays Pending. Then the handler goes, and the DaemonSet with it: scenario 2
// applies it again, its pod writes gvisorgen's own handler, the gate opens and gvisor-sleeper runs.
func TestForeignRunscHandlerKeepsTheGateClosed(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		if c.installed != "" {
			t.Skipf("the node already runs gVisor %s (this scenario needs a node without it)", c.installed)
		}
		c.ensureTarget(ctx, t, vGood, "install")
		const mainCfg = "/etc/containerd/config.toml"
		file, prefix := mainCfg, `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`
		if c.V == "24" {
			file, prefix = "/etc/containerd/conf.d/zz-site.toml", `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`
		}
		orig, err := c.ReadHostFile(mainCfg)
		if err != nil {
			t.Fatal(err)
		}
		foreign := fmt.Sprintf("\n[%s.runsc]\n  runtime_type = \"io.containerd.runc.v2\"\n", prefix)
		dir := c.HostPath("/etc/containerd/conf.d")
		_, noDir := os.Stat(dir)
		if file == mainCfg {
			err = os.WriteFile(c.HostPath(file), append(bytes.Clone(orig), foreign...), 0o644)
		} else if err = os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(c.HostPath(file), []byte("version = 3\n"+foreign), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		withForeign, _ := c.ReadHostFile(mainCfg)
		r0 := c.Restarts()
		t0 := time.Now()

		c.applyGenerated(ctx, t)
		var p *corev1.Pod
		err = Poll(ctx, 500*time.Millisecond, 90*time.Second, "configure-containerd refused, and refused again on its retry", func(ctx context.Context) (bool, error) {
			l, err := c.Admin.CoreV1().Pods(installerNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=runsc-installer"})
			if err != nil || len(l.Items) == 0 {
				return false, err
			}
			p = &l.Items[0]
			if podReady(p) {
				return false, Stop(fmt.Errorf("the installer pod %s became Ready with a runc-typed runsc handler", p.Name))
			}
			s := initStatus(p, "configure-containerd")
			return failedAgain(s), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		log, err := c.failedRunLog(ctx, p.Name, "configure-containerd")
		if err != nil {
			t.Fatal(err)
		}
		want := "ERROR: a runsc runtime handler that gvisorgen did not write is defined in " + file + `: containerd would run it with runtime_type = "io.containerd.runc.v2"`
		if !strings.Contains(log, want) {
			t.Fatalf("configure-containerd's log lacks %q:\n%s", want, log)
		}
		t.Logf("  .. configure-containerd refused (+%.1fs, %d retries): %s", time.Since(t0).Seconds(), initStatus(p, "configure-containerd").RestartCount, want)
		if gate, v := c.nodeLabels(ctx, t); gate != "" || v != "" {
			t.Errorf("the gate opened on a node with a runc-typed runsc handler: gate %q, version %q", gate, v)
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd was restarted %d times by a refused install", n)
		}
		if now, _ := c.ReadHostFile(mainCfg); !bytes.Equal(now, withForeign) {
			t.Errorf("config.toml changed by a refused install:\n%s", now)
		}
		if gp, err := c.Admin.CoreV1().Pods("default").Get(ctx, gvisorSleeper.name, metav1.GetOptions{}); err == nil {
			if gp.Status.Phase != corev1.PodPending || gp.Spec.NodeName != "" {
				t.Errorf("gvisor-sleeper is %s on %q, want Pending on no node", gp.Status.Phase, gp.Spec.NodeName)
			}
		}

		c.fetched, _ = c.Logs(ctx, installerNS, p.Name, "install-runsc", false)
		// The DaemonSet and its pod go first, so that the install (and its one containerd restart) is scenario 2's:
		// the handler is removed only once no run of the old pod can still be under way — a retry that read the
		// config after the removal went on to restart containerd (seen: scenario 2 then counted 2 restarts).
		bg := metav1.DeletePropagationBackground
		if err := c.Admin.AppsV1().DaemonSets(installerNS).Delete(ctx, installerDS, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		c.deletePod(ctx, t, installerNS, p.Name)
		c.waitTasksGone(ctx, t, p)
		if file == mainCfg {
			err = os.WriteFile(c.HostPath(file), orig, 0o644)
		} else if err = os.Remove(c.HostPath(file)); err == nil && noDir != nil {
			err = os.Remove(dir)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}
