//go:build clustertest

package cluster

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMachineFilesUnchanged (after the scenarios): with the clusters stopped, no file of the machine changed (the
// manifest of hostPaths before and after) and no cgroup of a node is left. KEEP=1 leaves the clusters running:
// then only the files are compared.
func TestMachineFilesUnchanged(t *testing.T) {
	if !keep {
		if err := stopAll(); err != nil {
			t.Error(err)
		}
		// this run's only: another run may have its clusters up beside this one
		if left, _ := filepath.Glob("/sys/fs/cgroup/*/gvisorgen-e2e-*-" + runID()); len(left) > 0 {
			t.Errorf("cgroups left: %v", left)
		}
	}
	after := hostManifest()
	if after != hostBefore {
		t.Errorf("the machine's files changed:\n%s", lineDiff(hostBefore, after, 40))
	}
	t.Logf("no file of the machine changed (%d paths)", len(hostPaths))
}

// runID names this run's cgroups (prepare.sh: gvisorgen-e2e-<V>-<run>, the suffix of the scratch folder's name).
func runID() string {
	return strings.TrimPrefix(filepath.Ext(work), ".")
}
