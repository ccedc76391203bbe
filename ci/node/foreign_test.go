//go:build nodetest

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Binaries gvisorgen did not install (issue 33, "Foreign binaries"): runsc, containerd-shim-runsc-v1 or gvisor-bin/ in
// INSTALL_DIR that gvisorgen's stamp does not name. By default install-runsc refuses them before anything is
// downloaded, naming each, and the host tree stays byte for byte as it was; with ADOPT_FOREIGN_RUNSC=true it takes the
// whole install over (moves them aside into INSTALL_DIR/.gvisorgen-foreign/ once the release verified, with a
// WARNING; never a mix), a re-run moves nothing again, and uninstall gives them back byte for byte, mode included,
// removes the aside folder, and removes the config backup once containerd serves CRI with the restored config.

var adoptBins = map[string]string{"ADOPT_FOREIGN_RUNSC": "true"}

const foreignInstallDir = "/usr/local/bin"

// plantForeign puts a hand install into the install dir, as gVisor's quick start leaves one: bytes no release of the
// fixture has, modes of its own; gvisor-bin/ (a folder of its own mode) holds a sidecar and a symlink to it.
func plantForeign(h *Host, names ...string) {
	h.t.Helper()
	put := func(rel string, mode os.FileMode, b []byte) {
		p := h.P(foreignInstallDir + "/" + rel)
		if err := os.WriteFile(p, b, mode); err != nil {
			h.t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, n := range names {
		switch n {
		case "runsc":
			put(n, 0o750, fakeBinary("runsc", "HAND-INSTALLED"))
		case "containerd-shim-runsc-v1":
			put(n, 0o755, fakeBinary("containerd-shim-runsc-v1", "HAND-INSTALLED"))
		case "runsc-symlink":
			if err := os.Symlink("/opt/gvisor/runsc", h.P(foreignInstallDir+"/runsc")); err != nil {
				h.t.Fatal(err)
			}
		case "gvisor-bin":
			d := h.P(foreignInstallDir + "/gvisor-bin")
			if err := os.Mkdir(d, 0o750); err != nil {
				h.t.Fatal(err)
			}
			if err := os.Chmod(d, 0o750); err != nil {
				h.t.Fatal(err)
			}
			put("gvisor-bin/gvisor_sentry", 0o700, fakeBinary("gvisor_sentry", "HAND-INSTALLED"))
			if err := os.Symlink("gvisor_sentry", filepath.Join(d, "sentry")); err != nil {
				h.t.Fatal(err)
			}
		default:
			h.t.Fatalf("plantForeign: %s", n)
		}
	}
}

// treeUnder: the entries of snapshot() below a host folder (its own entry excluded), keyed by their path inside it.
func treeUnder(snap map[string]string, hostDir string) map[string]string {
	pre := strings.TrimPrefix(hostDir, "/") + "/"
	m := map[string]string{}
	for k, v := range snap {
		if rest, ok := strings.CutPrefix(k, pre); ok {
			m[rest] = v
		}
	}
	return m
}

func TestForeignBinariesRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, tag string
		plant     []string
		stamped   bool   // gvisorgen's install (binaries layout) is there first: its stamp names runsc and the shim only
		shown     string // what the refusal names
	}{
		{name: "runsc", tag: tagBin, plant: []string{"runsc"}, shown: "/usr/local/bin/runsc,"},
		{name: "shim", tag: tagBin, plant: []string{"containerd-shim-runsc-v1"}, shown: "/usr/local/bin/containerd-shim-runsc-v1,"},
		{name: "gvisor-bin", tag: tagArch, plant: []string{"gvisor-bin"}, shown: "/usr/local/bin/gvisor-bin/,"},
		{name: "runsc-symlink", tag: tagBin, plant: []string{"runsc-symlink"}, shown: "/usr/local/bin/runsc,"},
		{name: "all-three", tag: tagArch, plant: []string{"runsc", "containerd-shim-runsc-v1", "gvisor-bin"},
			shown: "/usr/local/bin/runsc, /usr/local/bin/containerd-shim-runsc-v1, /usr/local/bin/gvisor-bin/,"},
		// a stamp that does not name the path: gvisorgen's runsc would boot sandboxes with that gvisor_sentry
		{name: "gvisor-bin-beside-a-stamped-install", tag: tagBin, plant: []string{"gvisor-bin"}, stamped: true, shown: "/usr/local/bin/gvisor-bin/,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, "16")
			env := map[string]string{"GVISOR_VERSION": c.tag}
			if c.stamped {
				h.mustRun("install-runsc.sh", env)
			}
			plantForeign(h, c.plant...)
			before := h.snapshot()
			r := h.mustFail("install-runsc.sh", env, regexp.QuoteMeta("already holds "+c.shown+" which gvisorgen did not install"))
			for _, want := range []string{"nothing was downloaded or changed", "remove them", "gvisor.host.adoptForeignRunsc: true", "uninstall gives them back"} {
				assertContains(t, "refusal", r.Output, want)
			}
			if strings.Contains(r.Output, "downloading") {
				t.Fatalf("downloaded before refusing: %s", r)
			}
			h.assertUnchanged(before)
		})
	}
}

func TestForeignBinariesAdopted(t *testing.T) {
	t.Parallel()
	t.Run("failed-download-leaves-them", func(t *testing.T) {
		h := newHost(t, "16")
		plantForeign(h, "runsc", "containerd-shim-runsc-v1")
		before := h.snapshot()
		env := map[string]string{"ADOPT_FOREIGN_RUNSC": "true", "GVISOR_BASE_URL": refusedURL}
		h.mustFail("install-runsc.sh", env, `connection refused`)
		h.assertUnchanged(before)
		env["GVISOR_SHA512_PINS"] = "x86_64/runsc " + strings.Repeat("ab", 64) + "\nx86_64/containerd-shim-runsc-v1 " + artSHA[tagBin+"/containerd-shim-runsc-v1"]
		env["GVISOR_BASE_URL"] = httpdURL + "/release"
		h.mustFail("install-runsc.sh", env, `sha512 mismatch for .*runsc`)
		h.assertUnchanged(before)
	})
	// install (taken over) -> re-run (nothing moved again, with or without the opt-in) -> configure -> uninstall (given
	// back) on every containerd of the suite: 1.6 with the binaries layout (a foreign gvisor-bin/ must go aside although
	// the release brings none), 1.7 and 2.4.2 with the archive layout (gvisorgen's gvisor-bin/ replaces the foreign one),
	// and 2.2.9 on its own default config, which imports conf.d: the runtime in the drop-in, the config never touched.
	for _, c := range []struct {
		ver, tag string
		dropin   bool
	}{{"16", tagBin, false}, {"17", tagArch, false}, {"24", tagArch, false}, {"22", tagArch, true}} {
		t.Run("takeover-then-uninstall-gives-back/"+c.ver, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, c.ver)
			cfg := string(defaults[c.ver])
			if c.ver == "24" {
				cfg = def24() // the block in place: the backup below is the block's
			}
			h.setConfig(cfg)
			h.startContainerd()
			plantForeign(h, "runsc", "containerd-shim-runsc-v1", "gvisor-bin")
			orig := treeUnder(h.snapshot(), foreignInstallDir)
			env := map[string]string{"ADOPT_FOREIGN_RUNSC": "true", "GVISOR_VERSION": c.tag}

			r := h.mustRun("install-runsc.sh", env)
			assertContains(t, "install", r.Output, "WARNING: took over /usr/local/bin/runsc, /usr/local/bin/containerd-shim-runsc-v1, /usr/local/bin/gvisor-bin/, which gvisorgen did not install")
			if i, j := strings.Index(r.Output, "verified "), strings.Index(r.Output, "WARNING: took over"); i < 0 || j < i {
				t.Fatalf("moved aside before the release verified: %s", r)
			}
			files := binFiles
			if c.tag == tagArch {
				files = archFiles
			}
			h.assertInstalled(foreignInstallDir, c.tag, files...)
			after := treeUnder(h.snapshot(), foreignInstallDir)
			// never a mix: the install dir holds gvisorgen's files, its stamp and the aside folder, nothing of the hand install
			for k := range after {
				top := strings.SplitN(k, "/", 2)[0]
				if top == ".gvisorgen-foreign" || top == ".gvisorgen-runsc.stamp" {
					continue
				}
				if top == "gvisor-releases" && (k == top || strings.HasPrefix(k, "gvisor-releases/"+c.tag)) || k == "containerd-shim-runsc-v1" || k == "gvisorgen-runsc" {
					continue
				}
				{
					t.Errorf("%s is in the install dir after the takeover (%s)", k, after[k])
				}
			}
			aside := treeUnder(h.snapshot(), foreignInstallDir+"/.gvisorgen-foreign")
			manifest := aside["manifest"]
			delete(aside, "manifest")
			if d := diffTrees(orig, aside); d != "" {
				t.Fatalf("the aside folder is not what was in the install dir:\n%s", d)
			}
			if manifest == "" {
				t.Fatal("no manifest in the aside folder")
			}
			m := h.read(foreignInstallDir + "/.gvisorgen-foreign/manifest")
			for _, want := range []string{"moved runsc\n", "moved containerd-shim-runsc-v1\n", "moved gvisor-bin\n",
				"file 750 0:0 " + sum(readOrFail(t, h.P(foreignInstallDir+"/.gvisorgen-foreign/runsc"))) + " runsc\n",
				"dir 750 0:0 gvisor-bin\n", "link 777 0:0 gvisor-bin/sentry -> gvisor_sentry\n"} {
				assertContains(t, "manifest", m, want)
			}

			// re-runs: already taken over, nothing moved again, nothing downloaded (the base URL is refused)
			for _, e := range []map[string]string{env, {"GVISOR_VERSION": c.tag}} {
				e = cloneEnv(e)
				e["GVISOR_BASE_URL"] = refusedURL
				r = h.mustRun("install-runsc.sh", e)
				assertContains(t, "re-run", r.Output, "nothing to do")
				if d := diffTrees(after, treeUnder(h.snapshot(), foreignInstallDir)); d != "" {
					t.Fatalf("a re-run changed the install dir:\n%s", d)
				}
			}

			h.mustRun("configure-containerd.sh", map[string]string{"GVISOR_VERSION": c.tag})
			if c.dropin {
				if !h.exists(dropIn) || h.config() != cfg {
					t.Fatalf("the drop-in node: drop-in there %v, config untouched %v", h.exists(dropIn), h.config() == cfg)
				}
			} else if !h.exists("/etc/containerd/config.toml.gvisorgen-backup") {
				t.Fatal("configure-containerd made no backup")
			}
			before := h.restarts()
			r = h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
			assertContains(t, "uninstall", r.Output, "gave back /usr/local/bin/runsc /usr/local/bin/containerd-shim-runsc-v1 /usr/local/bin/gvisor-bin as install-runsc found them")
			if d := diffTrees(orig, treeUnder(h.snapshot(), foreignInstallDir)); d != "" {
				t.Fatalf("the install dir after uninstall is not the hand install as it was:\n%s", d)
			}
			if h.restarts() != before+1 {
				t.Fatalf("want one restart, got %d", h.restarts()-before)
			}
			if h.config() != cfg {
				t.Fatal("config not restored")
			}
			for _, p := range []string{"/etc/containerd/config.toml.gvisorgen-backup", "/etc/containerd/config.toml.gvisorgen-applied", dropIn} {
				if h.exists(p) {
					t.Fatalf("%s left after a verified uninstall", p)
				}
			}
			if !c.dropin {
				assertContains(t, "uninstall", r.Output, "removed /etc/containerd/config.toml.gvisorgen-backup: containerd serves CRI")
			}
			h.mustRun("ready.sh", map[string]string{"GVISOR_MODE": "uninstall"})
			// again: nothing to do, nothing moved, no restart
			h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
			if d := diffTrees(orig, treeUnder(h.snapshot(), foreignInstallDir)); d != "" || h.restarts() != before+1 {
				t.Fatalf("a second uninstall changed something (%d restarts):\n%s", h.restarts()-before, d)
			}
		})
	}
	t.Run("another-foreign-one-after-the-takeover-refused", func(t *testing.T) {
		h := newHost(t, "16")
		plantForeign(h, "runsc", "containerd-shim-runsc-v1")
		h.mustRun("install-runsc.sh", adoptBins)
		plantForeign(h, "gvisor-bin")
		before := h.snapshot()
		h.mustFail("install-runsc.sh", adoptBins, `cannot take over /usr/local/bin/gvisor-bin: an earlier takeover already moved a foreign install aside`)
		h.assertUnchanged(before)
	})
}

// TestForeignBinariesKilled: TestKilledRun's method (kill_test.go) for the steps that are new here. install-runsc is
// killed right after each path of the takeover first exists (the aside folder under its temp name with its manifest,
// the folder renamed into place, runsc and gvisor-bin/ moved into it; the shim moves as runsc does) and right after the
// first step past it (the record of the install under way). uninstall gives back paths that existed when it started
// (gvisorgen's runsc was there), so its kills are keyed on what disappears instead: after the block is gone but before
// containerd was restarted without it (runsc.toml gone: the next run must restart containerd, then remove the applied
// marker and the backup), right after runsc left the aside folder, and after its manifest went. Each time the next run
// must succeed and leave the host tree exactly as one uninterrupted run.
func TestForeignBinariesKilled(t *testing.T) {
	t.Parallel()
	all := []string{"runsc", "containerd-shim-runsc-v1", "gvisor-bin"}
	reference := func(t *testing.T, kc killCase) (want map[string]string, steps []killStep, start string) {
		tpl := newHost(t, kc.ver)
		kc.prep(tpl)
		tpl.stopContainerd()
		ref := newHostFrom(t, kc.ver, tpl.Root)
		rec := filepath.Join(ref.Dir, "record")
		out, err := ref.hookedCmd(kc.script, kc.env, "GVZT_RECORD="+rec).CombinedOutput()
		if err != nil {
			t.Fatalf("reference run: %v\n%s", err, out)
		}
		want = ref.tree()
		b, _ := os.ReadFile(rec)
		steps = parseSteps(ref, string(b))
		ref.stopContainerd()
		return want, steps, tpl.Root
	}
	t.Run("install-runsc/takeover", func(t *testing.T) {
		t.Parallel()
		kc := killCase{name: "install-runsc/takeover", ver: "16", script: "install-runsc.sh",
			env: map[string]string{"ADOPT_FOREIGN_RUNSC": "true", "GVISOR_VERSION": tagArch}, prep: func(h *Host) { plantForeign(h, all...) }}
		want, steps, start := reference(t, kc)
		// one kill per applet call at which a path of the takeover first exists, and the first step after them
		var points []killStep
		seen := map[int]bool{}
		for _, st := range steps {
			if seen[st.n] {
				continue
			}
			if strings.Contains(st.glob, ".gvisorgen-foreign") {
				seen[st.n] = true
				// the shim moves as runsc did just before it: one partial move is enough
				if !strings.HasSuffix(st.glob, "/containerd-shim-runsc-v1") {
					points = append(points, st)
				}
			} else if len(points) > 0 {
				points = append(points, st)
				break
			}
		}
		var names []string
		for _, p := range points {
			names = append(names, fmt.Sprintf("before call %d (%s): %s", p.n, p.before, p.glob))
		}
		t.Logf("%d of %d steps:\n%s", len(points), len(steps), strings.Join(names, "\n"))
		// the temp folder (with its manifest), the folder in place, runsc, gvisor-bin/, the step after
		if len(points) != 5 {
			t.Fatalf("want 5 kill points, got %d", len(points))
		}
		for i, st := range points {
			t.Run(fmt.Sprintf("%02d-%s", i, filepath.Base(st.glob)), func(t *testing.T) {
				t.Parallel()
				killAt(t, kc, st, want, start)
			})
		}
	})
	t.Run("uninstall/give-back", func(t *testing.T) {
		t.Parallel()
		kc := killCase{name: "uninstall/give-back", ver: "24", script: "uninstall.sh", env: map[string]string{"GVISOR_MODE": "uninstall"},
			prep: func(h *Host) {
				h.setConfig(def24())
				h.startContainerd()
				plantForeign(h, all...)
				h.mustRun("install-runsc.sh", map[string]string{"ADOPT_FOREIGN_RUNSC": "true", "GVISOR_VERSION": tagArch})
				h.mustRun("configure-containerd.sh", map[string]string{"GVISOR_VERSION": tagArch})
			}}
		want, _, start := reference(t, kc)
		for i, c := range []struct{ gone, expect string }{
			// after the block was swapped out and runsc.toml removed, before the restart: the next run finds no block
			// to remove, but the applied marker names the config with the block, so it restarts containerd
			{"/etc/containerd/runsc.toml", "an earlier uninstall removed gvisorgen's block and did not finish): restarting it"},
			// runsc given back, the shim and gvisor-bin/ not yet
			{foreignInstallDir + "/.gvisorgen-foreign/runsc", "gave back"},
			// all given back, the manifest removed, the folder not yet
			{foreignInstallDir + "/.gvisorgen-foreign/manifest", "removed the empty /usr/local/bin/.gvisorgen-foreign"},
		} {
			t.Run(fmt.Sprintf("%02d-%s-gone", i, filepath.Base(c.gone)), func(t *testing.T) {
				t.Parallel()
				killWhenGone(t, kc, c.gone, c.expect, want, start)
			})
		}
	})
}

// goneHook: kill_test.go's hook, plus a kill right after the path GVZT_GONE no longer exists (at the next applet call).
const goneHook = `_gvzt_hook() {
    if [ -n "${GVZT_GONE:-}" ] && [ ! -e "$GVZT_GONE" ] && [ ! -L "$GVZT_GONE" ]; then
        echo "$GVZT_GONE gone $1" >"$GVZT_HIT"
        while :; do command sleep 1; done
    fi
`

var (
	goneOnce sync.Once
	goneDir  string
)

// killWhenGone: killAt's method, the run killed right after the host path gone disappeared; the next run's output
// must hold expect (and, when it restarts containerd, do so once).
func killWhenGone(t *testing.T, kc killCase, gone, expect string, want map[string]string, start string) {
	goneOnce.Do(func() {
		d := filepath.Join(work, "hooked-gone")
		must(os.MkdirAll(d, 0o755))
		src := hookedScripts(t)
		ents, err := os.ReadDir(src)
		must(err)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			must(err)
			if e.Name() == "lib.sh" {
				s := strings.Replace(string(b), "_gvzt_hook() {\n", goneHook, 1)
				if s == string(b) {
					panic("the kill hook has no _gvzt_hook() to extend")
				}
				b = []byte(s)
			}
			must(os.WriteFile(filepath.Join(d, e.Name()), b, 0o644))
		}
		goneDir = d
	})
	h := newHostFrom(t, kc.ver, start)
	if !h.exists(gone) {
		t.Fatalf("%s is not there to begin with", gone)
	}
	hit := filepath.Join(h.Dir, "hit")
	cmd := h.hookedCmd(kc.script, kc.env, "GVISORGEN_SCRIPTS="+goneDir, "GVZT_GONE="+h.P(gone), "GVZT_HIT="+hit)
	cmd.Args[1] = filepath.Join(goneDir, kc.script)
	killWhenHit(t, cmd, hit, gone+" gone")
	before := h.restarts()
	r := h.run(kc.script, kc.env)
	if r.Code != 0 {
		t.Fatalf("%s gone: the run after the killed one failed: %s", gone, r)
	}
	assertContains(t, "the next run", r.Output, expect)
	if got := h.restarts() - before; strings.Contains(expect, "restarting") != (got == 1) || got > 1 {
		t.Fatalf("%s gone: the next run restarted containerd %d times", gone, got)
	}
	if d := diffTrees(want, h.tree()); d != "" {
		t.Fatalf("killed right after %s was gone: after the next run the node differs from one uninterrupted run:\n%s\n%s", gone, d, r.Output)
	}
	h.stopContainerd()
	b, _ := os.ReadFile(hit)
	t.Logf("killed at %s", strings.TrimSpace(string(b)))
}

func readOrFail(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cloneEnv(e map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range e {
		m[k] = v
	}
	return m
}
