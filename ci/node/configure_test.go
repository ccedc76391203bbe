//go:build nodetest

package node

import (
	"os"
	"strings"
	"testing"
)

const (
	tblV1 = `[plugins.cri.containerd.runtimes.runsc]`
	tblV2 = `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]`
	tblV3 = `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runsc]`

	cfgV1 = `[plugins.cri]
  sandbox_image = "registry.k8s.io/pause:3.6"
[plugins.cri.containerd]
  snapshotter = "overlayfs"
  [plugins.cri.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
`
	cfgV1NoRuntimes = `[plugins.cri]
  sandbox_image = "registry.k8s.io/pause:3.6"
`
	cfgV2NoRuntimes = `version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
`
	cfgV3NoRuntimes = `version = 3

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
`
	cfgV2DottedRunsc = `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  runtimes.runc.runtime_type = "io.containerd.runc.v2"
  runtimes.runsc.runtime_type = "io.containerd.runsc.v1"
`
	cfgV3DottedRunsc = `version = 3
[plugins."io.containerd.cri.v1.runtime".containerd]
  runtimes.runsc.runtime_type = "io.containerd.runsc.v1"
  runtimes.runsc.options.TypeUrl = "io.containerd.runsc.v1.options"
`
	cfgV2Imports = `version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
`
	dropInGC = `version = 2
[plugins."io.containerd.gc.v1.scheduler"]
  pause_threshold = 0.03
`
	dropInCRI16 = `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
`
	dropInRunsc24 = `version = 4
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
  runtime_type = 'io.containerd.runsc.v1'
`
	cfgV2InlineRuntimes = `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  runtimes = { runc = { runtime_type = "io.containerd.runc.v2" } }
`
)

func def16() string { return string(defaults["16"]) }

// def24 is containerd 2.4's default config as a node whose config imports nothing has it (written by a bootstrapper, or
// before containerd 2.2 added the conf.d import): the cases here run the block in place on 2.4 too. dropin_test.go runs
// the default as containerd prints it, which imports conf.d, and so the drop-in.
func def24() string {
	return strings.Replace(string(defaults["24"]), "imports = ['/etc/containerd/conf.d/*.toml']\n", "imports = []\n", 1)
}
func def24v3() string {
	return strings.Replace(def24(), "version = 4", "version = 3", 1)
}

// configureCase: one starting config on one host containerd; the installer must succeed (wantTable != "" means
// gvisorgen's block with that table; handwritten means nothing is added) or fail leaving everything untouched.
type configureCase struct {
	name        string
	ctrd        string
	config      func() string // nil: no config file on the host
	dropIns     map[string]string
	env         map[string]string
	wantTable   string
	dropIn      bool // gvisorgen's drop-in in conf.d with wantTable, the config as it was
	handwritten bool
	wantFail    string // regexp of the failure message
	extra       func(t *testing.T, h *Host)
}

var adopt = map[string]string{"ADOPT_FOREIGN_RUNSC": "true"}

func str(s string) func() string { return func() string { return s } }

var configureCases = []configureCase{
	{name: "v1-no-version/1.6", ctrd: "16", config: str(cfgV1), wantTable: tblV1},
	{name: "v1-no-runtimes-keeps-runc/1.6", ctrd: "16", config: str(cfgV1NoRuntimes), wantTable: tblV1,
		extra: func(t *testing.T, h *Host) {
			assertContains(t, "config", h.config(), "[plugins.cri.containerd.runtimes.runc]")
		}},
	{name: "v2-default/1.6", ctrd: "16", config: def16, wantTable: tblV2},
	{name: "v2-default-1.6-file/2.4", ctrd: "24", config: def16, wantTable: tblV2},
	{name: "v2-no-runtimes-keeps-runc/1.6", ctrd: "16", config: str(cfgV2NoRuntimes), wantTable: tblV2,
		extra: func(t *testing.T, h *Host) {
			assertContains(t, "config", h.config(), `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`)
		}},
	{name: "v3-default/2.4", ctrd: "24", config: def24v3, wantTable: tblV3},
	{name: "v3-no-runtimes/2.4", ctrd: "24", config: str(cfgV3NoRuntimes), wantTable: tblV3},
	{name: "v4-default/2.4", ctrd: "24", config: def24, wantTable: tblV3},
	{name: "imports-dropin-gc/1.6", ctrd: "16", config: str(cfgV2Imports), dropIns: map[string]string{"gc.toml": dropInGC}, wantTable: tblV2},
	{name: "imports-dropin-gc/2.4", ctrd: "24", config: str(cfgV2Imports), dropIns: map[string]string{"gc.toml": dropInGC}, wantTable: tblV2, dropIn: true},
	{name: "missing-config/1.6", ctrd: "16", config: nil, wantTable: tblV2,
		extra: func(t *testing.T, h *Host) {
			assertContains(t, "config", h.config(), "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]")
		}},
	// 2.4's default imports conf.d: the default as config.toml (containerd loads no import without one) and the drop-in
	{name: "missing-config/2.4", ctrd: "24", config: nil, wantTable: tblV3, dropIn: true,
		extra: func(t *testing.T, h *Host) {
			if h.config() != string(defaults["24"]) {
				t.Fatalf("config.toml is not containerd's own default:\n%s", h.config())
			}
		}},
	// containerd 2.2.9 (the first release whose default config imports conf.d; k3s's and RKE2's 2026 line): in place
	// with its default minus the import, a version 2 file, and the drop-in with the import or without a config
	{name: "v3-default/2.2", ctrd: "22", config: func() string { return noImports("22") }, wantTable: tblV3},
	{name: "v2-default-1.6-file/2.2", ctrd: "22", config: def16, wantTable: tblV2},
	{name: "v3-default-imports/2.2", ctrd: "22", config: func() string { return realDefault("22") }, wantTable: tblV3, dropIn: true},
	{name: "imports-dropin-gc/2.2", ctrd: "22", config: str(cfgV2Imports), dropIns: map[string]string{"gc.toml": dropInGC}, wantTable: tblV2, dropIn: true},
	{name: "missing-config/2.2", ctrd: "22", config: nil, wantTable: tblV3, dropIn: true,
		extra: func(t *testing.T, h *Host) {
			if h.config() != string(defaults["22"]) {
				t.Fatalf("config.toml is not containerd's own default:\n%s", h.config())
			}
		}},
	{name: "install-dir-off-path/2.2-dropin", ctrd: "22", config: func() string { return realDefault("22") }, wantTable: tblV3, dropIn: true,
		env: map[string]string{"INSTALL_DIR": "/home/kubernetes/bin", "INSTALL_DIR_ON_PATH": "false"},
		extra: func(t *testing.T, h *Host) {
			assertContains(t, "drop-in", h.read(dropIn), `runtime_path = "/home/kubernetes/bin/containerd-shim-runsc-v1"`)
			assertContains(t, "runsc.toml", h.read("/etc/containerd/runsc.toml"), `binary_name = "/home/kubernetes/bin/gvisorgen-runsc"`)
		}},
	{name: "install-dir-off-path/1.6", ctrd: "16", config: def16, wantTable: tblV2,
		env: map[string]string{"INSTALL_DIR": "/home/kubernetes/bin", "INSTALL_DIR_ON_PATH": "false"}, extra: offPathChecks},
	{name: "install-dir-off-path/2.4", ctrd: "24", config: def24, wantTable: tblV3,
		env: map[string]string{"INSTALL_DIR": "/home/kubernetes/bin", "INSTALL_DIR_ON_PATH": "false"}, extra: offPathChecks},
	// a runsc runtime written by hand, in every spelling, is adopted when the user says so (refused by default:
	// handler_test.go)
	{name: "handwritten-double-quoted/1.6", ctrd: "16", handwritten: true, env: adopt,
		config: func() string { return def16() + "\n" + tblV2 + "\n  runtime_type = \"io.containerd.runsc.v1\"\n" }},
	{name: "handwritten-single-quoted/1.6", ctrd: "16", handwritten: true, env: adopt,
		config: func() string {
			return def16() + "\n[plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.runsc]\n  runtime_type = 'io.containerd.runsc.v1'\n"
		}},
	{name: "handwritten-dotted-keys/1.6", ctrd: "16", handwritten: true, env: adopt, config: str(cfgV2DottedRunsc)},
	{name: "handwritten-single-quoted/2.4", ctrd: "24", handwritten: true, env: adopt,
		config: func() string {
			return def24() + "\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]\n  runtime_type = 'io.containerd.runsc.v1'\n"
		}},
	{name: "handwritten-dotted-keys/2.4", ctrd: "24", handwritten: true, env: adopt, config: str(cfgV3DottedRunsc)},
	{name: "handwritten-in-imports-dropin/2.4", ctrd: "24", handwritten: true, env: adopt, config: func() string { return string(defaults["24"]) }, dropIns: map[string]string{"runsc.toml": dropInRunsc24}},
	// refusals: the config stays byte-identical and containerd is not restarted
	{name: "version-5-refused/2.4", ctrd: "24", config: func() string { return strings.Replace(def24(), "version = 4", "version = 5", 1) },
		wantFail: `config version 5; this installer knows versions up to 4`},
	{name: "already-rejected-config/1.6", ctrd: "16", config: str("version = 2\n[plugins\n"), wantFail: `config on disk is already broken: the host's containerd rejects`},
	{name: "validation-fails-inline-runtimes/1.6", ctrd: "16", config: str(cfgV2InlineRuntimes), wantFail: `fails validation.*untouched`},
	{name: "validation-fails-dropin-replaces-cri/1.6", ctrd: "16", config: str(cfgV2Imports),
		dropIns: map[string]string{"cri.toml": dropInCRI16}, wantFail: `ignores the runsc table`},
	{name: "v4-file-on-1.6-refused", ctrd: "16", config: def24, wantFail: `ignores the runsc table`},
}

func offPathChecks(t *testing.T, h *Host) {
	assertContains(t, "config", h.config(), `runtime_path = "/home/kubernetes/bin/containerd-shim-runsc-v1"`)
	if h.CtrdName == "16" || fileVersion(h.config()) <= 2 {
		// 1.6 ignores runtime_path when it starts a sandbox's shim (seen in ci/node/e2e.sh): absolute runtime_type,
		// also written on 2.x into a version 1 or 2 file, which 1.x reads too
		assertContains(t, "config", h.config(), `runtime_type = "/home/kubernetes/bin/containerd-shim-runsc-v1"`)
	} else {
		assertContains(t, "config", h.config(), `runtime_type = "io.containerd.runsc.v1"`)
	}
	assertContains(t, "runsc.toml", h.read("/etc/containerd/runsc.toml"), `binary_name = "/home/kubernetes/bin/gvisorgen-runsc"`)
	for _, f := range []string{"gvisor-releases/" + tagBin + "/runsc", "containerd-shim-runsc-v1"} {
		if !h.exists("/home/kubernetes/bin/" + f) {
			t.Fatalf("%s not installed in /home/kubernetes/bin", f)
		}
		if h.exists("/usr/local/bin/" + f) {
			t.Fatalf("%s installed in /usr/local/bin too", f)
		}
	}
	// the effective config of the real containerd carries the shim path
	d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
	if !strings.Contains(d.Stdout, "/home/kubernetes/bin/containerd-shim-runsc-v1") {
		t.Fatalf("dump has no runtime_path:\n%s", d.Stdout)
	}
}

func TestConfigure(t *testing.T) {
	t.Parallel()
	for _, c := range configureCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, c.ctrd)
			for k, v := range c.env {
				h.Env[k] = v
			}
			for n, s := range c.dropIns {
				h.write(h.P("/etc/containerd/conf.d/"+n), 0o644, s)
			}
			orig := ""
			if c.config != nil {
				orig = c.config()
				h.setConfig(orig)
			}
			if c.wantFail == "" {
				h.startContainerd() // the host's containerd runs before the installer
			} else {
				// as on a real node, containerd runs when it can (a config it rejects keeps it down)
				_, _ = h.hostCmd("systemctl", "start", "containerd")
			}
			before := h.restarts()
			if c.wantFail != "" {
				h.mustFail("configure-containerd.sh", nil, c.wantFail)
				if got := h.config(); got != orig {
					t.Fatalf("config changed on failure:\n%s", got)
				}
				if h.restarts() != before {
					t.Fatalf("containerd restarted on a refused config")
				}
				if h.exists("/etc/containerd/config.toml.gvisorgen-check") {
					t.Fatalf("scratch candidate left behind")
				}
				return
			}
			h.mustRun("install-runsc.sh", nil)
			h.mustRun("configure-containerd.sh", nil)
			cfg := h.config()
			if c.handwritten {
				if cfg != orig {
					t.Fatalf("hand-written runsc config was changed:\n%s", cfg)
				}
				if strings.Contains(cfg, beginMarker) {
					t.Fatalf("block added next to a hand-written runsc table")
				}
				if h.restarts() != before {
					t.Fatalf("containerd restarted although nothing changed")
				}
			} else if c.dropIn {
				if c.config != nil {
					h.assertDropIn(orig, c.wantTable)
				}
				if h.restarts() != before+1 {
					t.Fatalf("want exactly one containerd restart, got %d", h.restarts()-before)
				}
				if h.exists("/etc/containerd/config.toml.gvisorgen-backup") {
					t.Fatalf("a backup of a config gvisorgen did not change")
				}
			} else {
				if n := countLines(cfg, beginMarker); n != 1 || countLines(cfg, endMarker) != 1 {
					t.Fatalf("want one managed block, got %d:\n%s", n, cfg)
				}
				if n := countLines(cfg, c.wantTable); n != 1 {
					t.Fatalf("want table %s once, got %d:\n%s", c.wantTable, n, cfg)
				}
				if c.config != nil && !strings.HasPrefix(cfg, strings.TrimRight(orig, "\n")) {
					t.Fatalf("the original config is not kept as is before the block:\n%s", cfg)
				}
				if h.restarts() != before+1 {
					t.Fatalf("want exactly one containerd restart, got %d", h.restarts()-before)
				}
				assertContains(t, "runsc.toml", h.read("/etc/containerd/runsc.toml"), "[runsc_config]\nnetwork = \"none\"\n")
				if c.config != nil && h.read("/etc/containerd/config.toml.gvisorgen-backup") != orig {
					t.Fatalf("backup does not hold the original config")
				}
			}
			if c.dropIn {
				// the node's own containerd: 1.x would read the drop-in too, and replace the config's CRI table with it
				if d := h.dump(h.Ctrd, "/etc/containerd/config.toml"); d.Code != 0 || !d.HasRuntime("runsc") || !d.HasRuntime("runc") {
					t.Fatalf("the node's containerd: runsc and runc expected:\n%s%s", d.Stdout, d.Stderr)
				}
			} else {
				h.checkReal(true)
			}
			if !h.criOK() {
				t.Fatalf("CRI not ok after configure:\n%s", h.containerdLog())
			}
			// idempotent: byte-identical, no restart
			runscToml, _ := os.ReadFile(h.P("/etc/containerd/runsc.toml"))
			r := h.mustRun("configure-containerd.sh", nil)
			if got := h.config(); got != cfg {
				t.Fatalf("second run changed the config:\n%s", got)
			}
			if again, _ := os.ReadFile(h.P("/etc/containerd/runsc.toml")); string(again) != string(runscToml) {
				t.Fatalf("second run changed runsc.toml")
			}
			if strings.Contains(r.Output, "restarting containerd") {
				t.Fatalf("second run restarted containerd")
			}
			h.mustRun("ready.sh", nil)
			if c.extra != nil {
				c.extra(t, h)
			}
		})
	}
}
