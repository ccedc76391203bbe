// Package flux holds the test that keeps the Flux controllers' wrapper modules aligned (ci/flux/README.md).
package flux

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requires reads a go.mod's require lines (module path -> version), in blocks and single lines alike.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.SplitN(sc.Text(), "//", 2)[0])
		switch {
		case line == "require (":
			in = true
			continue
		case line == ")":
			in = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !in:
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wrappers are the wrapper modules of what the cluster e2e builds with one Go and one set of flags, in .ci/run's order:
// the two Flux controllers (ci/flux/build.sh), the registry (ci/registry/build.sh) and agent-sandbox's controller
// (ci/agentsandbox/build.sh).
var wrappers = []string{"source-controller", "kustomize-controller", filepath.Join("..", "registry"), filepath.Join("..", "agentsandbox")}

// TestWrappersAligned: every module two wrappers require is required at one version, so that each later build reuses
// the earlier ones' compiled packages (cold, after source-controller: kustomize-controller 143 -> 35 s, the registry
// 60 -> 24 s, agent-sandbox 72 -> 6 s).
func TestWrappersAligned(t *testing.T) {
	reqs := make([]map[string]string, len(wrappers))
	for i, w := range wrappers {
		reqs[i] = requires(t, filepath.Join(w, "go.mod"))
		if len(reqs[i]) < 50 {
			t.Errorf("%s: only %d modules required: is the go.mod parse broken?", w, len(reqs[i]))
		}
	}
	for i := range wrappers {
		for j := i + 1; j < len(wrappers); j++ {
			for m, v := range reqs[i] {
				if w, ok := reqs[j][m]; ok {
					if v != w {
						t.Errorf("%s: %s's wrapper requires %s, %s's %s: require the higher in every wrapper (ci/flux/README.md)", m, wrappers[i], v, wrappers[j], w)
					}
				}
			}
		}
	}
}
