package vet

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// Runsc flags that weaken the sandbox's isolation, the one list vet reads
// (docs/security.md, "runsc flags that weaken the sandbox" is checked against it by a test). Source:
// the flags' own help texts in gVisor's runsc/config/flags.go (google/gvisor
// at 3c5eee17, 2026-08-21) and gVisor's user guide (g3doc/user_guide/
// filesystem.md on --overlay2, networking.md on --allow-flag-override, the
// 2020-09-18 blog post "Containing a Real Vulnerability" on --net-raw).
// Refuse marks the flags that hand the host, or the sandbox's own
// configuration, to the workload: policy runsc-isolation refuses them (a
// target waives it with a reason); the others are warnings.
var RunscFlags = []RunscFlag{
	{Name: "allow-flag-override", Weak: "true", Refuse: true,
		Reason: "lets any pod override runsc flags through OCI annotations (dev.gvisor.flag.<name>): a tenant could turn off every other protection of this list (a debugging aid, per flags.go)"},
	{Name: "TESTONLY-", Prefix: true, Weak: "*", Refuse: true,
		Reason: "test-only flags (\"do not ever use!\"): TESTONLY-unsafe-nonroot \"skips many security measures that isolate the host from the sandbox\""},
	{Name: "network", Weak: "host", Refuse: true,
		Reason: "the sandbox uses the host's network stack (syscalls go to the host kernel's netstack) instead of gVisor's netstack, which flags.go calls the more secure, isolated choice"},
	{Name: "host-uds", Weak: "!none", Refuse: true,
		Reason: "lets the sandbox open or create host Unix-domain sockets (default none): a socket of a host daemon (containerd, docker, kubelet) is a way out of the sandbox"},
	{Name: "host-fifo", Weak: "!none", Refuse: true,
		Reason: "lets the sandbox open host FIFOs (named pipes) (default none): data paths to host processes"},
	{Name: "character-device-policy", Weak: "!emulated-only", Refuse: true,
		Reason: "opens host character devices of gofer mounts through the host (default emulated-only, \"more secure\"): host device drivers become reachable"},
	{Name: "profile", Weak: "true", Refuse: true,
		Reason: "\"enabling profiler loosens the seccomp protection added to the sandbox (DO NOT USE IN PRODUCTION)\""},
	{Name: "gofer-network-namespace", Weak: "host", Refuse: true,
		Reason: "the gofers (which run outside the sandbox with host file access) share the host's network namespace instead of an empty one"},
	{Name: "net-raw", Weak: "true",
		Reason: "enables raw sockets, which gVisor disables even for pods with CAP_NET_RAW: \"raw sockets allow malicious containers to craft packets and potentially attack the network\" (the 2020 blog post: CVE-2020-14386 was reachable only through them)"},
	{Name: "allow-packet-socket-write", Weak: "true",
		Reason: "untrusted workloads can write AF_PACKET sockets and \"potentially attack the network because of the ability to craft arbitrary packets\""},
	{Name: "overlay2", Weak: "none",
		Reason: "turns off the root filesystem overlay: the workload's writes to its root filesystem reach the host filesystem through the gofer instead of staying in the sandbox (filesystem.md); it matters for the root mount, the only one the default overlays"},
	{Name: "rootless", Weak: "true",
		Reason: "sandbox and gofer \"may run with same privileges as current user\": the layered host-side confinement is relaxed"},
	{Name: "ignore-cgroups", Weak: "true",
		Reason: "runsc does not configure cgroups: the pod's CPU and memory limits no longer bound the sandbox"},
}

// RunscFlag is one runsc flag that weakens isolation with some values.
type RunscFlag struct {
	Name string
	// Prefix makes Name match every flag that starts with it.
	Prefix bool
	// Weak is the weakening value: "*" any, "!v" any but v, else exactly it.
	Weak   string
	Refuse bool
	Reason string
}

// matches says whether flag name=value is this weakening.
func (f RunscFlag) matches(name, value string) bool {
	if f.Prefix && !strings.HasPrefix(name, f.Name) || !f.Prefix && name != f.Name {
		return false
	}
	switch {
	case f.Weak == "*":
		return true
	case strings.HasPrefix(f.Weak, "!"):
		return value != f.Weak[1:]
	}
	return value == f.Weak
}

// runscFindings holds a target's runsc flags (gvisor.runsc.config, and each
// sandbox class's gvisor.classes.<name>.runsc.config) to the list: refused
// ones are policy runsc-isolation, the others warnings.
func runscFindings(t eval.Target) (errs []finding, warns []warn.Warning) {
	type flags struct {
		Runsc struct {
			Config map[string]any `json:"config"`
		} `json:"runsc"`
	}
	var v struct {
		Gvisor struct {
			Enabled bool `json:"enabled"`
			flags
			Classes map[string]flags `json:"classes"`
		} `json:"gvisor"`
	}
	if json.Unmarshal(t.Values, &v) != nil || !v.Gvisor.Enabled {
		return nil, nil
	}
	sets := []struct {
		field string
		flags map[string]any
	}{{"gvisor.runsc.config", v.Gvisor.Runsc.Config}}
	for _, n := range sortedKeys(v.Gvisor.Classes) {
		sets = append(sets, struct {
			field string
			flags map[string]any
		}{"gvisor.classes." + strconv.Quote(n) + ".runsc.config", v.Gvisor.Classes[n].Runsc.Config})
	}
	for _, set := range sets {
		names := make([]string, 0, len(set.flags))
		for n := range set.flags {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			val := fmt.Sprint(set.flags[n])
			for _, f := range RunscFlags {
				if !f.matches(n, val) {
					continue
				}
				msg := fmt.Sprintf("%s %s = %s weakens the sandbox: %s", set.field, n, val, f.Reason)
				if f.Refuse {
					errs = append(errs, finding{policy: "runsc-isolation", field: set.field + "." + strconv.Quote(n), msg: "gvisorgen policy runsc-isolation: " + msg + "; remove it, or waive runsc-isolation with a reason"})
				} else {
					warns = append(warns, warn.Warning{Cause: warn.RunscFlag, Target: t.Name, Subject: n, Example: t.Example, Action: "remove it unless this cluster needs it",
						Message: fmt.Sprintf("target %s: %s", t.Name, msg)})
				}
			}
		}
	}
	return errs, warns
}
