//go:build nodetest

package node

import (
	"strings"
	"testing"
)

// TestCRIListsRunsc: the last check of configure-containerd asks the running containerd's CRI, with the host's
// crictl, whether it lists the runsc handler — the answer kubelet will get. A host whose unit runs containerd with
// another config file (a --config the installer does not edit) serves CRI without runsc: refused with the cause and
// the fix, on every retry, with no further restart. A host without crictl says the list was not checked.
func TestCRIListsRunsc(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "22", "24"} {
		t.Run(ver+"/lists", func(t *testing.T) {
			h := newHost(t, ver)
			h.link(crictlBin, h.Dir+"/fakebin/crictl")
			h.setConfig(defFor(ver))
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
			assertContains(t, "output", r.Output, "containerd's CRI on /run/containerd/containerd.sock lists the runsc handler")
			r = h.mustRunRestarts("configure-containerd.sh", nil, 0)
			assertContains(t, "output", r.Output, "lists the runsc handler")
		})
		t.Run(ver+"/another-config", func(t *testing.T) {
			h := newHost(t, ver)
			h.link(crictlBin, h.Dir+"/fakebin/crictl")
			orig := defFor(ver)
			h.setConfig(orig)
			h.write(h.P("/etc/containerd/unit.toml"), 0o644, orig)
			h.knob("config", "/etc/containerd/unit.toml")
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			if ver == "22" {
				// the unit's own config imports conf.d too (a copy of the default): the drop-in reaches the running
				// containerd all the same, and CRI lists it (dropin_test.go has the unit whose config imports nothing)
				r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
				assertContains(t, "output", r.Output, "lists the runsc handler")
				if h.read("/etc/containerd/unit.toml") != orig || h.config() != orig {
					t.Fatal("a config file was changed on the drop-in path")
				}
				return
			}
			want := `containerd's CRI on /run/containerd/containerd\.sock does not list the runsc handler although /etc/containerd/config\.toml defines it: the running containerd does not read that file`
			r0 := h.restarts()
			h.mustFail("configure-containerd.sh", nil, want)
			if got := h.restarts() - r0; got != 1 {
				t.Fatalf("want 1 restart (the edit), got %d", got)
			}
			r0 = h.restarts()
			h.mustFail("configure-containerd.sh", nil, want)
			if got := h.restarts() - r0; got != 0 {
				t.Fatalf("the retry restarted containerd %d times", got)
			}
			if h.read("/etc/containerd/unit.toml") != orig {
				t.Fatalf("the unit's config file was changed")
			}
			h.mustFail("ready.sh", nil, ".")
		})
	}
	t.Run("no-crictl", func(t *testing.T) {
		h := newHost(t, "24")
		h.setConfig(defFor("24"))
		h.startContainerd()
		h.mustRun("install-runsc.sh", nil)
		r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
		if !strings.Contains(r.Output, "CRI's runtime list not checked (the host has no crictl") {
			t.Fatalf("no word on the unchecked list: %s", r)
		}
	})
}

func defFor(ver string) string {
	switch ver {
	case "24":
		return def24()
	case "22":
		return realDefault("22") // the drop-in
	}
	return def16()
}
