//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The harness's own workloads (not the product's), in namespace default.
const noRuntime = `no runtime for "runsc" is configured` // containerd's error for a RuntimeClass it has no handler for

type podSpec struct{ name, runtimeClass, restart, cmd string }

var (
	gvisorProbe   = podSpec{"gvisor-probe", "gvisor", "Never", "dmesg"}
	gvisorSleeper = podSpec{"gvisor-sleeper", "gvisor", "Always", "dmesg; exec sleep 2147483647"}
	runcSleeper   = podSpec{"runc-sleeper", "", "Always", "echo runc up; exec sleep 2147483647"}
	runcCheck     = podSpec{"runc-check", "", "Never", "echo runc-ok; uname -r"}
)

func (s podSpec) pod() *corev1.Pod {
	zero, no := int64(0), false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicy(s.restart),
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "c", Image: img, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", s.cmd},
			}},
		},
	}
	if s.runtimeClass != "" {
		p.Spec.RuntimeClassName = &s.runtimeClass
	}
	return p
}

// createPod creates a harness pod, deleting a previous one of the same name first.
func (c *Cluster) createPod(ctx context.Context, t *testing.T, s podSpec) {
	t.Helper()
	c.deletePod(ctx, t, "default", s.name)
	if _, err := c.Admin.CoreV1().Pods("default").Create(ctx, s.pod(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", s.name, err)
	}
}

// deletePod deletes a pod and waits (bounded) until it is gone.
func (c *Cluster) deletePod(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	zero := int64(0)
	err := c.Admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	err = Poll(ctx, 250*time.Millisecond, 60*time.Second, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runPod creates a harness pod and waits for its phase.
func (c *Cluster) runPod(ctx context.Context, t *testing.T, s podSpec, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	c.createPod(ctx, t, s)
	p, err := c.WaitPodPhase(ctx, "default", s.name, phase, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ctrState is what must not change while a pod is "untouched": its container's ID, restart count and phase.
func (c *Cluster) ctrState(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return fmt.Sprintf("- - %s", p.Status.Phase)
	}
	s := p.Status.ContainerStatuses[0]
	return fmt.Sprintf("%s %d %s", s.ContainerID, s.RestartCount, p.Status.Phase)
}

// remember records a running pod's state; untouched fails the test when it changed since.
func (c *Cluster) remember(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	c.states[name] = c.ctrState(ctx, t, name)
}

func (c *Cluster) untouched(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if now := c.ctrState(ctx, t, name); now != c.states[name] {
		t.Errorf("%s changed: was %q, now %q", name, c.states[name], now)
	}
}

// checkNewRuncPod: a new runc pod runs to completion.
func (c *Cluster) checkNewRuncPod(ctx context.Context, t *testing.T) string {
	t.Helper()
	c.runPod(ctx, t, runcCheck, corev1.PodSucceeded)
	log, err := c.Logs(ctx, "default", runcCheck.name, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	c.deletePod(ctx, t, "default", runcCheck.name)
	return strings.SplitN(log, "\n", 2)[0]
}

// negativeControl: the node's containerd cannot run gVisor. A pod of the harness's ungated RuntimeClass (the
// product's handler, no scheduling: it lands on the node whatever the gate says) fails with containerd's no-runtime
// error, and a pod of the product's gated RuntimeClass stays Pending on no node. It returns the former's message.
func (c *Cluster) negativeControl(ctx context.Context, t *testing.T) string {
	t.Helper()
	c.ensureUngatedRuntimeClass(ctx, t)
	c.createPod(ctx, t, gvisorUngatedProbe)
	msg, err := c.WaitEvent(ctx, "default", gvisorUngatedProbe.name, "FailedCreatePodSandBox", noRuntime, 60*time.Second)
	if err != nil {
		t.Fatalf("negative control: %v", err)
	}
	// and the pod itself stays Pending, its container never created
	if _, err := c.WaitPodPhaseReason(ctx, "default", gvisorUngatedProbe.name, corev1.PodPending, "ContainerCreating", 10*time.Second); err != nil {
		t.Errorf("negative control: %v", err)
	}
	c.deletePod(ctx, t, "default", gvisorUngatedProbe.name)
	return msg
}

// drainGVisorPods deletes the node's gVisor pods (the smoke pod and gvisor-sleeper), as docs/gitops.md asks before an
// uninstall: it refuses while gVisor sandboxes are on the node.
func (c *Cluster) drainGVisorPods(ctx context.Context, t *testing.T) {
	t.Helper()
	c.deletePod(ctx, t, smokeNS, smokePod)
	c.deletePod(ctx, t, "default", gvisorSleeper.name)
	delete(c.states, gvisorSleeper.name)
}

// uninstalledClean checks what an uninstall leaves: config.toml byte-identical to the original (config.orig), no
// runsc config folder, nothing in /usr/local/bin (binaries, stamp, gvisor-bin/).
func (c *Cluster) uninstalledClean(t *testing.T, when string) {
	t.Helper()
	orig, _ := os.ReadFile(filepath.Join(c.Dir, "config.orig"))
	if now, _ := c.ReadHostFile("/etc/containerd/config.toml"); !bytes.Equal(orig, now) {
		t.Errorf("%s: config.toml is not byte-identical to the original:\n%s", when, lineDiff(string(orig), string(now), 20))
	}
	if exists(c.HostPath("/etc/containerd/conf.d/gvisorgen-runsc.toml")) {
		t.Errorf("%s: gvisorgen's drop-in left in conf.d", when)
	}
	if exists(c.HostPath("/etc/containerd/runsc")) {
		t.Errorf("%s: /etc/containerd/runsc (runsc.toml) left", when)
	}
	if l := lsDir(c.HostPath("/usr/local/bin")); l != "" {
		t.Errorf("%s: left in /usr/local/bin: %s", when, l)
	}
}

// smokePV stands in for the local-path provisioner this cluster does not run: a static hostPath PV of the
// StorageClass the smoke PVC asks for.
func (c *Cluster) smokePV(ctx context.Context, t *testing.T) {
	t.Helper()
	dir := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor-smoke-e2e"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "gvisor-workspace",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: c.Dir + "/pv/smoke", Type: &dir,
			}},
		},
	}
	_, err := c.Admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("PV: %v", err)
	}
}

// smoke runs the generated smoke pod (again) and checks that gVisor started it.
func (c *Cluster) smoke(ctx context.Context, t *testing.T) {
	t.Helper()
	c.deletePod(ctx, t, smokeNS, smokePod)
	if err := c.ApplyDir(ctx, c.smokeDir()); err != nil {
		t.Fatalf("apply of the smoke folder: %v", err)
	}
	if _, err := c.WaitPodPhase(ctx, smokeNS, smokePod, corev1.PodSucceeded, 120*time.Second); err != nil {
		t.Fatalf("the smoke pod did not succeed: %v", err)
	}
	log, err := c.Logs(ctx, smokeNS, smokePod, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "Starting gVisor") {
		t.Fatalf("the smoke pod's log has no 'Starting gVisor':\n%s", log)
	}
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		t.Logf("  [smoke] %s", l)
	}
	// the sandbox network is on: the pod has its CNI address (the bridge's 10.88.0.0/16)
	p, err := c.Admin.CoreV1().Pods(smokeNS).Get(ctx, smokePod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Status.PodIP, "10.88.") {
		t.Fatalf("the smoke pod has no CNI address: %q", p.Status.PodIP)
	}
	t.Logf("  [smoke] pod network: CNI address %s (%s)", p.Status.PodIP, c.runscVersion(ctx, t))
}

// runscVersion: the first line of the installed runsc's --version.
func (c *Cluster) runscVersion(ctx context.Context, t *testing.T) string {
	t.Helper()
	out, err := execOut(ctx, c.HostPath(c.runscPath()), "--version")
	if err != nil {
		t.Fatalf("runsc --version: %v: %s", err, out)
	}
	return strings.SplitN(out, "\n", 2)[0]
}

func execOut(ctx context.Context, name string, args ...string) (string, error) {
	b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(b), err
}

// cleanAfterUninstall: the node is clean (uninstalledClean) and containerd restarted once since r0, the uninstall
// commit's restart (the removal scenarios of Flux and Argo CD).
func (c *Cluster) cleanAfterUninstall(t *testing.T, r0 int, when string) {
	t.Helper()
	c.uninstalledClean(t, when)
	if n := c.Restarts() - r0; n != 1 {
		t.Errorf("%s: containerd restarts since the uninstall commit: %d, want 1", when, n)
	}
}

// gvisorOff edits a target file to gvisor.enabled: false, the documented removal's last commit.
func gvisorOff(y string) string {
	return strings.Replace(y, "\ngvisor:\n", "\ngvisor:\n  enabled: false\n", 1)
}

// waitTasksGone waits until no container of pod p has a running task on the node (ctr, in the node's namespaces):
// a force-deleted pod leaves the API at once, its containers a moment later, when the kubelet has killed them.
func (c *Cluster) waitTasksGone(ctx context.Context, t *testing.T, p *corev1.Pod) {
	t.Helper()
	err := Poll(ctx, 500*time.Millisecond, 60*time.Second, "no task of pod "+p.Name+" running on the node", func(ctx context.Context) (bool, error) {
		cs, err := c.ctr(ctx, "containers", "ls", "-q", `labels."io.kubernetes.pod.uid"==`+string(p.UID))
		if err != nil {
			return false, err
		}
		run, err := c.runningTasks(ctx)
		if err != nil {
			return false, err
		}
		for _, id := range strings.Fields(string(cs)) {
			if run[id] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
