// Package flux holds the test that keeps the Flux controllers' wrapper modules aligned (ci/flux/README.md).
package flux

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requires reads a go.mod's require lines (module path -> version), in blocks and single lines alike; a replace of a
// module by itself at a version (Kubernetes' staging modules in ci/k8s) gives the version the build uses.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, replaced := map[string]string{}, map[string]string{}
	block := "" // the block the scanner is in: "require", "replace" or none
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.SplitN(sc.Text(), "//", 2)[0])
		kind := block
		switch {
		case line == "require (" || line == "replace (":
			block = line[:7]
			continue
		case line == ")":
			block = ""
			continue
		case strings.HasPrefix(line, "require ") || strings.HasPrefix(line, "replace "):
			kind, line = line[:7], line[8:]
		}
		switch kind {
		case "require":
			if f := strings.Fields(line); len(f) == 2 {
				out[f[0]] = f[1]
			}
		case "replace":
			if from, to, ok := strings.Cut(line, "=>"); ok {
				a, b := strings.Fields(from), strings.Fields(to)
				if len(a) >= 1 && len(b) == 2 && a[0] == b[0] {
					replaced[a[0]] = b[1]
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for m, v := range replaced {
		if _, ok := out[m]; ok {
			out[m] = v
		}
	}
	return out
}

// wrappers are the wrapper modules of what the e2e builds with one Go and one set of flags (-trimpath, static), in
// .ci/run's order: Kubernetes and etcd (ci/k8s/build.sh), the two Flux controllers (ci/flux/build.sh), the registry
// (ci/registry/build.sh) and agent-sandbox's controller (ci/agentsandbox/build.sh).
var wrappers = []string{filepath.Join("..", "k8s"), "source-controller", "kustomize-controller", filepath.Join("..", "registry"), filepath.Join("..", "agentsandbox")}

// TestWrappersAligned: every module two wrappers require is required at one version, so that each later build reuses
// the earlier ones' compiled packages (cold, in that order: Flux 252 -> 150 s after Kubernetes, kustomize-controller
// 143 -> 35 s after source-controller, the registry 60 -> 24 s, agent-sandbox 72 -> 6 s).
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
