//go:build nodetest

package node

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// nodeName is the node the fake host is, as the DaemonSet's downward API would name it.
const nodeName = "gvz-gpu-node-1"

// event is what report-checked-classes creates, as far as the tests read it.
type event struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		GenerateName string `json:"generateName"`
		Namespace    string `json:"namespace"`
	} `json:"metadata"`
	InvolvedObject struct {
		APIVersion, Kind, Name, UID string
	} `json:"involvedObject"`
	Type, Reason, Message string
	Source                struct{ Component, Host string }
	FirstTimestamp        string `json:"firstTimestamp"`
	LastTimestamp         string `json:"lastTimestamp"`
	Count                 int    `json:"count"`
}

// events reads the Events report-checked-classes would create (a v1 List), each checked against the shape the API
// server's validation and the node-events policy require, keyed by handler (from generateName).
func (h *Host) events() map[string]event {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, "tmp", "gvisorgen-events.json"))
	if err != nil {
		h.t.Fatal(err)
	}
	var l struct {
		APIVersion, Kind string
		Items            []event
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		h.t.Fatalf("the Events are not the JSON expected: %v\n%s", err, b)
	}
	if l.APIVersion != "v1" || l.Kind != "List" {
		h.t.Fatalf("the Events are a %s %s, want a v1 List", l.APIVersion, l.Kind)
	}
	out := map[string]event{}
	for _, e := range l.Items {
		io := e.InvolvedObject
		if e.APIVersion != "v1" || e.Kind != "Event" || e.Metadata.Namespace != "default" ||
			io.APIVersion != "v1" || io.Kind != "Node" || io.Name != nodeName || io.UID != nodeName ||
			e.Source.Component != "gvisorgen-runsc-installer" || e.Source.Host != nodeName || e.Count != 1 {
			h.t.Fatalf("an Event of the wrong shape: %+v", e)
		}
		if _, err := time.Parse(time.RFC3339, e.FirstTimestamp); err != nil || e.LastTimestamp != e.FirstTimestamp {
			h.t.Fatalf("firstTimestamp %q, lastTimestamp %q: %v", e.FirstTimestamp, e.LastTimestamp, err)
		}
		handler := strings.TrimSuffix(strings.TrimPrefix(e.Metadata.GenerateName, "gvisorgen-"), ".")
		switch {
		case e.Type == "Warning" && e.Reason == "SandboxClassClosed", e.Type == "Normal" && e.Reason == "SandboxClassOpen":
		default:
			h.t.Fatalf("Event for %s: type %s, reason %s", handler, e.Type, e.Reason)
		}
		out[handler] = e
	}
	return out
}

// unclaimedMisc is a misc device minor (major 10) that no driver of this kernel registered (/proc/misc): its node
// exists but does not open, like /dev/kvm (10:232) where the kvm module is not loaded. Not 232 itself: a machine with
// KVM has it (some of these machines do).
func unclaimedMisc(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/misc")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			used[f[0]] = true
		}
	}
	for m := 250; m > 200; m-- {
		if !used[strconv.Itoa(m)] {
			return m
		}
	}
	t.Fatal("every misc minor from 201 to 250 is registered")
	return 0
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
				"NODE_NAME":                  nodeName,
			}
			// no GPU, no KVM: both classes closed, each with its reason; the handlers are configured all the same
			r := h.mustRunRestarts("configure-containerd.sh", env, 1)
			assertContains(t, "output", r.Output, "the class with handler runsc-gpu stays closed on this node ("+gateGPU+" unset): no NVIDIA driver on this node")
			assertContains(t, "output", r.Output, "the class with handler runsc-kvm stays closed on this node ("+gateKVM+" unset): "+kvmDev+" is not a character device")
			h.assertClasses(ver, "runsc", "runsc-gpu", "runsc-kvm")
			if g := h.gates(); len(g) != 2 || g[gateGPU] != nil || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want both labels null", g)
			}
			ev := h.events()
			if len(ev) != 2 || ev["runsc-gpu"].Reason != "SandboxClassClosed" || ev["runsc-kvm"].Reason != "SandboxClassClosed" {
				t.Fatalf("Events: %+v, want both classes closed", ev)
			}
			assertContains(t, "GPU Event", ev["runsc-gpu"].Message, "the sandbox class with handler runsc-gpu stays closed on this node ("+gateGPU+" unset): no NVIDIA driver on this node")
			assertContains(t, "KVM Event", ev["runsc-kvm"].Message, kvmDev+" is not a character device")
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
			ev = h.events()
			if len(ev) != 2 || ev["runsc-gpu"].Reason != "SandboxClassOpen" || ev["runsc-kvm"].Reason != "SandboxClassOpen" {
				t.Fatalf("Events: %+v, want both classes open", ev)
			}
			assertContains(t, "GPU Event", ev["runsc-gpu"].Message, "the sandbox class with handler runsc-gpu passed its checks (nvidia-driver) with gVisor "+tagBin+": its gate "+gateGPU+" is set")
			if ents, _ := os.ReadDir(h.P("/run/gvisorgen")); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == "kvm-check" }) {
				t.Errorf("the kvm check left %s/kvm-check", "/run/gvisorgen")
			}

			// a device that opens, but runsc's KVM platform fails on it (as on a nested host where the first vCPU
			// run fails): the KVM class stays closed with runsc's own words, the GPU class stays open
			h.write(h.P(kvmBroken), 0o644, "")
			r = h.mustRunRestarts("configure-containerd.sh", env, 0)
			assertContains(t, "output", r.Output, "the class with handler runsc-kvm stays closed on this node ("+gateKVM+" unset): runsc's KVM platform cannot run a sandbox on this node")
			assertContains(t, "output", r.Output, "FATAL ERROR: error setting up KVM: KVM_RUN failed: bad address")
			if g := h.gates(); g[gateGPU] != "true" || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want GPU open, KVM null", g)
			}
			if err := os.Remove(h.P(kvmBroken)); err != nil {
				t.Fatal(err)
			}

			// runsc's KVM sandbox hangs (as the real one on this machine's nested PVM /dev/kvm): killed after 15 s,
			// the class closed with that reason, nothing of the check left (its folder, the hung process); and the
			// GPU check meets a runsc that answers with several lines of usage text: the reason stays one line, the
			// gate patch and the Events stay JSON with one entry per class
			h.write(h.P(kvmHangs), 0o644, "")
			h.write(h.P(nvproxyBroken), 0o644, "")
			r = h.mustRunRestarts("configure-containerd.sh", env, 0)
			assertContains(t, "output", r.Output, "the class with handler runsc-kvm stays closed on this node ("+gateKVM+" unset): runsc's KVM platform did not run a sandbox within 15 s on this node")
			assertContains(t, "output", r.Output, `the class with handler runsc-gpu stays closed on this node (`+gateGPU+` unset): cannot tell which NVIDIA drivers gVisor `+tagBin+` supports`)
			if g := h.gates(); len(g) != 2 || g[gateGPU] != nil || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want exactly the two labels, null", g)
			}
			if ev := h.events(); len(ev) != 2 || !strings.Contains(ev["runsc-gpu"].Message, `Usage of "runsc":  -root string "runsc" exited: 2  bad`) {
				t.Fatalf("Events: %+v", ev)
			}
			if _, err := os.Stat(h.P("/run/gvisorgen/kvm-check")); !os.IsNotExist(err) {
				t.Errorf("the killed kvm check left /run/gvisorgen/kvm-check (%v)", err)
			}
			pid := strings.TrimSpace(h.read(kvmHangs))
			if pid == "" {
				t.Fatalf("the fake runsc's KVM sandbox did not hang (no PID in %s)", kvmHangs)
			}
			if b, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil && strings.HasPrefix(string(b), "sleep") {
				t.Errorf("the hung runsc of the kvm check (PID %s) still runs: %q", pid, b)
			}
			for _, k := range []string{kvmHangs, nvproxyBroken} {
				if err := os.Remove(h.P(k)); err != nil {
					t.Fatal(err)
				}
			}

			// a driver it does not list (570.86.15: supported in January 2026, dropped since), and /dev/kvm without
			// the kvm module (a misc minor no driver holds does not open, as 10:232 without kvm): both closed, naming
			// both versions; the default class unaffected
			h.write(h.P(nvidiaFile), 0o444, nvrm("570.86.15"))
			h.mknod(kvmDev, 10, unclaimedMisc(t))
			r = h.mustRunRestarts("configure-containerd.sh", env, 0)
			assertContains(t, "output", r.Output, "the class with handler runsc-gpu stays closed on this node ("+gateGPU+" unset): the node's NVIDIA driver 570.86.15 is not one that gVisor "+tagBin+" supports (runsc nvproxy list-supported-drivers: 25 versions, 535.129.03 to 620.06.00)")
			assertContains(t, "output", r.Output, kvmDev+" does not open read-write")
			if g := h.gates(); g[gateGPU] != nil || g[gateKVM] != nil {
				t.Fatalf("gate patch: %v, want both labels null", g)
			}
			// the Event names both versions, the driver's and the release's
			assertContains(t, "GPU Event", h.events()["runsc-gpu"].Message, "(runsc nvproxy list-supported-drivers: 25 versions, 535.129.03 to 620.06.00)")
			assertContains(t, "GPU Event", h.events()["runsc-gpu"].Message, "the node's NVIDIA driver 570.86.15 is not one that gVisor "+tagBin+" supports")

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
			assertContains(t, "GPU Event after the bump", h.events()["runsc-gpu"].Message, "the node's NVIDIA driver "+nvproxyDropped+" is not one that gVisor "+tagArch+" supports")
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
	base := map[string]string{"RUNSC_CLASSES": "[runsc-gpu]\nnvproxy = true", "NODE_NAME": nodeName}
	for _, c := range []struct{ checks, want string }{
		{"runsc-x " + gateGPU + " kvm", `RUNSC_CHECKS names the handler 'runsc-x', which is not runsc or a class`},
		{"runsc-gpu node-restriction.kubernetes.io/gvisor-runsc kvm", `RUNSC_CHECKS gives the handler runsc-gpu the gate label`},
		{"runsc-gpu " + gateGPU, `RUNSC_CHECKS names no check for the handler runsc-gpu`},
		{"runsc-gpu " + gateGPU + " tpu", `RUNSC_CHECKS names the check 'tpu'`},
		// the Events name the node: without NODE_NAME there is nothing to report about, and a name that is no
		// Node's is refused before it reaches JSON
		{"runsc-gpu " + gateGPU + " nvidia-driver\nNODE_NAME=", `RUNSC_CHECKS is set but NODE_NAME is not`},
		{"runsc-gpu " + gateGPU + " nvidia-driver\nNODE_NAME=gvz\"node", `NODE_NAME must be a Node.s name \(a DNS subdomain\), got .gvz"node.`},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		checks, node, ok := strings.Cut(c.checks, "\nNODE_NAME=")
		env["RUNSC_CHECKS"] = checks
		if ok {
			env["NODE_NAME"] = node
		}
		before := h.tree()
		h.mustFail("configure-containerd.sh", env, c.want)
		if d := diffTrees(before, h.tree()); d != "" {
			t.Fatalf("%s: a refused run changed the node: %s", c.checks, d)
		}
	}
}

// TestGateEventsJSON: the Events' text comes from the host (runsc's output when it cannot list drivers, a device path):
// whatever it holds, gvz_gate_events prints one valid JSON List, with quotes kept, backslashes, control characters and
// bytes outside ASCII dropped, and a long reason cut.
func TestGateEventsJSON(t *testing.T) {
	t.Parallel()
	gates := filepath.Join(t.TempDir(), "gates")
	long := strings.Repeat("x", 2000)
	if err := os.WriteFile(gates, []byte("runsc-gpu "+gateGPU+" closed cannot tell: \"quoted\" back\\slash\ttab\x01ctl \xff\xfe end\n"+
		// lines that are no class's (as a multi-line reason would make them): never an Event
		"\"runsc\" exited: 1\nUsage of \"runsc\": -root string\nrunsc-x not-a-label closed x\n"+
		"runsc-kvm "+gateKVM+" open kvm\n"+
		"runsc-x node-restriction.kubernetes.io/gvisor-runsc-x closed "+long+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; . "$GVISORGEN_SCRIPTS/classes.sh"; gvz_gate_events "$1"`, "sh", gates)
	cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "NODE_NAME=" + nodeName, "GVISOR_VERSION=" + tagBin}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gvz_gate_events: %v", err)
	}
	var l struct{ Items []event }
	if err := json.Unmarshal(out, &l); err != nil || len(l.Items) != 3 {
		t.Fatalf("not a JSON List of 3 Events (%v):\n%s", err, out)
	}
	want := "the sandbox class with handler runsc-gpu stays closed on this node (" + gateGPU + ` unset): cannot tell: "quoted" backslashtabctl  end`
	if m := l.Items[0].Message; m != want {
		t.Errorf("message:\n got %q\nwant %q", m, want)
	}
	if m := l.Items[1].Message; l.Items[1].Reason != "SandboxClassOpen" || !strings.Contains(m, "passed its checks (kvm) with gVisor "+tagBin) {
		t.Errorf("open Event: %s %q", l.Items[1].Reason, m)
	}
	if m := l.Items[2].Message; len(m) > 900 || !strings.HasSuffix(m, strings.Repeat("x", 700)) {
		t.Errorf("long reason: %d bytes", len(m))
	}
}
