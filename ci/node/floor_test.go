//go:build nodetest

package node

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// shimFloors reads the CUE fact #ShimNeedsContainerd (cue/compat.cue): since -> containerd, in order.
func shimFloors(t *testing.T) [][2]string {
	t.Helper()
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ Since, Containerd string }
	if err := ev.Instance().LookupPath(cue.ParsePath("#ShimNeedsContainerd")).Decode(&rows); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for i, r := range rows {
		if i > 0 && r.Since <= rows[i-1].Since {
			t.Fatalf("#ShimNeedsContainerd is not in ascending since order at %s", r.Since)
		}
		out = append(out, [2]string{r.Since, r.Containerd})
	}
	if len(out) == 0 {
		t.Fatal("#ShimNeedsContainerd is empty")
	}
	return out
}

// TestContainerdFloorAgrees: the CUE fact, the rendered CONTAINERD_MIN_VERSION and the installer's check agree. For
// release tags around each entry's boundary, the rendered env holds the floor the fact gives (computed here from the
// table itself); for containerd --version outputs of every known shape, install-runsc's gvz_check_containerd_floor
// refuses exactly the ones vet's VersionLess (the warning's comparison) calls older than that floor, and its refusal
// names both versions and both ways out.
func TestContainerdFloorAgrees(t *testing.T) {
	t.Parallel()
	floors := shimFloors(t)
	want := func(tag string) string {
		f := ""
		for _, r := range floors {
			if tag[:8] >= r[0] {
				f = r[1]
			}
		}
		return f
	}
	tags := []string{"20221219", "20240212", "20260511", "20260801", "20261015"}
	for _, r := range floors {
		tags = append(tags, dayBefore(t, r[0]), r[0], r[0]+".1")
	}
	seen := map[string]bool{}
	for _, tag := range tags {
		env, err := renderKind("gvisor.version=" + tag)
		if err != nil {
			t.Fatalf("render %s: %v", tag, err)
		}
		got := env["CONTAINERD_MIN_VERSION"]
		if got != want(tag) {
			t.Errorf("gvisor.version %s: rendered CONTAINERD_MIN_VERSION %q, the fact says %q", tag, got, want(tag))
		}
		if got != "" {
			seen[got] = true
		}
	}
	if !seen["1.7.0"] {
		t.Errorf("no tag rendered the 1.7.0 floor")
	}

	fake := filepath.Join(t.TempDir(), "hx")
	// HOST_EXEC stand-in: every host command is `containerd --version`, answered with $FAKE_CTRD.
	if err := writeFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$FAKE_CTRD\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{ // containerd --version -> the version the installer must read
		"containerd github.com/containerd/containerd v1.6.20 2806fc1057397dbaeefbea0e4e17bddfbd388f38":   "1.6.20",
		"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3":                    "1.6.20",
		"containerd containerd.io 1.6.33 d2d58213f83a351ca8f528a95fbd145f5654e957":                       "1.6.33",
		"containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da":                       "1.7.27",
		"containerd github.com/containerd/containerd v1.7.0 1fbd70374134b891f97ce19c70b6e50c7b9f4e0d":    "1.7.0",
		"containerd github.com/containerd/containerd v1.7.35 ":                                           "1.7.35",
		"containerd github.com/containerd/containerd v1.7.0-rc.1 abc":                                    "1.7.0",
		"containerd github.com/containerd/containerd/v2 2.4.2+unknown ":                                  "2.4.2",
		"containerd github.com/containerd/containerd/v2 v2.0.0 207ad711eabd375a01713109a8a197d197ff6542": "2.0.0",
		"containerd github.com/containerd/containerd v1.10.1 x":                                          "1.10.1",
		"containerd github.com/containerd/containerd 1.6 x":                                              "1.6.0",
		"containerd github.com/containerd/containerd (devel) x":                                          "",
	}
	for floor := range seen {
		for out, have := range outputs {
			cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; gvz_load_env; gvz_check_containerd_floor`)
			cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "HOST_EXEC=sh " + fake,
				"FAKE_CTRD=" + out, "GVISOR_VERSION=20260801", "CONTAINERD_MIN_VERSION=" + floor}
			b, err := cmd.CombinedOutput()
			msg := strings.TrimSpace(string(b))
			switch {
			case have == "":
				if err == nil || !strings.Contains(msg, "names no version") {
					t.Errorf("floor %s, %q: want a refusal naming the unreadable version, got %v: %s", floor, out, err, msg)
				}
			case vet.VersionLess(have, floor):
				for _, w := range []string{"refusing to install gVisor 20260801", ">= " + floor, "runs containerd " + have, "nothing was installed", "upgrade containerd", "pin gvisor.version"} {
					if err == nil || !strings.Contains(msg, w) {
						t.Errorf("floor %s, %q: want a refusal naming %q, got %v: %s", floor, out, w, err, msg)
					}
				}
			default:
				if err != nil || !strings.Contains(msg, "host containerd "+have+" >= "+floor) {
					t.Errorf("floor %s, %q: want it accepted as %s, got %v: %s", floor, out, have, err, msg)
				}
			}
		}
	}
	// No floor (releases before the first entry): the host is not even asked.
	cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; gvz_load_env; gvz_check_containerd_floor`)
	cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "HOST_EXEC=false", "GVISOR_VERSION=20240212"}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("no floor: the check failed: %v %s", err, b)
	}
}

func dayBefore(t *testing.T, d string) string {
	t.Helper()
	tm, err := time.Parse("20060102", d)
	if err != nil {
		t.Fatal(err)
	}
	return tm.AddDate(0, 0, -1).Format("20060102")
}

// TestContainerdFloorOnTheNode: install-runsc with the floor rendered for each release, against the real containerd
// versions. An archive release (2026, after the first floor's date) on containerd 1.6 is refused before anything is
// downloaded: the host tree is unchanged, containerd not restarted, and configure-containerd never runs (the init
// containers stop at the first failure); the same release is installed on 2.4.2. At the boundary: the day before the
// floor's date installs on 1.6 (no floor rendered), the floor's own date is refused.
func TestContainerdFloorOnTheNode(t *testing.T) {
	t.Parallel()
	floor := func(tag string) string {
		env, err := renderKind("gvisor.version=" + tag)
		if err != nil {
			t.Fatal(err)
		}
		return env["CONTAINERD_MIN_VERSION"]
	}
	first := shimFloors(t)[0][0]
	t.Run("16-refuses-archive-release", func(t *testing.T) {
		h := newHost(t, "16")
		h.startContainerd()
		r0 := h.restarts()
		r := h.refused(map[string]string{"GVISOR_VERSION": tagArch, "CONTAINERD_MIN_VERSION": floor(tagArch)},
			`refusing to install gVisor `+tagArch+`: its shim needs containerd >= 1\.7\.0 .* this node runs containerd 1\.6\.[0-9]+ .*nothing was installed`)
		if strings.Contains(r.Output, "downloading") {
			t.Fatalf("refused only after downloading: %s", r)
		}
		if n := h.restarts() - r0; n != 0 {
			t.Fatalf("containerd restarted %d times", n)
		}
	})
	t.Run("24-installs-archive-release", func(t *testing.T) {
		h := newHost(t, "24")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "CONTAINERD_MIN_VERSION": floor(tagArch)})
		if !strings.Contains(r.Output, "host containerd 2.4.2 >= 1.7.0") {
			t.Fatalf("no floor check logged: %s", r)
		}
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
	})
	t.Run("17-installs-and-configures-archive-release", func(t *testing.T) {
		// containerd 1.7 (the oldest that reads the bootstrap handshake): accepted at the floor, and configured
		h := newHost(t, "17")
		h.startContainerd()
		env := map[string]string{"GVISOR_VERSION": tagArch, "CONTAINERD_MIN_VERSION": floor(tagArch)}
		r := h.mustRun("install-runsc.sh", env)
		if !regexp.MustCompile(`host containerd 1\.7\.[0-9]+ >= 1\.7\.0`).MatchString(r.Output) {
			t.Fatalf("no floor check logged: %s", r)
		}
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
		h.mustRunRestarts("configure-containerd.sh", env, 1)
	})
	t.Run("16-boundary", func(t *testing.T) {
		before := dayBefore(t, first)
		if f := floor(before); f != "" {
			t.Fatalf("%s renders floor %q, want none", before, f)
		}
		if f := floor(first); f != "1.7.0" {
			t.Fatalf("%s renders floor %q, want 1.7.0", first, f)
		}
		h := newHost(t, "16")
		// the fixture's binaries-layout release, served under the boundary tags by the same files
		h.refused(map[string]string{"GVISOR_VERSION": first, "CONTAINERD_MIN_VERSION": floor(first)}, `its shim needs containerd >= 1\.7\.0`)
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagBin, "CONTAINERD_MIN_VERSION": floor(before)})
	})
}

// TestLayoutAgrees: the day the archive layout starts has two homes, #ArchiveSince (cue/values.cue: the artifacts vet
// and pin resolve) and lib.sh's gvz_layout (what GVISOR_LAYOUT=auto downloads on the node): for the day before it, the
// day itself and a build number on it, the installer picks the layout the CUE rule gives.
func TestLayoutAgrees(t *testing.T) {
	t.Parallel()
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	since, err := ev.Instance().LookupPath(cue.ParsePath("#ArchiveSince")).String()
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{dayBefore(t, since), since, since + ".1", "20240212", "20261015"} {
		want := "binaries"
		if tag[:8] >= since {
			want = "archive"
		}
		cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; gvz_layout`)
		cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir, "GVISOR_VERSION=" + tag, "GVISOR_LAYOUT=auto"}
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("gvisor.version %s: gvz_layout says %q (%v), #ArchiveSince %s says %s", tag, got, err, since, want)
		}
	}
}
