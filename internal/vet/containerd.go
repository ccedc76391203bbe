package vet

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// containerdFindings warns when a target's gVisor release needs a newer
// containerd than its nodes may run: gvisor.release.containerdFloor (derived
// in CUE from #ShimNeedsContainerd, compat.cue: the one home of the rule)
// against gvisor.host.containerd (the profile's known floor, or the user's).
// A warning, not an error: the installer refuses such a node by itself
// before installing anything (CONTAINERD_MIN_VERSION), so no node breaks.
func containerdFindings(t eval.Target) []warn.Warning {
	var v struct {
		Gvisor struct {
			Enabled bool   `json:"enabled"`
			Version string `json:"version"`
			Release struct {
				ContainerdFloor string `json:"containerdFloor"`
			} `json:"release"`
			Host struct {
				Containerd        string `json:"containerd"`
				AdoptForeignRunsc bool   `json:"adoptForeignRunsc"`
			} `json:"host"`
		} `json:"gvisor"`
	}
	if json.Unmarshal(t.Values, &v) != nil || !v.Gvisor.Enabled {
		return nil
	}
	var out []warn.Warning
	if v.Gvisor.Host.AdoptForeignRunsc {
		// The installer's default refuses a runsc it did not make; with this on, what the node already has is used
		// as it is, and nothing the generator renders (runsc flags, vet's isolation policy) reaches that handler.
		out = append(out, warn.Warning{Cause: warn.AdoptForeignRunsc, Target: t.Name, Example: t.Example, Subject: "gvisor.host.adoptForeignRunsc", Action: "set gvisor.host.adoptForeignRunsc only where such a handler runs gVisor", Message: fmt.Sprintf("target %s: gvisor.host.adoptForeignRunsc is true: a runsc runtime handler the nodes already have (not gvisorgen's) is used as it is, without gvisor.runsc.config and without vet's runsc-isolation policy, and foreign runsc binaries are replaced by the verified release (given back on uninstall); you vouch that such a handler runs gVisor (docs/security.md, \"A runsc install gvisorgen did not make\")", t.Name)})
	}
	floor, nodes := v.Gvisor.Release.ContainerdFloor, v.Gvisor.Host.Containerd
	if floor == "" || nodes == "" || !VersionLess(nodes, floor) {
		return out
	}
	return append(out, warn.Warning{Cause: warn.ContainerdFloor, Target: t.Name, Example: t.Example, Subject: "gvisor.host.containerd", Action: "upgrade the nodes' containerd or pin an older gvisor.version", Message: fmt.Sprintf("target %s: gVisor %s's shim needs containerd >= %s, and this target's nodes may run containerd %s (gvisor.host.containerd): the installer refuses such a node (nothing installed, containerd not restarted) and its gVisor pods cannot start; upgrade those nodes' containerd, or pin gvisor.version to a release whose shim they can start (docs/troubleshooting.md); if every node runs containerd >= %s, set gvisor.host.containerd to it",
		t.Name, v.Gvisor.Version, floor, nodes, floor)})
}

// VersionLess compares containerd versions MAJOR.MINOR[.PATCH] numerically
// (a missing patch is 0), as the installer's gvz_version_lt does.
func VersionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

func versionParts(s string) [3]int {
	var p [3]int
	for i, f := range strings.SplitN(s, ".", 3) {
		p[i], _ = strconv.Atoi(f)
	}
	return p
}
