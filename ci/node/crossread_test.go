//go:build nodetest

package node

import (
	"strings"
	"testing"
)

const minimalRuncV1 = "[plugins.cri.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"

var offPath = map[string]string{"INSTALL_DIR": "/home/kubernetes/bin", "INSTALL_DIR_ON_PATH": "false"}

// Cross-version reads beyond version 2 on path: a version 1 file (containerd 1.6's old format, which 2.x migrates
// on load) and a block written with the install dir off containerd's PATH (absolute runtime_type, runtime_path,
// binary_name). Written on one containerd, the result must load CRI with runc and runsc on the other too, hold no key
// either ignores (checkReal dumps with both: 2.x reads versions 1 and 2 as well), and a run on the other version must
// leave config.toml and runsc.toml byte-identical with 0 restarts.
func TestCrossVersionReads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cfg string
		env       map[string]string
		minimal   string // the minimal runc entry the block must carry ("" = none)
	}{
		{"v1-no-version-line-no-runtimes", cfgV1NoRuntimes, nil, minimalRuncV1},
		{"v1-version-line-no-runtimes", "version = 1\n" + cfgV1NoRuntimes, nil, minimalRuncV1},
		{"v1-runc-defined-by-the-file", cfgV1, nil, ""},
		{"v1-install-dir-off-path", cfgV1, offPath, ""},
		{"v2-install-dir-off-path", cfgV2NoRuntimes, offPath, minimalRuncV2},
		{"v2-1.6-default-install-dir-off-path", "", offPath, ""},
	}
	for _, c := range cases {
		for _, pair := range [][2]string{{"16", "24"}, {"24", "16"}} {
			t.Run(c.name+"/written-on-"+pair[0]+"-read-by-"+pair[1], func(t *testing.T) {
				cfg0 := c.cfg
				if cfg0 == "" {
					cfg0 = def16()
				}
				h := newHost(t, pair[0])
				h.setConfig(cfg0)
				h.startContainerd()
				h.mustRun("install-runsc.sh", c.env)
				h.mustRunRestarts("configure-containerd.sh", c.env, 1)
				cfg := h.config()
				rt := h.read("/etc/containerd/runsc.toml")
				block := cfg[strings.Index(cfg, beginMarker):]
				if c.minimal != "" && !strings.Contains(block, c.minimal) {
					t.Fatalf("the block lacks the minimal runc entry %q:\n%s", c.minimal, cfg)
				}
				if c.minimal == "" && strings.Contains(block, "runtimes.runc]") {
					t.Fatalf("the block holds a runc entry the file did not need:\n%s", cfg)
				}
				if c.env != nil {
					// both readers start the shim from the install dir: 1.x by the absolute runtime_type, 2.x by it or
					// runtime_path; runsc by binary_name
					for _, want := range []string{`runtime_type = "/home/kubernetes/bin/containerd-shim-runsc-v1"`, `runtime_path = "/home/kubernetes/bin/containerd-shim-runsc-v1"`} {
						if !strings.Contains(block, want) {
							t.Fatalf("the block lacks %s:\n%s", want, block)
						}
					}
					assertContains(t, "runsc.toml", rt, `binary_name = "/home/kubernetes/bin/gvisorgen-runsc"`)
				}
				h.checkReal(true) // dumps with 1.6 and 2.4.2, no unknown key gvisorgen wrote
				// the other version starts on the same file, serves CRI with runc and runsc
				d := h.readByOther(pair[0], pair[1])
				if c.env != nil && !strings.Contains(d.Stdout, "/home/kubernetes/bin/containerd-shim-runsc-v1") {
					t.Fatalf("%s's dump does not name the shim in the install dir:\n%s", pair[1], d.Stdout)
				}
				r1 := h.restarts()
				h.mustRun("configure-containerd.sh", c.env)
				if h.config() != cfg || h.read("/etc/containerd/runsc.toml") != rt || h.restarts() != r1 {
					t.Fatalf("the run on %s changed a file or restarted (%d):\n%s", pair[1], h.restarts()-r1, h.config())
				}
				h.mustRun("ready.sh", c.env)
			})
		}
	}
}
