//go:build nodetest

package node

import (
	"regexp"
	"strings"
	"testing"
)

// The drop-in path (CONTAINERD_CONFIG_MODE=auto on a containerd 2.x whose config imports a folder under its config
// folder): the installer writes one file, conf.d/gvisorgen-runsc.toml, leaves config.toml byte for byte as it was, and
// keeps every guarantee of the block: validated by the node's containerd first, one restart on change and none on a
// re-run, CRI asked after the restart (a drop-in the running containerd does not load is rolled back), exact restore on
// uninstall. Each case runs on every containerd 2.x of the matrix (dropInVersions), with that containerd's own
// `config default`.

const dropIn = "/etc/containerd/conf.d/gvisorgen-runsc.toml"

// dropInVersions: the containerd 2.x releases of the node matrix; their default configs import conf.d.
func dropInVersions() []string { return []string{"22", "24"} }

// noImports is this containerd's default config without its conf.d import.
func noImports(ver string) string {
	return strings.Replace(realDefault(ver), "imports = ['/etc/containerd/conf.d/*.toml']\n", "imports = []\n", 1)
}

// realDefault is `containerd config default` as this containerd prints it (2.2+: it imports /etc/containerd/conf.d).
func realDefault(ver string) string { return string(defaults[ver]) }

// cfgV2SystemdImports: a version 2 config (AKS-, EKS-style) with settings of its own under the CRI plugin and conf.d
// imported: the drop-in must use its table name, and keep runc's SystemdCgroup and the sandbox image.
const cfgV2SystemdImports = `version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
`

// installedHost: a host whose containerd runs on cfg (with the host's crictl when crictl is set), after before (files or
// knobs the running containerd must see from its start), with gVisor installed by install-runsc.
func installedHost(t *testing.T, ver, cfg string, crictl bool, before ...func(h *Host)) *Host {
	t.Helper()
	h := newHost(t, ver)
	if crictl {
		h.link(crictlBin, h.Dir+"/fakebin/crictl")
	}
	h.setConfig(cfg)
	for _, f := range before {
		f(h)
	}
	h.startContainerd()
	h.mustRun("install-runsc.sh", nil)
	return h
}

// assertDropIn: the node holds gvisorgen's drop-in with the table the config's version names, no version line, and
// the applied marker says so; config.toml is exactly orig.
func (h *Host) assertDropIn(orig, table string) {
	h.t.Helper()
	if got := h.config(); got != orig {
		h.t.Fatalf("config.toml changed in drop-in mode:\n%s\nwant:\n%s", got, orig)
	}
	d := h.read(dropIn)
	if !strings.HasPrefix(d, "# Managed by gvisorgen") || !strings.Contains(d, "\n"+table+"\n") ||
		regexp.MustCompile(`(?m)^version`).MatchString(d) {
		h.t.Fatalf("the drop-in is not gvisorgen's, lacks %s, or has a version line:\n%s", table, d)
	}
	applied := h.read("/etc/containerd/config.toml.gvisorgen-applied")
	assertContains(h.t, "applied marker", applied, "\nmode dropin "+dropIn+"\n")
	assertContains(h.t, "applied marker", applied, "\ndropin "+sum512(d)+" "+dropIn+"\n")
}

func TestDropIn(t *testing.T) {
	t.Parallel()
	for _, ver := range dropInVersions() {
		// The default config: install, re-run, uninstall.
		t.Run(ver+"/default-lifecycle", func(t *testing.T) {
			t.Parallel()
			orig := realDefault(ver)
			h := installedHost(t, ver, orig, true)
			r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
			assertContains(t, "output", r.Output, "drop-in: /etc/containerd/config.toml imports "+dropIn)
			assertContains(t, "output", r.Output, "lists the runsc handler")
			h.assertDropIn(orig, tblV3)
			if h.exists("/etc/containerd/config.toml.gvisorgen-backup") {
				t.Fatalf("a backup of a config gvisorgen did not change")
			}
			d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
			if d.Code != 0 || !d.HasRuntime("runsc") || !d.HasRuntime("runc") {
				t.Fatalf("containerd's dump of the node's config: runsc and runc expected:\n%s%s", d.Stdout, d.Stderr)
			}
			h.mustRun("ready.sh", nil)
			before := h.tree()
			h.mustRunRestarts("configure-containerd.sh", nil, 0)
			if d := diffTrees(before, h.tree()); d != "" {
				t.Fatalf("a re-run changed the node: %s", d)
			}
			h.mustRun("ready.sh", nil)
			// a hand edit of the drop-in: the probe notices, the next run rewrites it (one restart)
			h.write(h.P(dropIn), 0o644, h.read(dropIn)+"# edited\n")
			h.mustFail("ready.sh", nil, `not ready: gvisorgen's drop-in `+dropIn+` changed since`)
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			h.mustRun("ready.sh", nil)

			un := map[string]string{"GVISOR_MODE": "uninstall"}
			r = h.mustRunRestarts("uninstall.sh", un, 1)
			assertContains(t, "output", r.Output, "removed gvisorgen's drop-in "+dropIn)
			if h.exists(dropIn) || h.config() != orig || !h.exists("/etc/containerd/conf.d") {
				t.Fatalf("after uninstall: drop-in left, config changed, or conf.d (not gvisorgen's) removed:\n%s", h.config())
			}
			h.mustRun("ready.sh", un)
			h.mustRunRestarts("uninstall.sh", un, 0)
		})

		// A version 2 config with settings of its own: the drop-in takes its table name and changes nothing else.
		t.Run(ver+"/v2-root", func(t *testing.T) {
			t.Parallel()
			h := installedHost(t, ver, cfgV2SystemdImports, false)
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			h.assertDropIn(cfgV2SystemdImports, tblV2)
			d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
			if !d.HasRuntime("runsc") || !strings.Contains(d.Stdout, "SystemdCgroup = true") || !strings.Contains(d.Stdout, "pause:3.10") {
				t.Fatalf("the merged config lost the config's own CRI settings or lacks runsc:\n%s", d.Stdout)
			}
		})

		// conf.d already holds other files, and two patterns cover it: those files stay as they are, and containerd
		// still loads them (one each).
		t.Run(ver+"/busy-conf.d-covered-twice", func(t *testing.T) {
			t.Parallel()
			orig := strings.Replace(realDefault(ver), "imports = ['/etc/containerd/conf.d/*.toml']",
				"imports = ['/etc/containerd/conf.d/*.toml', 'conf.d/*.toml', '/etc/containerd/conf.d/zz-*.toml']", 1)
			if orig == realDefault(ver) {
				t.Fatal("the default config has no conf.d import to extend")
			}
			site := "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
			h := installedHost(t, ver, orig, false, func(h *Host) {
				h.write(h.P("/etc/containerd/conf.d/10-gc.toml"), 0o644, dropInGC)
				h.write(h.P("/etc/containerd/conf.d/zz-site.toml"), 0o644, site)
			})
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			h.assertDropIn(orig, tblV3)
			if h.read("/etc/containerd/conf.d/10-gc.toml") != dropInGC || h.read("/etc/containerd/conf.d/zz-site.toml") != site {
				t.Fatal("the other files of conf.d changed")
			}
			d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
			if !d.HasRuntime("runsc") || !strings.Contains(d.Stdout, "SystemdCgroup = true") || !strings.Contains(d.Stdout, "pause_threshold = 0.03") {
				t.Fatalf("the merged config lacks runsc or the other drop-ins:\n%s", d.Stdout)
			}
			h.mustRunRestarts("configure-containerd.sh", nil, 0)
			h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, 1)
			if h.exists(dropIn) || h.config() != orig || h.read("/etc/containerd/conf.d/zz-site.toml") != site {
				t.Fatal("uninstall did not restore the node exactly")
			}
		})

		// A node installed by the block in place (an older gvisorgen, or CONTAINERD_CONFIG_MODE=block) moves to the
		// drop-in on the next run: the block goes (the config is the original again), the drop-in comes, one restart.
		// And back.
		t.Run(ver+"/block-to-dropin-and-back", func(t *testing.T) {
			t.Parallel()
			orig := realDefault(ver)
			h := installedHost(t, ver, orig, true)
			block := map[string]string{"CONTAINERD_CONFIG_MODE": "block"}
			r := h.mustRunRestarts("configure-containerd.sh", block, 1)
			assertContains(t, "output", r.Output, "in place: CONTAINERD_CONFIG_MODE is block")
			if countLines(h.config(), beginMarker) != 1 || h.exists(dropIn) {
				t.Fatalf("block mode: no block, or a drop-in:\n%s", h.config())
			}
			assertContains(t, "applied marker", h.read("/etc/containerd/config.toml.gvisorgen-applied"), "\nmode block /etc/containerd/config.toml\n")
			h.mustRun("ready.sh", nil)

			r = h.mustRunRestarts("configure-containerd.sh", nil, 1)
			assertContains(t, "output", r.Output, "but for the block an earlier run of gvisorgen wrote there, which goes")
			h.assertDropIn(orig, tblV3)
			h.mustRun("ready.sh", nil)
			h.mustRunRestarts("configure-containerd.sh", nil, 0)

			r = h.mustRunRestarts("configure-containerd.sh", block, 1)
			assertContains(t, "output", r.Output, "removed gvisorgen's drop-in "+dropIn)
			if countLines(h.config(), beginMarker) != 1 || h.exists(dropIn) {
				t.Fatalf("back to block mode: no block, or the drop-in stayed:\n%s", h.config())
			}
			h.mustRun("ready.sh", nil)
			h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, 1)
			if h.config() != orig {
				t.Fatalf("uninstall did not give the original config back:\n%s", h.config())
			}
		})

		// A node installed in place (its config imported nothing) whose config then imports conf.d (an upgrade to a
		// containerd 2.2+ default config, or a bootstrapper's change): the next run moves to the drop-in, the block goes
		// and the config is exactly what was written, in one restart.
		t.Run(ver+"/upgraded-node-moves-to-dropin", func(t *testing.T) {
			t.Parallel()
			h := installedHost(t, ver, noImports(ver), true)
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			withBlock := h.config()
			if countLines(withBlock, beginMarker) != 1 || h.exists(dropIn) {
				t.Fatalf("a config importing nothing: want the block:\n%s", withBlock)
			}
			upgraded := strings.Replace(withBlock, "imports = []\n", "imports = ['/etc/containerd/conf.d/*.toml']\n", 1)
			h.setConfig(upgraded)
			h.mustFail("ready.sh", nil, "changed since configure-containerd validated it")
			r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
			assertContains(t, "output", r.Output, "but for the block an earlier run of gvisorgen wrote there, which goes")
			assertContains(t, "output", r.Output, "lists the runsc handler")
			h.assertDropIn(realDefault(ver), tblV3)
			h.mustRun("ready.sh", nil)
			h.mustRunRestarts("configure-containerd.sh", nil, 0)
		})

		// The unit runs containerd with another file, which imports no conf.d: the drop-in is not loaded. Asked
		// after the restart, CRI lists no runsc: the drop-in is taken back and containerd restarted, nothing left.
		t.Run(ver+"/not-loaded-rolled-back", func(t *testing.T) {
			t.Parallel()
			orig := realDefault(ver)
			h := installedHost(t, ver, orig, true, func(h *Host) {
				h.write(h.P("/etc/containerd/unit.toml"), 0o644, noImports(ver))
				h.knob("config", "/etc/containerd/unit.toml")
			})
			r0 := h.restarts()
			h.mustFail("configure-containerd.sh", nil, `the running containerd does not load gvisorgen's drop-in `+dropIn+` .*rolled back \(drop-in removed, containerd restarted\)`)
			if got := h.restarts() - r0; got != 2 {
				t.Fatalf("want 2 restarts (the change, the rollback), got %d", got)
			}
			if h.exists(dropIn) || h.config() != orig || h.exists("/etc/containerd/config.toml.gvisorgen-applied") {
				t.Fatal("the rollback left the drop-in, changed the config, or wrote the applied marker")
			}
			h.mustFail("ready.sh", nil, ".")
		})

		// A file of gvisorgen's name that gvisorgen did not write is never overwritten.
		t.Run(ver+"/foreign-file-at-the-name", func(t *testing.T) {
			t.Parallel()
			orig := realDefault(ver)
			foreign := "# site settings\n[plugins.'io.containerd.gc.v1.scheduler']\n  pause_threshold = 0.02\n"
			h := installedHost(t, ver, orig, false, func(h *Host) { h.write(h.P(dropIn), 0o644, foreign) })
			r0 := h.restarts()
			h.mustFail("configure-containerd.sh", nil, regexp.QuoteMeta(dropIn)+`, where gvisorgen writes its drop-in, is there and gvisorgen did not write it`)
			if h.restarts() != r0 || h.read(dropIn) != foreign || h.config() != orig {
				t.Fatal("the refusal changed something")
			}
		})
	}

	// containerd 1.x replaces a plugin's whole table with an imported file's: the block in place, even where the
	// config imports conf.d.
	for _, ver := range []string{"16", "17"} {
		t.Run(ver+"/1.x-imports-block-in-place", func(t *testing.T) {
			t.Parallel()
			h := installedHost(t, ver, mainWithImports(ver), false)
			r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
			assertContains(t, "output", r.Output, "in place: containerd 1.x replaces a plugin's whole table with an imported file's")
			if countLines(h.config(), beginMarker) != 1 || h.exists(dropIn) {
				t.Fatalf("1.x: want the block and no drop-in:\n%s", h.config())
			}
		})
	}

	// The applied marker names where the drop-in went; uninstall removes only a plain path in containerd's config
	// folder: a marker edited to point elsewhere is refused, nothing removed, no restart.
	t.Run("forged-marker-refused", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", realDefault("24"), false)
		h.mustRunRestarts("configure-containerd.sh", nil, 1)
		marker := "/etc/containerd/config.toml.gvisorgen-applied"
		forged := strings.Replace(h.read(marker), "\nmode dropin "+dropIn+"\n", "\nmode dropin /etc/containerd/conf.d/../../../usr/local/bin/gvisorgen-runsc.toml\n", 1)
		h.write(h.P(marker), 0o644, forged)
		r0 := h.restarts()
		h.mustFail("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, `names '/etc/containerd/conf.d/\.\./\.\./\.\./usr/local/bin/gvisorgen-runsc.toml' as gvisorgen's drop-in, which is no plain path`)
		if h.restarts() != r0 || !h.exists(dropIn) || h.read(marker) != forged {
			t.Fatal("the refusal changed something")
		}
	})

	// CONTAINERD_CONFIG_MODE=dropin (k3s, RKE2: the config is rendered at every start) on a node where nothing is
	// imported: refused, nothing changed, no restart; an admin's template is named.
	t.Run("dropin-required-refused", func(t *testing.T) {
		t.Parallel()
		orig := def24()
		h := installedHost(t, "24", orig, false, func(h *Host) {
			h.write(h.P("/etc/containerd/config-v3.toml.tmpl"), 0o644, "{{ template \"base\" . }}\n")
		})
		r0 := h.restarts()
		h.mustFail("configure-containerd.sh", map[string]string{"CONTAINERD_CONFIG_MODE": "dropin"},
			`no drop-in is possible on this node: /etc/containerd/config\.toml imports no folder .*CONTAINERD_CONFIG_MODE is dropin.*the template the admin wrote \(/etc/containerd/config-v3\.toml\.tmpl\).*Nothing was changed`)
		if h.restarts() != r0 || h.config() != orig || h.exists(dropIn) {
			t.Fatal("the refusal changed something")
		}
	})
}
