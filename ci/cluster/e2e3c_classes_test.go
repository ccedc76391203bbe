//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The sandbox classes of scenario 3c: gvisor-wd runs runsc with a flag of its own (visible on the sandbox process's
// command line), gvisor-gpu is the GPU preset (nvproxy), whose gate stays closed on this GPU-less node.
const classesValues = `    gvisor-wd:
      runsc:
        config: {watchdog-action: panic}
    gvisor-gpu:
      preset: nvidia-gpu
    gvisor-kvm:
      runsc:
        config: {platform: kvm}
`

// The scenario's own pods (not gvisor-sleeper, which later scenarios expect as scenario 3 left it).
var (
	defSleeper = podSpec{"default-class-sleeper", "gvisor", "Always", "dmesg; exec sleep 2147483647"}
	wdSleeper  = podSpec{"wd-sleeper", "gvisor-wd", "Always", "dmesg; exec sleep 2147483647"}
	gpuSleeper = podSpec{"gpu-sleeper", "gvisor-gpu", "Always", "exec sleep 2147483647"}
)

// TestSandboxClassesRunUnderTheirOwnFlags (scenario 3c): a target with three more classes, applied: one containerd
// restart for all handlers; the node's labels open the default class and gvisor-wd, not gvisor-gpu (no NVIDIA driver:
// label-checked-classes applied the installer's patch); a gvisor-wd pod and a gvisor pod run under gVisor, and on the
// host the gvisor-wd pod's sandbox runs with --watchdog-action=panic, the gvisor pod's with runsc's default (log); a
// gvisor-gpu pod stays Pending; gvisor-kvm (platform kvm) stays closed too: no /dev/kvm, or, where the machine has
// one that opens (a nested PVM host), the release's own runsc --platform=kvm did not run a sandbox on it. Each closed
// class has its SandboxClassClosed Event on the node. The classes removed again: one restart, their runsc.toml gone.
func TestSandboxClassesRunUnderTheirOwnFlags(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, "")
		v := c.installed
		r0 := c.Restarts()
		t0 := time.Now()
		c.classes = classesValues
		c.generated = ""
		c.install(ctx, t, v, "install")
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.logContainers(ctx, t, p, "configure-containerd", "label-node", "label-checked-classes")
		if n := c.Restarts() - r0; n != 1 {
			t.Errorf("containerd restarts for three more classes: %d, want 1", n)
		}
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const prefix = "node-restriction.kubernetes.io/gvisor-"
		gates := map[string]string{}
		for k, val := range n.Labels {
			if strings.HasPrefix(k, prefix) {
				gates[strings.TrimPrefix(k, prefix)] = val
			}
		}
		t.Logf("  .. gate labels (+%.0fs): %v", time.Since(t0).Seconds(), gates)
		if gates["runsc"] != "true" || gates["runsc-gvisor-wd"] != "true" {
			t.Errorf("the default class's and gvisor-wd's gates are not both open: %v", gates)
		}
		if _, ok := gates["runsc-gvisor-gpu"]; ok {
			t.Errorf("the GPU class's gate is set on a node without an NVIDIA driver: %v", gates)
		}
		applied, _ := c.ReadHostFile("/etc/containerd/config.toml.gvisorgen-applied")
		if !bytes.Contains(applied, []byte("\ngate runsc-gvisor-gpu closed\n")) {
			t.Errorf("the applied marker does not record the GPU class closed:\n%s", applied)
		}
		// and a person learns why from the node's Events (report-checked-classes, through the node-events policy), one
		// about each checked class
		evs, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.Name})
		if err != nil {
			t.Fatalf("listing the node's Events: %v", err)
		}
		classEvent := func(handler string) corev1.Event {
			var e corev1.Event
			for _, x := range evs.Items {
				if strings.Contains(x.Message, "handler "+handler+" ") {
					e = x
				}
			}
			return e
		}
		gpu := classEvent("runsc-gvisor-gpu")
		t.Logf("  .. Event %s %s from %s: %s", gpu.Type, gpu.Reason, gpu.Source.Component, gpu.Message)
		if gpu.Type != corev1.EventTypeWarning || gpu.Reason != "SandboxClassClosed" ||
			!strings.Contains(gpu.Message, "runsc-gvisor-gpu stays closed on this node") || !strings.Contains(gpu.Message, "no NVIDIA driver on this node") {
			t.Errorf("no SandboxClassClosed Event saying why the GPU class is closed: %+v", gpu)
		}
		// the KVM class: closed here, by the device (no /dev/kvm) or by runsc itself (a /dev/kvm that opens but on
		// which the release's runsc --platform=kvm does not run a sandbox: a nested PVM host); on a machine where
		// runsc's KVM platform runs, open, with a SandboxClassOpen Event
		_, kvmOpen := gates["runsc-gvisor-kvm"]
		kvm := classEvent("runsc-gvisor-kvm")
		t.Logf("  .. the KVM class: gate open %v; its %s Event: %s", kvmOpen, kvm.Reason, kvm.Message)
		if !kvmOpen && (kvm.Reason != "SandboxClassClosed" || !strings.Contains(kvm.Message, "is not a character device") &&
			!strings.Contains(kvm.Message, "does not open read-write") && !strings.Contains(kvm.Message, "runsc's KVM platform")) {
			t.Errorf("no SandboxClassClosed Event saying why the KVM class is closed (%+v)", kvm)
		}
		if kvmOpen && (kvm.Reason != "SandboxClassOpen" || !strings.Contains(kvm.Message, "passed its checks (kvm)")) {
			t.Errorf("the KVM class's gate is open without a SandboxClassOpen Event (%+v)", kvm)
		}

		// a pod of each open class runs under gVisor, its sandbox with its class's flags (seen on the host), the
		// gvisor pod after the gvisor-wd one: nothing of the first class's options carries over to the next pod
		for _, s := range []podSpec{wdSleeper, defSleeper} {
			pod := c.runPod(ctx, t, s, corev1.PodRunning)
			if log := c.waitLog(ctx, t, s.name, "Starting gVisor", 20*time.Second); !strings.Contains(log, "Starting gVisor") {
				t.Errorf("%s (class %s): no 'Starting gVisor' in its dmesg:\n%s", s.name, s.runtimeClass, clipLines(log, 10))
			}
			sbs := c.sandboxFlags(t, string(pod.UID))
			if len(sbs) != 1 {
				t.Errorf("%s (class %s): %d sandbox processes in its cgroup, want one: %q", s.name, s.runtimeClass, len(sbs), sbs)
				continue
			}
			// containerd gave the pod's sandbox container its handler's options: ConfigPath names the class's file
			want := map[string]string{"gvisor-wd": "/etc/containerd/runsc/runsc-gvisor-wd.toml", "gvisor": "/etc/containerd/runsc/runsc.toml"}[s.runtimeClass]
			if got := c.configPath(ctx, t, sbs[0][len(sbs[0])-1]); got != want {
				t.Errorf("%s (class %s): containerd's runtime options name ConfigPath %q, want %s", s.name, s.runtimeClass, got, want)
			}
			// runsc passes the flags set in its configuration to the sandbox process
			if slices.Contains(sbs[0], "--watchdog-action=panic") != (s.runtimeClass == "gvisor-wd") {
				t.Errorf("%s (class %s): its sandbox runs with %q: want --watchdog-action=panic only for gvisor-wd", s.name, s.runtimeClass, sbs[0])
				continue
			}
			t.Logf("  .. %s (class %s): its sandbox process runs with --watchdog-action=panic: %v", s.name, s.runtimeClass, s.runtimeClass == "gvisor-wd")
		}

		// the GPU class: Pending, the scheduler finds no node with its gate
		c.createPod(ctx, t, gpuSleeper)
		time.Sleep(5 * time.Second)
		gp, err := c.Admin.CoreV1().Pods("default").Get(ctx, gpuSleeper.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if gp.Status.Phase != corev1.PodPending || gp.Spec.NodeName != "" {
			t.Errorf("the gvisor-gpu pod is %s on %q: want Pending, unscheduled", gp.Status.Phase, gp.Spec.NodeName)
		}
		for _, cond := range gp.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				t.Logf("  .. gpu-sleeper: PodScheduled=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		for _, s := range []podSpec{wdSleeper, gpuSleeper, defSleeper} {
			c.deletePod(ctx, t, "default", s.name)
		}

		// back to the default class alone: one restart, the classes' handlers and files gone
		r1 := c.Restarts()
		c.classes = ""
		c.generated = ""
		c.install(ctx, t, v, "install")
		if n := c.Restarts() - r1; n != 1 {
			t.Errorf("containerd restarts for removing the classes: %d, want 1", n)
		}
		for _, f := range []string{"runsc-gvisor-wd.toml", "runsc-gvisor-gpu.toml", "runsc-gvisor-kvm.toml"} {
			if _, err := os.Stat(c.HostPath(filepath.Join("/etc/containerd/runsc", f))); !os.IsNotExist(err) {
				t.Errorf("%s is still there after its class was removed (%v)", f, err)
			}
		}
		// kubectl apply -f does not prune: the RuntimeClasses go by hand (Argo CD and Flux prune them)
		for _, rc := range []string{"gvisor-wd", "gvisor-gpu", "gvisor-kvm"} {
			_ = c.Admin.NodeV1().RuntimeClasses().Delete(ctx, rc, metav1.DeleteOptions{})
		}
	})
}

// sandboxFlags: the command lines of the runsc sandbox processes (argv[0] runsc-sandbox) in a pod's cgroup (runsc
// moves its sandbox there), which name the runsc flags it runs with.
func (c *Cluster) sandboxFlags(t *testing.T, uid string) [][]string {
	t.Helper()
	ds, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, d := range ds {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(b, []byte("runsc-sandbox\x00")) {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup")); err != nil || !bytes.Contains(cg, []byte("/pod"+uid)) {
			continue
		}
		out = append(out, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
	}
	return out
}

// configPath reads the ConfigPath of a container's runtime options from the node's containerd (ctr c info: the
// options are a serialized runtimeoptions.v1.Options, whose second field is ConfigPath).
func (c *Cluster) configPath(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	out, err := c.nsenter(ctx, true, "ctr", "-n", "k8s.io", "containers", "info", id)
	if err != nil {
		t.Fatalf("ctr containers info %s: %v\n%s", id, err, out)
	}
	var info struct {
		Runtime struct {
			Options struct {
				TypeURL string `json:"type_url"`
				Value   []byte `json:"value"`
			}
		}
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	// field 2 (ConfigPath), wire type 2: tag 0x12, a one-byte length (paths under 128 bytes)
	v := info.Runtime.Options.Value
	for i := 0; i+1 < len(v); {
		tag, n := v[i], int(v[i+1])
		if i+2+n > len(v) {
			break
		}
		if tag == 0x12 {
			return string(v[i+2 : i+2+n])
		}
		i += 2 + n
	}
	return ""
}

// waitLog reads a harness pod's log until it holds want, for a while.
func (c *Cluster) waitLog(ctx context.Context, t *testing.T, pod, want string, d time.Duration) string {
	t.Helper()
	return c.waitLogIn(ctx, t, "default", pod, "c", want, d)
}

// waitLogIn: waitLog for a container of a pod in namespace ns.
func (c *Cluster) waitLogIn(ctx context.Context, t *testing.T, ns, pod, container, want string, d time.Duration) string {
	t.Helper()
	var log string
	for deadline := time.Now().Add(d); ; {
		log, _ = c.Logs(ctx, ns, pod, container, false)
		if strings.Contains(log, want) || time.Now().After(deadline) {
			return log
		}
		time.Sleep(500 * time.Millisecond)
	}
}
