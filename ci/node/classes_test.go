//go:build nodetest

package node

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Sandbox classes (RUNSC_CLASSES, cue/classes.cue): every further class is one more handler runsc-<suffix> beside
// runsc, in the same block or drop-in, with its own runsc.toml beside RUNSC_CONFIG. On every containerd of the matrix,
// with its own default config: each handler validated by that containerd and listed by its CRI, one restart for all,
// none on a re-run, the probe checks every class's file, a class dropped is removed (its handler and its file, one
// restart), and uninstall leaves the node exactly as it was.

// runscDir: RUNSC_CONFIG's folder as the profiles set it (the harness's own default is the older
// /etc/containerd/runsc.toml).
const runscDir = "/etc/containerd/runsc"

// twoClasses and threeClasses: RUNSC_CLASSES as cue/classes.cue renders it.
var (
	twoClasses   = "[runsc-gpu]\nnvproxy = true\nnvproxy-driver-version = \"570.86.15\""
	threeClasses = twoClasses + "\n[runsc-kvm]\nplatform = \"kvm\""
)

// classDefault: the node's own default config: 1.x's (no imports: the block) or 2.2+'s (conf.d: the drop-in).
func classDefault(ver string) string { return string(defaults[ver]) }

func TestClasses(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "17", "22", "24"} {
		t.Run(ver, func(t *testing.T) {
			t.Parallel()
			orig := classDefault(ver)
			h := installedHost(t, ver, orig, true)
			env := map[string]string{"RUNSC_CLASSES": twoClasses, "RUNSC_CONFIG_TOML": "debug = true", "RUNSC_CONFIG": runscDir + "/runsc.toml"}

			r := h.mustRunRestarts("configure-containerd.sh", env, 1)
			assertContains(t, "output", r.Output, "lists the handlers runsc, runsc-gpu")
			h.assertClasses(ver, "runsc", "runsc-gpu")
			assertContains(t, "runsc-gpu.toml", h.read(runscDir+"/runsc-gpu.toml"), "[runsc_config]\nnvproxy = true\nnvproxy-driver-version = \"570.86.15\"\n")
			assertContains(t, "runsc.toml", h.read(runscDir+"/runsc.toml"), "[runsc_config]\ndebug = true\n")
			h.mustRun("ready.sh", env)
			before := h.tree()
			h.mustRunRestarts("configure-containerd.sh", env, 0)
			if d := diffTrees(before, h.tree()); d != "" {
				t.Fatalf("a re-run changed the node: %s", d)
			}

			// a third class: one restart for it, every handler still there
			env["RUNSC_CLASSES"] = threeClasses
			h.mustFail("ready.sh", env, `not ready: configure-containerd never configured the class with handler runsc-kvm`)
			r = h.mustRunRestarts("configure-containerd.sh", env, 1)
			assertContains(t, "output", r.Output, "lists the handlers runsc, runsc-gpu, runsc-kvm")
			h.assertClasses(ver, "runsc", "runsc-gpu", "runsc-kvm")
			h.mustRun("ready.sh", env)
			h.mustRunRestarts("configure-containerd.sh", env, 0)

			// a class's file edited by hand: the probe names it, the next run rewrites it (no restart: containerd
			// reads runsc.toml per container, its config did not change)
			h.write(h.P(runscDir+"/runsc-kvm.toml"), 0o644, h.read(runscDir+"/runsc-kvm.toml")+"# edited\n")
			h.mustFail("ready.sh", env, `not ready: `+runscDir+`/runsc-kvm.toml, the runsc.toml of the class with handler runsc-kvm, changed since`)
			h.mustRunRestarts("configure-containerd.sh", env, 0)
			h.mustRun("ready.sh", env)

			// the gpu class dropped: its handler and its file go, one restart
			env["RUNSC_CLASSES"] = "[runsc-kvm]\nplatform = \"kvm\""
			r = h.mustRunRestarts("configure-containerd.sh", env, 1)
			assertContains(t, "output", r.Output, "removed "+runscDir+"/runsc-gpu.toml (the class with handler runsc-gpu is gone)")
			h.assertClasses(ver, "runsc", "runsc-kvm")
			if h.exists(runscDir + "/runsc-gpu.toml") {
				t.Fatalf("the dropped class's runsc.toml is still there")
			}
			if d := h.dump(h.Ctrd, "/etc/containerd/config.toml"); d.HasRuntime("runsc-gpu") {
				t.Fatalf("the dropped class's handler is still in containerd's config:\n%s", d.Stdout)
			}
			h.mustRun("ready.sh", env)

			// uninstall: every handler and every file gvisorgen wrote goes, the config is as it was
			un := map[string]string{"GVISOR_MODE": "uninstall", "RUNSC_CLASSES": env["RUNSC_CLASSES"], "RUNSC_CONFIG": env["RUNSC_CONFIG"]}
			h.mustRunRestarts("uninstall.sh", un, 1)
			if h.config() != orig || h.exists(dropIn) || h.exists(runscDir) {
				t.Fatalf("after uninstall: config changed, drop-in or %s left:\n%s", runscDir, h.config())
			}
			h.mustRun("ready.sh", un)
			h.mustRunRestarts("uninstall.sh", un, 0)
		})
	}
}

// assertClasses: containerd's own dump of the node's config has exactly these gvisorgen handlers (and runc), each with
// gvisorgen's runtime type and its own ConfigPath; the applied marker records each further class's file with its digest.
func (h *Host) assertClasses(ver string, handlers ...string) {
	h.t.Helper()
	d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
	if d.Code != 0 || !d.HasRuntime("runc") {
		h.t.Fatalf("containerd's dump of the node's config fails or lost runc:\n%s%s", d.Stdout, d.Stderr)
	}
	applied := h.read("/etc/containerd/config.toml.gvisorgen-applied")
	for _, hd := range handlers {
		if !d.HasRuntime(hd) {
			h.t.Fatalf("containerd's dump lacks the handler %s:\n%s", hd, d.Stdout)
		}
		file := runscDir + "/runsc.toml"
		if hd != "runsc" {
			file = runscDir + "/" + hd + ".toml"
			assertContains(h.t, "applied marker", applied, "\nclass "+hd+" "+sum512(h.read(file))+" "+file+"\n")
		}
		if !regexp.MustCompile(`(?m)^\s*ConfigPath = ['"]` + regexp.QuoteMeta(file) + `['"]`).MatchString(sectionOf(d.Stdout, d.Prefix+".runtimes."+hd+".options")) {
			h.t.Fatalf("containerd's dump: handler %s does not name %s:\n%s", hd, file, d.Stdout)
		}
		assertContains(h.t, file, h.read(file), "# Managed by gvisorgen: options of containerd-shim-runsc-v1 for the "+hd+" runtime.")
	}
	if got := strings.Count(applied, "\nclass "); got != len(handlers)-1 {
		h.t.Fatalf("applied marker: %d class lines, want %d:\n%s", got, len(handlers)-1, applied)
	}
	_ = ver
}

// sectionOf: the lines of the TOML table header (as a dump prints it) up to the next header.
func sectionOf(dump, table string) string {
	var b strings.Builder
	on := false
	for _, l := range strings.Split(dump, "\n") {
		if m := headerRE.FindStringSubmatch(l); m != nil {
			on = strings.ReplaceAll(m[1], "'", `"`) == table
			continue
		}
		if on {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestClassRefusals: a class's handler or runsc.toml that gvisorgen did not write is refused with nothing changed, and
// RUNSC_CLASSES that the schema would not render is refused before anything is read.
func TestClassRefusals(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"17", "24"} {
		t.Run(ver, func(t *testing.T) {
			t.Parallel()
			orig := classDefault(ver)
			h := installedHost(t, ver, orig, true)
			env := map[string]string{"RUNSC_CLASSES": twoClasses, "RUNSC_CONFIG": runscDir + "/runsc.toml"}

			// someone else's runsc-gpu handler in the config
			foreign := orig + "\n[" + handlerPrefix(ver) + ".runsc-gpu]\n  runtime_type = \"io.containerd.runc.v2\"\n"
			h.setConfig(foreign)
			before, restarts := h.tree(), h.restarts()
			h.mustFail("configure-containerd.sh", env, `ERROR: a runtime handler runsc-gpu, the handler of a sandbox class, is defined in /etc/containerd/config.toml and gvisorgen did not write it\. Refused`)
			if d := diffTrees(before, h.tree()); d != "" || h.restarts() != restarts {
				t.Fatalf("a refused run changed the node (%d restarts): %s", h.restarts()-restarts, d)
			}
			h.setConfig(orig)

			// a runsc-gpu.toml of someone else's where the class's file goes
			h.write(h.P(runscDir+"/runsc-gpu.toml"), 0o644, "[runsc_config]\nnetwork = \"host\"\n")
			before = h.tree()
			h.mustFail("configure-containerd.sh", env, `ERROR: `+runscDir+`/runsc-gpu.toml, the runsc.toml of the class with handler runsc-gpu, is there and gvisorgen did not write it`)
			if d := diffTrees(before, h.tree()); d != "" || h.restarts() != restarts {
				t.Fatalf("a refused run changed the node (%d restarts): %s", h.restarts()-restarts, d)
			}
			if err := os.Remove(h.P(runscDir + "/runsc-gpu.toml")); err != nil {
				t.Fatal(err)
			}
			before = h.tree()

			for _, c := range []struct{ classes, want string }{
				{"[runsc]\nx = 1", `RUNSC_CLASSES names the handler 'runsc': a class's handler is runsc-<suffix>`},
				{"[runsc-version]", `RUNSC_CLASSES names the handler 'runsc-version'`},
				{"[runsc-Gpu]", `RUNSC_CLASSES names the handler 'runsc-Gpu'`},
				{"[runc]", `RUNSC_CLASSES names the handler 'runc'`},
				{"[runsc-gpu]\n[runsc-gpu]", `RUNSC_CLASSES names the handler runsc-gpu twice`},
				{"platform = \"kvm\"\n[runsc-kvm]", `line before the first \[handler\]: platform = "kvm"`},
				{"[runsc-kvm]\nplatform=kvm", `not a 'key = value' line: platform=kvm`},
				{"[runsc-" + strings.Repeat("a", 51) + "]", `RUNSC_CLASSES names the handler 'runsc-a{51}'`},
			} {
				h.mustFail("configure-containerd.sh", map[string]string{"RUNSC_CLASSES": c.classes}, c.want)
			}
			if d := diffTrees(before, h.tree()); d != "" || h.restarts() != restarts {
				t.Fatalf("refused runs changed the node (%d restarts): %s", h.restarts()-restarts, d)
			}
			h.mustRunRestarts("configure-containerd.sh", env, 1)
			h.assertClasses(ver, "runsc", "runsc-gpu")
		})
	}
}
