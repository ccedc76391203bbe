//go:build nodetest

package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSteadyStateDumpsOnce: a later run of configure-containerd on a node it already configured (the config on disk is
// the candidate, byte for byte) validates with the dump of the config on disk instead of a second one of the same
// bytes: one containerd process fewer (2.4: --version, the config on disk, the base; not the candidate). Where the candidate differs
// (a fresh node, or an edit since) or the config is validated through a copy with spelled-out imports (a drop-in
// folder), each dump is its own. The checks made with the reused dump are the same: TestConfigure's idempotent runs,
// TestForeignHandler and the concurrent writer cases go through it.
func TestSteadyStateDumpsOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, ctrd string
		config     func() string
		first      int // containerd processes of the first run (with the candidate's own dump)
		later      int // containerd processes of a later run
	}{
		// 1.6's default config defines runc's table: the candidate with a minimal runc entry (a second table of the
		// same name) is not tried, only the plain block
		{"block/1.6", "16", def16, 4, 3},
		{"block/2.4", "24", def24v3, 4, 3},
		{"dropin/2.4", "24", str(cfgV2Imports), 4, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, c.ctrd)
			h.setConfig(c.config())
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			count := func() int {
				h.t.Helper()
				if err := os.Truncate(filepath.Join(h.Dir, "hostexec.log"), 0); err != nil {
					t.Fatal(err)
				}
				h.mustRun("configure-containerd.sh", nil)
				return h.hostExecLog()["hostexec containerd"]
			}
			if n := count(); n != c.first {
				t.Errorf("first run: %d containerd processes, want %d", n, c.first)
			}
			cfg := h.config()
			if n := count(); n != c.later {
				t.Errorf("later run: %d containerd processes, want %d", n, c.later)
			}
			if h.config() != cfg {
				t.Fatalf("the later run changed the config")
			}
			// an edit since the last run: the candidate is not the file on disk, and gets its own dump
			h.setConfig(cfg + "\n# an admin's comment\n")
			if n := count(); n != c.first {
				t.Errorf("run after an edit: %d containerd processes, want %d", n, c.first)
			}
		})
	}
}
