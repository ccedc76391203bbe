//go:build nodetest

package node

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// hostExecLog: the commands the wrappers ran, as "wrapper command" lines, counted.
func (h *Host) hostExecLog() map[string]int {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Dir, "hostexec.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		m[l]++
	}
	return m
}

// TestNamespacesPerCommand: each host command runs with the namespaces it needs and no more. The test's HOST_EXEC is
// a private mount namespace plus a new, empty network namespace (as nsenter -t 1 -m leaves the pod's network), and
// it refuses curl; HOST_EXEC_NET keeps the machine's network and runs curl alone. A whole life (unpinned download
// over verified TLS, configure with a restart, uninstall with a restart) passes on both containerd versions, and the
// log shows curl only through HOST_EXEC_NET and every other command through HOST_EXEC.
func TestNamespacesPerCommand(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "24"} {
		t.Run("life/"+ver, func(t *testing.T) {
			cfg := def16()
			if ver == "24" {
				cfg = def24()
			}
			h := newHost(t, ver)
			h.setConfig(cfg)
			h.startContainerd()
			h.mustRun("install-runsc.sh", tlsEnv("/release"))
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			h.mustRunRestarts("configure-containerd.sh", nil, 0)
			h.mustRun("ready.sh", nil)
			h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, 1)
			if h.config() != cfg {
				t.Fatalf("config not restored")
			}
			got := map[string][]string{}
			for l := range h.hostExecLog() {
				w, c, _ := strings.Cut(l, " ")
				got[w] = append(got[w], c)
			}
			for _, v := range got {
				sort.Strings(v)
			}
			if want := []string{"curl"}; !slices.Equal(slices.Compact(got["hostexec-net"]), want) {
				t.Errorf("through HOST_EXEC_NET: %v, want %v", got["hostexec-net"], want)
			}
			// every host command of a life but curl, each in PID 1's mount namespace only (crictl: asked for, absent here;
			// sh: imports expanded and the shim and runsc looked up on the host's PATH)
			if want := []string{"containerd", "crictl", "ctr", "sh", "systemctl"}; !slices.Equal(slices.Compact(got["hostexec"]), want) {
				t.Errorf("through HOST_EXEC: %v, want %v", got["hostexec"], want)
			}
		})
	}
	t.Run("curl-without-the-host-network-fails", func(t *testing.T) {
		// curl in the mount namespace alone (a new network namespace, no refusal by name) cannot reach the server:
		// the network namespace is what HOST_EXEC_NET adds, and curl needs it.
		h := newHost(t, "24")
		plain := h.hostExec("mount-only")
		r := h.refused(tlsEnv("/release", "HOST_EXEC_NET", plain), `runsc.*(failed|could not|Couldn't connect|Could not connect)`)
		if !strings.Contains(r.Output, "127.0.0.1") {
			t.Errorf("the refusal does not name the URL: %s", r)
		}
	})
	t.Run("wrong-prefix-refused", func(t *testing.T) {
		h := newHost(t, "24")
		h.setConfig(def24())
		// curl through HOST_EXEC: the test's wrapper refuses it by name
		h.refused(tlsEnv("/release", "HOST_EXEC_NET", h.Exec), `curl must run through HOST_EXEC_NET`)
		h.startContainerd()
		// a host command other than curl through HOST_EXEC_NET: refused by name too
		h.mustFail("configure-containerd.sh", map[string]string{"HOST_EXEC": h.ExecNet}, `only curl may run through HOST_EXEC_NET, not containerd`)
	})
}
