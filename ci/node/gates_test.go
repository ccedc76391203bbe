//go:build nodetest

package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A class's node checks (RUNSC_CHECKS, cue/classes.cue #ClassChecks): configure-containerd runs them after the
// handlers are verified and writes the merge patch that label-checked-classes applies: each checked class's gate label
// "true" where its checks pass, null where they do not, while the other classes (the default one here) open as
// always. The GPU check compares the host's NVIDIA driver (its /proc/driver/nvidia/version, here a file of the fake
// host) with `runsc nvproxy list-supported-drivers` of the release installed (the fake runsc prints the real list of
// gVisor's build, testdata/nvproxy-drivers.txt); the KVM check opens a character device read-write as runsc does.

const (
	gateGPU = "node-restriction.kubernetes.io/gvisor-runsc-gpu"
	gateKVM = "node-restriction.kubernetes.io/gvisor-runsc-kvm"
	// nvidiaFile and kvmDev: where the checks look, on the fake host (its /run is the host's).
	nvidiaFile = "/run/fake-proc/driver/nvidia/version"
	kvmDev     = "/run/fake-dev/kvm"
)

// nvrm is a driver's /proc/driver/nvidia/version as the open kernel module writes it.
func nvrm(v string) string {
	return "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  " + v + "  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jul 10 21:52:50 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
}

// gates reads the patch label-checked-classes would apply.
func (h *Host) gates() map[string]any {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, "tmp", "gvisorgen-gates.json"))
	if err != nil {
		h.t.Fatal(err)
	}
	var p struct {
		Metadata struct {
			Labels map[string]any `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		h.t.Fatalf("the gate patch is not JSON: %v\n%s", err, b)
	}
	return p.Metadata.Labels
}

// mknod makes a character device on the fake host.
func (h *Host) mknod(hostPath string, major, minor int) {
	h.t.Helper()
	p := h.P(hostPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	_ = os.Remove(p)
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, major<<8|minor); err != nil {
		h.t.Fatal(err)
	}
}

func TestClassGates(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"17", "24"} {
		t.Run(ver, func(t *testing.T) {
			t.Parallel()
			h := installedHost(t, ver, classDefault(ver), true)
			env := map[string]string{
				"RUNSC_CONFIG":               runscDir + "/runsc.toml",
				"RUNSC_CLASSES":              "[runsc-gpu]\nnvproxy = true\n[runsc-kvm]\nplatform = \"kvm\"",
				"RUNSC_CHECKS":               "runsc-gpu " + gateGPU + " nvidia-driver\nrunsc-kvm " + gateKVM + " kvm",
				"NVIDIA_DRIVER_VERSION_FILE": nvidiaFile,
				"KVM_DEVICE":                 kvmDev,
			}
			// no GPU, no KVM: both classes closed, each with its reason; the handlers are configured all the same
			r := h.mustRunRestarts("configure-containerd.sh", env, 1)
			assertContains(t, "output", r.Output, "the class with handler runsc-gpu stays closed on this node ("+gateGPU+" unset): no NVIDIA driver on this node")
			assertContains(t, "output", r.Output, "the class with handler runsc-kvm stays closed on this node ("+gateKVM+" unset): "+kvmDev+" is not a character device")
			h.assertClasses(ver, "runsc", "runsc-gpu", "runsc-kvm")
			if g := h.gates(); len(g) != 2 || g[gateGPU] != nil || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want both labels null", g)
			}
			applied := h.read("/etc/containerd/config.toml.gvisorgen-applied")
			assertContains(t, "applied marker", applied, "\ngate runsc-gpu closed\ngate runsc-kvm closed\n")
			h.mustRun("ready.sh", env)

			// a driver the release lists (570.172.08 in gVisor's real list), and a device that opens: both open, no
			// restart (the handlers did not change)
			h.write(h.P(nvidiaFile), 0o444, nvrm("570.172.08"))
			h.mknod(kvmDev, 1, 3) // opens read-write like a usable /dev/kvm (this machine has none)
			r = h.mustRunRestarts("configure-containerd.sh", env, 0)
			assertContains(t, "output", r.Output, "the class with handler runsc-gpu passed its checks (nvidia-driver) on this node: its gate "+gateGPU+" opens")
			assertContains(t, "output", r.Output, "the class with handler runsc-kvm passed its checks (kvm) on this node")
			if g := h.gates(); g[gateGPU] != "true" || g[gateKVM] != "true" {
				t.Fatalf("gate patch: %v, want both labels true", g)
			}

			// a driver it does not list (570.86.15: supported in January 2026, dropped since), and /dev/kvm without
			// the kvm module (10:232 does not open): both closed, naming both versions; the default class unaffected
			h.write(h.P(nvidiaFile), 0o444, nvrm("570.86.15"))
			h.mknod(kvmDev, 10, 232)
			r = h.mustRunRestarts("configure-containerd.sh", env, 0)
			assertContains(t, "output", r.Output, "the class with handler runsc-gpu stays closed on this node ("+gateGPU+" unset): the node's NVIDIA driver 570.86.15 is not one that gVisor "+tagBin+" supports (runsc nvproxy list-supported-drivers: 25 versions, 535.129.03 to 620.06.00)")
			assertContains(t, "output", r.Output, kvmDev+" does not open read-write")
			if g := h.gates(); g[gateGPU] != nil || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want both labels null", g)
			}

			// a bump to a release that no longer lists the node's driver closes the GPU class again
			h.write(h.P(nvidiaFile), 0o444, nvrm(nvproxyDropped))
			h.mustRunRestarts("configure-containerd.sh", env, 0)
			if g := h.gates(); g[gateGPU] != "true" {
				t.Fatalf("gate patch before the bump: %v", g)
			}
			bump := map[string]string{"GVISOR_VERSION": tagArch}
			h.mustRun("install-runsc.sh", bump)
			for k, v := range env {
				bump[k] = v
			}
			r = h.mustRun("configure-containerd.sh", bump)
			assertContains(t, "output", r.Output, "the node's NVIDIA driver "+nvproxyDropped+" is not one that gVisor "+tagArch+" supports")
			if g := h.gates(); g[gateGPU] != nil {
				t.Fatalf("gate patch after the bump: %v, want the GPU label null", g)
			}
			if !strings.Contains(h.read(runscDir+"/runsc-gpu.toml"), tagArch) {
				t.Fatalf("the GPU class's runsc.toml does not name the new release:\n%s", h.read(runscDir+"/runsc-gpu.toml"))
			}
		})
	}
}

// TestClassGateRefusals: RUNSC_CHECKS that the schema would not render is refused before anything is read.
func TestClassGateRefusals(t *testing.T) {
	t.Parallel()
	h := installedHost(t, "24", classDefault("24"), false)
	base := map[string]string{"RUNSC_CLASSES": "[runsc-gpu]\nnvproxy = true"}
	for _, c := range []struct{ checks, want string }{
		{"runsc-x " + gateGPU + " kvm", `RUNSC_CHECKS names the handler 'runsc-x', which is not runsc or a class`},
		{"runsc-gpu node-restriction.kubernetes.io/gvisor-runsc kvm", `RUNSC_CHECKS gives the handler runsc-gpu the gate label`},
		{"runsc-gpu " + gateGPU, `RUNSC_CHECKS names no check for the handler runsc-gpu`},
		{"runsc-gpu " + gateGPU + " tpu", `RUNSC_CHECKS names the check 'tpu'`},
	} {
		env := map[string]string{"RUNSC_CHECKS": c.checks}
		for k, v := range base {
			env[k] = v
		}
		before := h.tree()
		h.mustFail("configure-containerd.sh", env, c.want)
		if d := diffTrees(before, h.tree()); d != "" {
			t.Fatalf("%s: a refused run changed the node: %s", c.checks, d)
		}
	}
}
