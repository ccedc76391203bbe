//go:build nodetest

package node

import (
	"crypto/sha512"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// Issue 33: configure-containerd judges the runsc handler containerd would use by what it runs, never by its name.
// A handler gvisorgen did not write (another runtime type, another shim, a binary option, another ConfigPath), in the
// main config or in an imported drop-in, is refused by default naming the file and the key, with the host tree
// byte-identical and no restart (so the readiness gate's label-node, the next init container, never runs);
// ADOPT_FOREIGN_RUNSC=true adopts it as it is, with a WARNING. gvisorgen's own handler passes on every run
// (TestConfigure, TestImportGlobs).

// foreignHandler: a runsc handler of another origin, as table lines under the runtimes table of a config version.
type foreignHandler struct {
	name  string
	lines string // the handler's keys; "@OPT@" is replaced by the options table header
	key   string // what the refusal must name
}

var foreignHandlers = []foreignHandler{
	// runsc by name, runc by type: every "sandboxed" pod would run unsandboxed
	{"runc-type", "  runtime_type = \"io.containerd.runc.v2\"\n", `runtime_type = "io.containerd.runc.v2" (gvisorgen: "io.containerd.runsc.v1")`},
	// gVisor's shim, but another one than the verified shim in the install dir
	{"other-shim", "  runtime_type = \"/opt/other/containerd-shim-runsc-v1\"\n", `runtime_type = "/opt/other/containerd-shim-runsc-v1"`},
	// gVisor's shim and runsc.toml, plus a binary option (runc's BinaryName, which names the runtime binary)
	{"binary-option", "  runtime_type = \"io.containerd.runsc.v1\"\n@OPT@\n  TypeUrl = \"io.containerd.runsc.v1.options\"\n  ConfigPath = \"/etc/containerd/runsc.toml\"\n  BinaryName = \"/opt/other/runsc\"\n",
		`options.BinaryName = "/opt/other/runsc" (gvisorgen sets no options.BinaryName)`},
	// gVisor, but runsc's options (runsc itself: binary_name, and its flags) from another file
	{"other-config-path", "  runtime_type = \"io.containerd.runsc.v1\"\n@OPT@\n  TypeUrl = \"io.containerd.runsc.v1.options\"\n  ConfigPath = \"/etc/other/runsc.toml\"\n",
		`options.ConfigPath = "/etc/other/runsc.toml" (gvisorgen: "/etc/containerd/runsc.toml")`},
}

// handlerPrefix: the runtimes table a config of this containerd's default version holds.
func handlerPrefix(ver string) string {
	if ver == "24" || ver == "22" { // 2.2+'s default config is version 3
		return `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`
	}
	return `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`
}

func (f foreignHandler) table(ver string) string {
	p := handlerPrefix(ver)
	return "\n[" + p + ".runsc]\n" + strings.ReplaceAll(f.lines, "@OPT@", "["+p+".runsc.options]")
}

// mainWithImports: this containerd's default config, importing conf.d (2.4's default imports it by itself).
func mainWithImports(ver string) string {
	if ver == "24" || ver == "22" {
		return string(defaults[ver]) // 2.2+'s own default imports conf.d
	}
	return strings.Replace(string(defaults[ver]), "imports = []\n", "imports = [\"/etc/containerd/conf.d/*.toml\"]\n", 1)
}

func TestForeignHandler(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "17", "22", "24"} {
		for _, where := range []string{"main", "drop-in"} {
			t.Run(where+"/"+ver, func(t *testing.T) {
				t.Parallel()
				h := newHost(t, ver)
				base := mainWithImports(ver)
				h.setConfig(base)
				h.startContainerd()
				h.mustRun("install-runsc.sh", nil)
				for _, f := range foreignHandlers {
					file := "/etc/containerd/config.toml"
					if where == "main" {
						h.setConfig(base + f.table(ver))
					} else {
						file = "/etc/containerd/conf.d/zz-site.toml"
						// a site drop-in in its node's version (on 2.2.9 a version 2 one beside a version 3 config is
						// mishandled by containerd itself: see dropin.go)
						v := "version = 2\n"
						if ver == "24" || ver == "22" {
							v = "version = 3\n"
						}
						// containerd 1.x merges an import's plugin table over the main one as a whole: a site drop-in
						// that defines runtimes there must define runc too (it does on a working 1.x node)
						if ver != "24" && ver != "22" {
							v += "[" + handlerPrefix(ver) + ".runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
						}
						h.write(h.P(file), 0o644, v+f.table(ver))
					}
					before, restarts := h.tree(), h.restarts()
					h.mustFail("configure-containerd.sh", nil,
						`ERROR: a runsc runtime handler that gvisorgen did not write is defined in `+regexp.QuoteMeta(file)+`: containerd would run it with [^\n]*`+regexp.QuoteMeta(f.key)+`[^\n]*Nothing was changed, containerd was not restarted`)
					if d := diffTrees(before, h.tree()); d != "" || h.restarts() != restarts {
						t.Fatalf("%s: a refused run changed the node (%d restarts):\n%s", f.name, h.restarts()-restarts, d)
					}
					r := h.mustRunRestarts("configure-containerd.sh", map[string]string{"ADOPT_FOREIGN_RUNSC": "true"}, 0)
					assertContains(t, "adopted run", r.Output, "WARNING: adopting the runsc runtime handler defined in "+file+" as it is (ADOPT_FOREIGN_RUNSC=true): containerd would run it with")
					if strings.Contains(h.config(), beginMarker) || h.exists("/etc/containerd/runsc.toml") {
						t.Fatalf("%s: adopting added gvisorgen's block or runsc.toml:\n%s", f.name, h.config())
					}
					h.mustRun("ready.sh", nil)
					h.write(h.P(file), 0o644, map[bool]string{true: base, false: "version = 2\n"}[where == "main"])
				}
				// without the foreign handler, gvisorgen writes its own, and it passes on the next run
				h.mustRunRestarts("configure-containerd.sh", nil, 1)
				h.mustRunRestarts("configure-containerd.sh", nil, 0)
				h.mustRun("ready.sh", nil)
				h.checkReal(true)
			})
		}
	}
}

// TestImportDrift: the applied marker records every file containerd imports; ready.sh drops Ready, naming it, when
// one changes, goes, or a new one appears in an imported folder; the installer's next run judges the handler again
// (a new drop-in that redefines runsc: refused, naming it).
func TestImportDrift(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "17", "22", "24"} {
		t.Run(ver, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, ver)
			h.write(h.P("/etc/containerd/conf.d/gc.toml"), 0o644, dropInGC)
			// containerd loads a dot file as any other (Go's Glob): recorded, and the probe Ready with it (the host
			// shell's glob missed it, and the probe, which lists the folder, then found a new file: never Ready)
			h.write(h.P("/etc/containerd/conf.d/.dot.toml"), 0o644, dropInGC)
			h.setConfig(mainWithImports(ver))
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			applied := h.read("/etc/containerd/config.toml.gvisorgen-applied")
			assertContains(t, "applied marker", applied, "\nfile "+sum512(dropInGC)+" /etc/containerd/conf.d/.dot.toml\n")
			assertContains(t, "applied marker", applied, "\nimport /etc/containerd/conf.d/*.toml\n")
			assertContains(t, "applied marker", applied, "\nfile "+sum512(dropInGC)+" /etc/containerd/conf.d/gc.toml\n")
			h.mustRun("ready.sh", nil)

			late := "/etc/containerd/conf.d/zz-late.toml"
			lateHandler := "version = 2\n[" + handlerPrefix("16") + ".runc]\n  runtime_type = \"io.containerd.runc.v2\"\n" + foreignHandlers[0].table("16")
			if ver == "22" {
				// 2.2 loses the tables of a version 2 drop-in beside its version 3 config (containerd's own doing: it
				// would run no such handler), so the late site file there is in the node's version
				lateHandler = "version = 3\n" + foreignHandlers[0].table(ver)
			}
			h.write(h.P(late), 0o644, lateHandler)
			h.mustFail("ready.sh", nil, `not ready: a new file `+regexp.QuoteMeta(late)+`, which containerd imports \(/etc/containerd/conf.d/\*.toml\), appeared since configure-containerd judged the runsc handler`)
			h.mustFail("configure-containerd.sh", nil, `a runsc runtime handler that gvisorgen did not write is defined in `+regexp.QuoteMeta(late))
			h.write(h.P(late), 0o644, dropInGC)
			h.mustFail("ready.sh", nil, `not ready: a new file `+regexp.QuoteMeta(late))
			h.mustRunRestarts("configure-containerd.sh", nil, 0) // the config did not change: no restart
			h.mustRun("ready.sh", nil)

			h.write(h.P("/etc/containerd/conf.d/gc.toml"), 0o644, dropInGC+"  deletion_threshold = 1\n")
			h.mustFail("ready.sh", nil, `not ready: /etc/containerd/conf.d/gc.toml, which containerd imports, changed since`)
			h.mustRun("configure-containerd.sh", nil)
			h.mustRun("ready.sh", nil)
			if out, err := h.hostCmd("rm", "/etc/containerd/conf.d/gc.toml"); err != nil {
				t.Fatal(err, out)
			}
			h.mustFail("ready.sh", nil, `not ready: /etc/containerd/conf.d/gc.toml, which containerd imports, is gone since`)
		})
	}
}

func sum512(s string) string { b := sha512.Sum512([]byte(s)); return hex.EncodeToString(b[:]) }

// TestShadowedOnPath: with the install dir on PATH, the handler names the shim (and runsc.toml no runsc) by name, so
// a copy earlier on the host's PATH would run instead of the verified one: refused, naming it, nothing changed.
func TestShadowedOnPath(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"containerd-shim-runsc-v1", "runsc"} {
		t.Run(b, func(t *testing.T) {
			h := newHost(t, "24")
			h.setConfig(def24())
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			// the fake host's /usr/local/sbin comes before /usr/local/bin (the install dir) on HOST_PATH
			h.write(h.Dir+"/fakebin/"+b, 0o755, "#!/bin/sh\nexit 0\n")
			if b == "runsc" {
				// runsc.toml names the release's runsc by its path: another runsc on PATH is never run
				h.mustRun("configure-containerd.sh", nil)
				assertContains(t, "runsc.toml", h.read("/etc/containerd/runsc.toml"), `binary_name = "/usr/local/bin/gvisorgen-runsc"`)
				return
			}
			before, restarts := h.tree(), h.restarts()
			h.mustFail("configure-containerd.sh", nil, `on the host's PATH \([^)]*\) `+b+` is /usr/local/sbin/`+b+`, not the verified /usr/local/bin/`+b+`: containerd would run that one`)
			if d := diffTrees(before, h.tree()); d != "" || h.restarts() != restarts {
				t.Fatalf("a refused run changed the node:\n%s", d)
			}
		})
	}
}
