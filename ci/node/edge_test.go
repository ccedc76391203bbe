//go:build nodetest

package node

import (
	"os"
	"strings"
	"testing"
)

func TestEdges(t *testing.T) {
	t.Parallel()
	t.Run("host-exec-broken-says-so", func(t *testing.T) {
		h := newHost(t, "16")
		h.setConfig(def16())
		h.mustFail("configure-containerd.sh", map[string]string{"HOST_EXEC": "/nonexistent/nsenter"}, `has no '/nonexistent/nsenter' command`)
		h.mustFail("configure-containerd.sh", map[string]string{"HOST_EXEC": h.Exec + " false"}, `cannot run 'containerd --version' on the host`)
		if h.config() != def16() {
			t.Fatal("config changed")
		}
	})
	t.Run("damaged-markers-refused", func(t *testing.T) {
		h := newHost(t, "16")
		cfg := def16() + "\n" + beginMarker + "\n" + tblV2 + "\n  runtime_type = \"io.containerd.runsc.v1\"\n"
		h.setConfig(cfg)
		h.mustFail("configure-containerd.sh", nil, `markers .* are damaged \(1 begin, 0 end`)
		if h.config() != cfg {
			t.Fatal("config changed")
		}
	})
	t.Run("symlinked-config-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.write(h.P("/etc/containerd/real.toml"), 0o644, def16())
		if err := os.Symlink("real.toml", h.P("/etc/containerd/config.toml")); err != nil {
			t.Fatal(err)
		}
		h.mustFail("configure-containerd.sh", nil, `is a symlink`)
	})
	t.Run("runsc-config-toml-with-table-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.setConfig(def16())
		h.mustFail("configure-containerd.sh", map[string]string{"RUNSC_CONFIG_TOML": "platform = \"kvm\"\n[other]\nx = 1"}, `no table headers`)
	})
	t.Run("runsc-options-change-rewrites-runsc-toml-without-restart", func(t *testing.T) {
		h := fullInstall(t, "24", def24())
		cfg, restarts := h.config(), h.restarts()
		h.mustRun("configure-containerd.sh", map[string]string{"RUNSC_CONFIG_TOML": "network = \"none\"\nplatform = \"systrap\""})
		assertContains(t, "runsc.toml", h.read("/etc/containerd/runsc.toml"), "[runsc_config]\nnetwork = \"none\"\nplatform = \"systrap\"\n")
		if h.config() != cfg || h.restarts() != restarts {
			t.Fatal("config changed or containerd restarted for runsc options")
		}
	})
	t.Run("moving-install-dir-off-path-updates-block-and-restarts", func(t *testing.T) {
		h := fullInstall(t, "16", def16())
		restarts := h.restarts()
		env := map[string]string{"INSTALL_DIR": "/home/kubernetes/bin", "INSTALL_DIR_ON_PATH": "false"}
		h.mustRun("install-runsc.sh", env)
		h.mustRun("configure-containerd.sh", env)
		c := h.config()
		if countLines(c, beginMarker) != 1 || !strings.Contains(c, "/home/kubernetes/bin/containerd-shim-runsc-v1") {
			t.Fatalf("block not updated:\n%s", c)
		}
		if h.restarts() != restarts+1 {
			t.Fatal("want one restart")
		}
		h.checkReal(true)
		if h.read("/etc/containerd/config.toml.gvisorgen-backup") != def16() {
			t.Fatal("the backup no longer holds the config from before gvisorgen's first change")
		}
		h.Env["INSTALL_DIR"], h.Env["INSTALL_DIR_ON_PATH"] = env["INSTALL_DIR"], env["INSTALL_DIR_ON_PATH"]
		h.mustRun("ready.sh", nil)
	})
	t.Run("own-block-rejected-by-containerd-is-rebuilt", func(t *testing.T) {
		// e.g. a block from an older installer that a newer containerd no longer accepts; containerd still runs
		// (and serves CRI) from the config it last started with: the installer needs a running CRI (issue 16)
		h := newHost(t, "16")
		h.setConfig(def16())
		h.startContainerd()
		broken := def16() + "\n" + beginMarker + "\n" + tblV2 + "\n  runtime_type = \"io.containerd.runsc.v1\"\n" + tblV2 + "\n" + endMarker + "\n"
		h.setConfig(broken)
		before := h.restarts()
		h.mustRun("configure-containerd.sh", nil)
		if countLines(h.config(), tblV2) != 1 {
			t.Fatalf("block not rebuilt:\n%s", h.config())
		}
		if got := h.restarts() - before; got != 1 {
			t.Fatalf("want 1 restart, got %d", got)
		}
		h.checkReal(true)
	})
	t.Run("bad-values-refused", func(t *testing.T) {
		h := newHost(t, "16")
		for env, re := range map[string]string{
			"INSTALL_DIR=usr/local/bin":       "INSTALL_DIR must be an absolute path",
			"INSTALL_DIR=/usr/local/bin/../x": `no '\.' or '\.\.' part`,
			"GVISOR_VERSION=20230229":         "is not a calendar date",
			"STATE_DIR=/run/a$b":              "may hold only",
			`CONTAINERD_CONFIG=/etc/c"d/x`:    "may hold only",
			"DOWNLOAD_RETRIES=0":              "DOWNLOAD_RETRIES must be a positive integer",
			"GVISOR_LAYOUT=zip":               "GVISOR_LAYOUT must be",
			"INSTALL_DIR_ON_PATH=yes":         "INSTALL_DIR_ON_PATH must be true or false",
			"GVISOR_VERSION=2024021":          "GVISOR_VERSION must be",
			"GVISOR_VERSION=20240212.x":       "GVISOR_VERSION must be",
			"GVISOR_MODE=remove":              "GVISOR_MODE must be",
		} {
			kv := strings.SplitN(env, "=", 2)
			h.mustFail("install-runsc.sh", map[string]string{kv[0]: kv[1]}, re)
		}
		h.assertNothingInstalled()
	})
}

// TestSlowContainerdIsNotDown: a containerd that answers, but slowly, is up. Each question the installer asks it
// (`ctr plugins ls`) here takes 7 s, as a saturated node stretches a Go client's start and containerd's answer: the
// install goes through, restart included, and uninstall (which asks before it removes anything) too. A bound of 5 s
// per question refused such a node as "containerd does not answer" (seen at a load of 24 on 2 cores, 2026-12-07).
func TestSlowContainerdIsNotDown(t *testing.T) {
	t.Parallel()
	h := newHost(t, "24")
	h.setConfig(def24())
	h.startContainerd()
	h.mustRun("install-runsc.sh", nil)
	// the host's ctr: the real one, 7 s late (the fake systemctl's restart waits through it too)
	h.write(h.Dir+"/fakebin/ctr", 0o755, "#!/bin/sh\nsleep 7\nexec "+ctrBin+" \"$@\"\n")
	r := h.mustRun("configure-containerd.sh", nil)
	if !strings.Contains(r.Output, "containerd is back and its CRI plugin is loaded") {
		t.Fatalf("no restart verified:\n%s", r.Output)
	}
	h.checkReal(true)
	h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
	h.checkReal(false)
}
