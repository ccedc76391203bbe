//go:build clustertest

package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBrokenArtifactIsRefusedAndNodeUntouched (scenario 6): on a node running 20240212 with a gVisor pod, release
// 20240213 publishes the genuine .sha512 beside a runsc one byte longer: gvisorgen pin pins the published (genuine)
// digest, the new installer pod never becomes Ready (install-runsc fails and is retried, the rollout does not
// complete), install-runsc's log names the sha512 mismatch against the pinned digest, containerd is not restarted,
// config.toml and the stamp are unchanged, and the running gVisor and runc pods are untouched.
func TestBrokenArtifactIsRefusedAndNodeUntouched(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureRunning(ctx, t, runcSleeper)
		// back to an installed node (install after uninstall), with a gVisor pod running
		c.install(ctx, t, vGood, "install")
		if v := c.stamp("version"); v != vGood {
			t.Fatalf("reinstall: stamp says version %q, want %s", v, vGood)
		}
		c.runPod(ctx, t, gvisorSleeper, corev1.PodRunning)
		c.remember(ctx, t, gvisorSleeper.name)
		t.Logf("  .. reinstalled %s; gvisor-sleeper runs", vGood)
		cfg, _ := c.ReadHostFile("/etc/containerd/config.toml")
		cfgSum := sha256.Sum256(cfg)
		r0 := c.Restarts()

		c.ensureTarget(ctx, t, vBad, "install")
		pub := c.published(t, vBad, "runsc")
		if pub != c.published(t, vGood, "runsc") {
			t.Fatalf("%s does not publish the genuine runsc digest", vBad)
		}
		served, _ := os.ReadFile(filepath.Join(c.Dir, "serve/release", vBad, "x86_64/runsc"))
		if s := sha512.Sum512(served); hex.EncodeToString(s[:]) == pub {
			t.Fatalf("%s's runsc is not tampered", vBad)
		}
		if !c.pinnedInDS(t, "runsc", pub) {
			t.Fatalf("the DaemonSet does not pin %s's runsc to its published digest", vBad)
		}
		t.Logf("  .. pinned %s x86_64/runsc to its published (genuine) digest %s…; the runsc served beside it is one byte longer", vBad, pub[:16])
		log, err := c.applyRefused(ctx, t, "a broken artifact")
		want := fmt.Sprintf("sha512 mismatch for %s/%s/x86_64/runsc against the pinned digest", mirror, vBad)
		if msg := errLine(log, err); !strings.Contains(msg, want) {
			t.Errorf("install-runsc's log does not name the sha512 mismatch (%q): %s", want, msg)
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd was restarted %d times since the broken release was applied", n)
		}
		if now, _ := c.ReadHostFile("/etc/containerd/config.toml"); sha256.Sum256(now) != cfgSum {
			t.Errorf("config.toml changed")
		}
		if v := c.stamp("version"); v != vGood {
			t.Errorf("the stamp changed to version %q", v)
		}
		c.untouched(ctx, t, gvisorSleeper.name)
		c.untouched(ctx, t, runcSleeper.name)
		t.Logf("  .. running pods untouched (gvisor-sleeper, runc-sleeper); config and stamp (%s) unchanged", vGood)
	})
}

// applyRefused applies the rendered target and expects its installer to refuse (why: what makes it refuse): the new
// pod's install-runsc fails and is retried at least once (the kubelet's back-off), still failing; the pod is never
// Ready and the DaemonSet does not roll out within 10 s more. Returns install-runsc's log (its last failed run).
func (c *Cluster) applyRefused(ctx context.Context, t *testing.T, why string) (string, error) {
	t.Helper()
	c.applyGenerated(ctx, t)
	ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := fmt.Sprint(ds.Generation)

	// the new pod's install-runsc fails, and is retried at least once (the kubelet's back-off), still failing;
	// the pod is never Ready meanwhile
	var p *corev1.Pod
	err = Poll(ctx, 500*time.Millisecond, 90*time.Second, "install-runsc of the new installer pod failed and retried", func(ctx context.Context) (bool, error) {
		l, err := c.Admin.CoreV1().Pods(installerNS).List(ctx, metav1.ListOptions{LabelSelector: "pod-template-generation=" + gen})
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		p = &l.Items[0]
		if podReady(p) {
			return false, Stop(fmt.Errorf("the installer pod %s became Ready with %s", p.Name, why))
		}
		s := initStatus(p, "install-runsc")
		return failedAgain(s), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if Poll(ctx, time.Second, 10*time.Second, "rollout", func(ctx context.Context) (bool, error) {
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		return err == nil && DaemonSetRolledOut(ds), err
	}) == nil {
		t.Errorf("the DaemonSet rolled out with %s", why)
	}
	p, err = c.Admin.CoreV1().Pods(installerNS).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if podReady(p) {
		t.Errorf("the installer pod %s became Ready", p.Name)
	}
	s := initStatus(p, "install-runsc")
	t.Logf("  .. installer pod %s: Ready=false, install-runsc exit %d, restarts %d, the rollout does not complete", p.Name, failedExit(s), s.RestartCount)
	log, err := c.failedRunLog(ctx, p.Name, "install-runsc")
	for _, l := range strings.Split(strings.TrimRight(log, "\n"), "\n") {
		t.Logf("  [install-runsc] %s", l)
	}
	return log, err
}

func podReady(p *corev1.Pod) bool {
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodReady {
			return cd.Status == corev1.ConditionTrue
		}
	}
	return false
}

func initStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// failedRunLog is the log of an installer container's failed run (kubectl logs -c): the last run's, or the previous
// one's while a new run is under way.
func (c *Cluster) failedRunLog(ctx context.Context, pod, container string) (string, error) {
	log, err := c.Logs(ctx, installerNS, pod, container, false)
	if err != nil || !strings.Contains(log, "ERROR") {
		log, err = c.Logs(ctx, installerNS, pod, container, true)
	}
	return log, err
}

// failedAgain: the container was retried (the kubelet restarted it at least once) and its latest run has finished,
// failing. A retry still running does not count: what it will do is not known yet (the foreign-handler scenario
// removed the handler while a retry ran, and that retry went on to restart containerd).
func failedAgain(s *corev1.ContainerStatus) bool {
	return s != nil && s.RestartCount >= 1 && s.State.Running == nil && failedExit(s) != 0
}

// failedExit is the exit code of a container's last finished run (current, else previous).
func failedExit(s *corev1.ContainerStatus) int32 {
	if s.State.Terminated != nil {
		return s.State.Terminated.ExitCode
	}
	if s.LastTerminationState.Terminated != nil {
		return s.LastTerminationState.Terminated.ExitCode
	}
	return 0
}
