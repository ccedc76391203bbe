//go:build nodetest

package node

import (
	"os"
	"strings"
	"testing"
)

// The default runsc.toml sits in a subfolder of containerd's config folder, out of reach of a single-level glob
// such as imports = ["/etc/containerd/*.toml"].
const runscSub = "/etc/containerd/runsc/runsc.toml"

// TestRunscConfigSubfolder: with runsc.toml in its subfolder (created by the installer), a config importing
// /etc/containerd/*.toml does not load it (no overlap note), runs are idempotent, and uninstall leaves the config
// byte-identical and removes runsc.toml and the folder it created — and only that: a folder that was there before
// (the user's, empty) stays.
func TestRunscConfigSubfolder(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "24"} {
		for _, usersDir := range []bool{false, true} {
			name := ver + "/created-by-gvisorgen"
			if usersDir {
				name = ver + "/users-folder"
			}
			t.Run(name, func(t *testing.T) {
				// as in TestImportGlobs: a version 2 file, read by both
				orig := "version = 2\nimports = [\"/etc/containerd/*.toml\"]\n\n" + `[plugins."io.containerd.grpc.v1.cri".containerd]` + "\n  default_runtime_name = \"runc\"\n"
				// the block in place (2.4 would take a drop-in in /etc/containerd: dropin_test.go)
				env := map[string]string{"RUNSC_CONFIG": runscSub, "CONTAINERD_CONFIG_MODE": "block"}
				h := newHost(t, ver)
				h.setConfig(orig)
				if usersDir {
					if err := os.Mkdir(h.P("/etc/containerd/runsc"), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				h.startContainerd()
				h.mustRun("install-runsc.sh", env)
				r := h.mustRunRestarts("configure-containerd.sh", env, 1)
				if strings.Contains(r.Output, "also matches") {
					t.Fatalf("runsc.toml is still reached by the imports glob: %s", r)
				}
				cfg := h.config()
				assertContains(t, "config", cfg, `ConfigPath = "`+runscSub+`"`)
				rt := h.read(runscSub)
				h.checkReal(true)
				h.mustRunRestarts("configure-containerd.sh", env, 0)
				if h.config() != cfg || h.read(runscSub) != rt {
					t.Fatalf("the second run changed a file")
				}
				h.mustRun("ready.sh", env)
				h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall", "RUNSC_CONFIG": runscSub}, 1)
				if h.config() != orig {
					t.Fatalf("config not restored")
				}
				switch {
				case !usersDir && h.exists("/etc/containerd/runsc"):
					t.Fatalf("the runsc folder gvisorgen created is left")
				case usersDir && !h.exists("/etc/containerd/runsc"):
					t.Fatalf("the user's runsc folder was removed")
				case usersDir && h.exists("/etc/containerd/runsc/.gvisorgen-created"):
					t.Fatalf("gvisorgen marked a folder it did not create")
				}
			})
		}
	}
}

// TestRunscConfigMoves: a node installed by an older gvisorgen has runsc.toml at /etc/containerd/runsc.toml, named in
// its managed block. The run with the new path writes the new file, points the block at it (one restart), and
// removes the old file only when it is gvisorgen's own as recorded (its managed header and the digest in the applied
// marker); a file edited since is left in place. The next run is byte-identical with 0 restarts.
func TestRunscConfigMoves(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "24"} {
		for _, edited := range []bool{false, true} {
			name := ver + "/gvisorgens-own"
			if edited {
				name = ver + "/edited-since"
			}
			t.Run(name, func(t *testing.T) {
				h, _ := installedAtOldPath(t, ver)
				old := oldRunscPath
				if edited {
					h.write(h.P(old), 0o644, h.read(old)+"debug = true\n")
				}
				oldBytes := h.read(old)
				// the block in place (2.4 would take a drop-in in /etc/containerd: dropin_test.go)
				env := map[string]string{"RUNSC_CONFIG": runscSub, "CONTAINERD_CONFIG_MODE": "block"}
				r := h.mustRunRestarts("configure-containerd.sh", env, 1)
				cfg := h.config()
				assertContains(t, "config", cfg, `ConfigPath = "`+runscSub+`"`)
				if strings.Contains(cfg, `ConfigPath = "`+old+`"`) {
					t.Fatalf("the block still names %s:\n%s", old, cfg)
				}
				if edited {
					if !h.exists(old) || h.read(old) != oldBytes {
						t.Fatalf("an edited %s was removed or changed: %s", old, r)
					}
					assertContains(t, "output", r.Output, "left in place")
				} else if h.exists(old) {
					t.Fatalf("gvisorgen's old %s is left: %s", old, r)
				}
				h.checkReal(true)
				h.mustRunRestarts("configure-containerd.sh", env, 0)
				if h.config() != cfg {
					t.Fatalf("the third run changed the config")
				}
				h.mustRun("ready.sh", env)
			})
		}
	}
}

// TestRunscConfigMovedUninstall: a node installed by an older gvisorgen (runsc.toml at /etc/containerd/runsc.toml)
// goes straight to uninstall with the new default path: the old file, gvisorgen's own as recorded, goes too, and the
// config is restored byte for byte.
func TestRunscConfigMovedUninstall(t *testing.T) {
	t.Parallel()
	for _, ver := range []string{"16", "24"} {
		t.Run(ver, func(t *testing.T) {
			h, orig := installedAtOldPath(t, ver)
			old := oldRunscPath
			if !h.exists(old) {
				t.Fatalf("%s was not written", old)
			}
			r := h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall", "RUNSC_CONFIG": runscSub}, 1)
			if h.exists(old) {
				t.Fatalf("the old %s is left: %s", old, r)
			}
			assertContains(t, "output", r.Output, "the runsc.toml of the previous install")
			if h.config() != orig {
				t.Fatalf("config not restored")
			}
		})
	}
}

// The path of runsc.toml before it moved to its subfolder (still the node tests' RUNSC_CONFIG).
const oldRunscPath = "/etc/containerd/runsc.toml"

// installedAtOldPath: a node as an older gvisorgen left it, runsc.toml at oldRunscPath; returns it and its original
// config.
func installedAtOldPath(t *testing.T, ver string) (*Host, string) {
	orig := defFor(ver)
	h := newHost(t, ver)
	h.setConfig(orig)
	h.startContainerd()
	h.mustRun("install-runsc.sh", nil)
	h.mustRunRestarts("configure-containerd.sh", nil, 1)
	return h, orig
}
