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

// TestWrappersAligned: every module both wrappers require is required at one version, so that the second controller's
// build reuses the first one's compiled packages (kustomize-controller 143 -> 37 s cold).
func TestWrappersAligned(t *testing.T) {
	sc := requires(t, filepath.Join("source-controller", "go.mod"))
	kc := requires(t, filepath.Join("kustomize-controller", "go.mod"))
	shared := 0
	for m, v := range sc {
		if w, ok := kc[m]; ok {
			shared++
			if v != w {
				t.Errorf("%s: source-controller's wrapper requires %s, kustomize-controller's %s: require the higher in both (ci/flux/README.md)", m, v, w)
			}
		}
	}
	if shared < 100 {
		t.Errorf("only %d modules required by both wrappers: is the go.mod parse broken?", shared)
	}
}
