//go:build nodetest

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Field cases of issue 16: configs and situations written by others. Every case asserts the exit code, the message,
// the number of containerd restarts and the bytes of the files it touches (or must not touch).

// dockerConfig is what Docker's containerd package installs as /etc/containerd/config.toml (a cri-dockerd node):
// no version line, CRI disabled, and no newline after the last line is not unusual in such files either.
const dockerConfig = `#   Copyright 2018-2022 Docker Inc.

#   Licensed under the Apache License, Version 2.0 (the "License");

disabled_plugins = ["cri"]

#root = "/var/lib/containerd"
#state = "/run/containerd"
#subreaper = true
#oom_score = 0

#[grpc]
#  address = "/run/containerd/containerd.sock"
#  uid = 0
#  gid = 0
`

// badSpecConfig makes CRI fail to load for a reason of its own: the runc runtime names a base runtime spec file that
// does not exist. `config dump` accepts it (the file is only opened when CRI starts).
const badSpecConfig = `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    base_runtime_spec = "/etc/containerd/no-such-spec.json"
`

// assertRefused: exit 1, the message, no restart since `before`, the config byte-identical to want, and nothing
// of gvisorgen's written next to it.
func (h *Host) assertRefused(r Result, re string, before int, want string) {
	h.t.Helper()
	if r.Code != 1 {
		h.t.Fatalf("want exit 1, got %s", r)
	}
	if !regexp.MustCompile(re).MatchString(r.Output) {
		h.t.Fatalf("output does not match %q: %s", re, r)
	}
	if got := h.restarts() - before; got != 0 {
		h.t.Fatalf("want 0 containerd restarts, got %d", got)
	}
	if want == "" {
		if h.exists("/etc/containerd/config.toml") {
			h.t.Fatalf("a config was created")
		}
	} else if got := h.config(); got != want {
		h.t.Fatalf("config changed:\n%q\nwant\n%q", got, want)
	}
	if h.exists("/etc/containerd/config.toml.gvisorgen-check") {
		h.t.Fatalf("the candidate config.toml.gvisorgen-check was left")
	}
	ents, _ := os.ReadDir(h.P("/etc/containerd"))
	for _, e := range ents {
		if strings.Contains(e.Name(), "gvisorgen-tmp") {
			h.t.Fatalf("temp file %s left", e.Name())
		}
	}
}

func TestCRIRefusal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		config  string
		noStart bool // containerd is not running
		want    string
	}{
		{name: "docker-cri-disabled", config: dockerConfig,
			want: `containerd on /run/containerd/containerd.sock runs without its CRI plugin because /etc/containerd/config.toml disables it \(disabled_plugins lists "cri"; Docker's containerd package.*nothing was changed and containerd was not restarted\..*Fix: keep the runsc-installer off this node`},
		{name: "docker-cri-disabled-no-eol", config: strings.TrimRight(dockerConfig, "\n"),
			want: `runs without its CRI plugin because /etc/containerd/config.toml disables it`},
		{name: "cri-fails-to-load-base-spec-missing", config: badSpecConfig,
			want: `containerd on /run/containerd/containerd.sock runs, but its CRI plugin failed to load \(status error: .*no-such-spec\.json.*\); this is the node's state before gvisorgen changed anything.*Fix: correct the cause in /etc/containerd/config.toml`},
		{name: "containerd-down", config: "version = 2\n", noStart: true,
			want: `containerd does not answer on /run/containerd/containerd.sock.*nothing was changed and containerd was not restarted\..*Fix: start containerd on the host`},
		{name: "containerd-down-config-on-disk-broken", config: "version = 2\n[plugins\n", noStart: true,
			want: `(?m)containerd does not answer on /run/containerd/containerd.sock, so its CRI \(what kubelet uses\) cannot be checked; nothing was changed and containerd was not restarted\. The config on disk is already broken: the host's containerd rejects /etc/containerd/config\.toml \(.*\)\. Fix: correct /etc/containerd/config\.toml \(the rejection above\), then start containerd on the host \(systemctl status containerd; journalctl -u containerd\) and let the installer retry$`},
	}
	for _, ver := range []string{"16", "22", "24"} {
		for _, c := range cases {
			t.Run(c.name+"/"+ver, func(t *testing.T) {
				h := newHost(t, ver)
				h.setConfig(c.config)
				if !c.noStart {
					h.startContainerd0()
				}
				h.mustRun("install-runsc.sh", nil)
				before := h.restarts()
				r := h.run("configure-containerd.sh", nil)
				h.assertRefused(r, c.want, before, c.config)
				// one message: the cause first, then the fix, once
				if errs := regexp.MustCompile(`(?m)^\[configure-containerd\] ERROR: .*$`).FindAllString(r.Output, -1); len(errs) != 1 ||
					strings.Count(errs[0], "Fix:") != 1 || strings.Contains(strings.ToLower(errs[0]), "fix it") {
					t.Fatalf("want one ERROR line with one fix, got %q", errs)
				}
				for _, f := range []string{"config.toml.gvisorgen-backup", "config.toml.gvisorgen-applied", "runsc.toml"} {
					if h.exists("/etc/containerd/" + f) {
						t.Fatalf("%s written on a refusal", f)
					}
				}
				if strings.Contains(r.Output, "restarting containerd") {
					t.Fatal("restart attempted")
				}
				h.mustFail("ready.sh", nil, "not ready")
			})
		}
	}
	// uninstall refuses the same way when removing the block would need a restart of a containerd without CRI
	for _, ver := range []string{"16", "22", "24"} {
		t.Run("uninstall-cri-disabled-after-install/"+ver, func(t *testing.T) {
			cfg := def16()
			disable := `disabled_plugins = ["io.containerd.grpc.v1.cri"]`
			switch ver {
			case "24":
				cfg = def24()
			case "22":
				cfg = noImports("22") // in place: the block's removal is what needs the restart
			}
			h := fullInstall(t, ver, cfg)
			// an operator disables CRI (first line, before any table) and restarts containerd
			installed := h.config()
			broken := strings.Replace(installed, "disabled_plugins = []", disable, 1)
			if broken == installed {
				t.Fatalf("no disabled_plugins line in the default config:\n%s", installed)
			}
			h.setConfig(broken)
			if out, err := h.hostCmd("systemctl", "restart", "containerd"); err != nil {
				t.Fatalf("restart: %v %s", err, out)
			}
			before := h.restarts()
			r := h.run("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
			h.assertRefused(r, `runs without its CRI plugin because /etc/containerd/config.toml disables it.*holds gvisorgen's block from an earlier run`, before, broken)
		})
	}
}

// startContainerd0 starts containerd and waits until it answers, without requiring CRI.
func (h *Host) startContainerd0() {
	h.t.Helper()
	if out, err := h.hostCmd("systemctl", "start", "containerd"); err != nil {
		h.t.Fatalf("start containerd: %v\n%s\n%s", err, out, h.containerdLog())
	}
}

func TestExactRestore(t *testing.T) {
	t.Parallel()
	type cfgCase struct {
		name string
		cfg  func(ver string) string
	}
	def := func(ver string) string {
		switch ver {
		case "16":
			return def16()
		case "22":
			return noImports("22") // in place: the exact restore is the block's
		}
		return def24()
	}
	cases := []cfgCase{
		{"default-with-eol", def},
		{"default-without-eol", func(v string) string { return strings.TrimRight(def(v), "\n") }},
		{"default-two-blank-lines-at-end", func(v string) string { return strings.TrimRight(def(v), "\n") + "\n\n\n" }},
		{"crlf-without-eol", func(v string) string {
			return "version = 2\r\n[plugins.\"io.containerd.grpc.v1.cri\"]\r\n  sandbox_image = \"registry.k8s.io/pause:3.9\""
		}},
		{"one-line-without-eol", func(string) string { return "version = 2" }},
	}
	for _, ver := range []string{"16", "22", "24"} {
		for _, c := range cases {
			t.Run(c.name+"/"+ver, func(t *testing.T) {
				orig := c.cfg(ver)
				h := newHost(t, ver)
				h.setConfig(orig)
				h.startContainerd()
				h.mustRun("install-runsc.sh", nil)
				h.mustRunRestarts("configure-containerd.sh", nil, 1)
				installed := h.config()
				if !strings.HasPrefix(installed, orig) {
					t.Fatalf("the original bytes are not kept before the block:\n%q", installed)
				}
				if h.read("/etc/containerd/config.toml.gvisorgen-backup") != orig {
					t.Fatal("backup differs from the original")
				}
				h.checkReal(true)
				h.mustRun("ready.sh", nil)
				// second run: byte-identical, no restart
				r1 := h.restarts()
				h.mustRun("configure-containerd.sh", nil)
				if h.config() != installed || h.restarts() != r1 {
					t.Fatalf("second run changed the config or restarted (%d):\n%q", h.restarts()-r1, h.config())
				}
				h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, 1)
				if got := h.config(); got != orig {
					t.Fatalf("uninstall did not restore the original bytes:\n%q\nwant\n%q", got, orig)
				}
				h.mustRun("ready.sh", map[string]string{"GVISOR_MODE": "uninstall"})
			})
		}
	}
}

// concurrentWriterExec is a test-only HOST_EXEC: it runs every host command through the fake host's HOST_EXEC and,
// when the installer asks containerd to dump a candidate (the check file holding gvisorgen's block, or, for
// uninstall, the check file without it) built from the live file as it is (as many of the writer's lines in both),
// it appends a line to the live config first: another writer's edit landing between the installer's read and its
// swap, once per attempt, as long as $D/edits-left says (one line appended to $D/edits per edit).
const concurrentWriterExec = `#!/bin/sh
D=@DIR@
C=$D/host/etc/containerd/config.toml
case " $* " in
*" --config /etc/containerd/config.toml.gvisorgen-check config dump "*)
	n=$(cat "$D/edits-left" 2>/dev/null || echo 0)
	if [ "$n" -gt 0 ] && [ "$(grep -cxF '@MARK@' "$C.gvisorgen-check")" @CMP@ 0 ] &&
		[ "$(grep -cxF '@EDIT@' "$C")" = "$(grep -cxF '@EDIT@' "$C.gvisorgen-check")" ]; then
		printf '%s\n' '@EDIT@' >>"$C"
		echo $((n - 1)) >"$D/edits-left"
		echo edit >>"$D/edits"
	fi ;;
esac
exec "$D/hostexec" "$@"
`

const otherWritersEdit = "# added by the node bootstrapper while gvisorgen validated"

func (h *Host) concurrentWriter(uninstall bool, edits int) string {
	h.write(filepath.Join(h.Dir, "edits-left"), 0o644, fmt.Sprintf("%d\n", edits))
	cmp := "-gt" // install: the candidate holds the block
	if uninstall {
		cmp = "-eq" // uninstall: the candidate is the config without it
	}
	s := strings.NewReplacer("@DIR@", h.Dir, "@MARK@", beginMarker, "@CMP@", cmp, "@EDIT@", otherWritersEdit).Replace(concurrentWriterExec)
	p := filepath.Join(h.Dir, "hostexec-concurrent")
	h.write(p, 0o755, s)
	return p
}

// TestConcurrentWriter: the compare-and-swap refuses to write over another writer's edit and starts over from the
// new file, in the same run, up to 3 attempts: one edit is absorbed (the edit kept, the backup the validated snapshot,
// one restart); an edit on every attempt is refused (nothing written, no restart), and the next run succeeds.
func TestConcurrentWriter(t *testing.T) {
	t.Parallel()
	edits := func(h *Host) int { return strings.Count(h.read("/../edits"), "edit\n") }
	for _, ver := range []string{"16", "22", "24"} {
		orig := func() string {
			switch ver {
			case "24":
				return def24()
			case "22":
				return noImports("22")
			}
			return def16()
		}
		t.Run("install-one-edit-retried/"+ver, func(t *testing.T) {
			h := newHost(t, ver)
			h.setConfig(orig())
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			r := h.mustRunRestarts("configure-containerd.sh", map[string]string{"HOST_EXEC": h.concurrentWriter(false, 1)}, 1)
			if edits(h) != 1 {
				t.Fatalf("the wrapper edited %d times, want 1", edits(h))
			}
			assertContains(t, "output", r.Output, "(attempt 1 of 3): nothing written over it; starting over from the new file")
			edited := orig() + otherWritersEdit + "\n"
			if got := h.config(); !strings.HasPrefix(got, edited+"\n"+beginMarker+"\n") {
				t.Fatalf("the retry lost the other writer's edit:\n%s", got)
			}
			if h.read("/etc/containerd/config.toml.gvisorgen-backup") != edited {
				t.Fatal("backup is not the validated snapshot")
			}
			h.checkReal(true)
			h.mustRun("ready.sh", nil)
		})
		t.Run("install-edit-on-every-attempt-refused/"+ver, func(t *testing.T) {
			h := newHost(t, ver)
			h.setConfig(orig())
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
			before := h.restarts()
			r := h.run("configure-containerd.sh", map[string]string{"HOST_EXEC": h.concurrentWriter(false, 5)})
			edited := orig() + strings.Repeat(otherWritersEdit+"\n", 3)
			h.assertRefused(r, `/etc/containerd/config.toml was changed by another writer .* while gvisorgen validated its edit, on each of 3 attempts; nothing was written over it and containerd was not restarted`, before, edited)
			if edits(h) != 3 {
				t.Fatalf("the wrapper edited %d times, want 3 (one per attempt)", edits(h))
			}
			if h.exists("/etc/containerd/config.toml.gvisorgen-backup") {
				t.Fatal("a backup was left by the refused run")
			}
			// the init container's next run starts from the other writer's file
			h.mustRunRestarts("configure-containerd.sh", nil, 1)
			if got := h.config(); !strings.HasPrefix(got, edited+"\n"+beginMarker+"\n") {
				t.Fatalf("the next run lost the other writer's edits:\n%s", got)
			}
			if h.read("/etc/containerd/config.toml.gvisorgen-backup") != edited {
				t.Fatal("backup is not the validated snapshot")
			}
			h.checkReal(true)
			h.mustRun("ready.sh", nil)
		})
		t.Run("uninstall-one-edit-retried/"+ver, func(t *testing.T) {
			h := fullInstall(t, ver, orig())
			env := map[string]string{"GVISOR_MODE": "uninstall", "HOST_EXEC": h.concurrentWriter(true, 1)}
			r := h.mustRunRestarts("uninstall.sh", env, 1)
			assertContains(t, "output", r.Output, "starting over from the new file")
			if edits(h) != 1 {
				t.Fatalf("the wrapper edited %d times, want 1", edits(h))
			}
			if got := h.config(); strings.Contains(got, beginMarker) || !strings.Contains(got, otherWritersEdit+"\n") {
				t.Fatalf("want the block gone and the other writer's edit kept:\n%s", got)
			}
		})
		t.Run("uninstall-edit-on-every-attempt-refused/"+ver, func(t *testing.T) {
			h := fullInstall(t, ver, orig())
			installed := h.config()
			before := h.restarts()
			env := map[string]string{"GVISOR_MODE": "uninstall", "HOST_EXEC": h.concurrentWriter(true, 5)}
			r := h.run("uninstall.sh", env)
			h.assertRefused(r, `/etc/containerd/config.toml was changed by another writer while gvisorgen validated its edit, on each of 3 attempts; nothing was changed and containerd was not restarted`, before, installed+strings.Repeat(otherWritersEdit+"\n", 3))
			if edits(h) != 3 {
				t.Fatalf("the wrapper edited %d times, want 3", edits(h))
			}
		})
	}
}

const minimalRuncV2 = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"

// useContainerd makes the fake host's `containerd` the other version (an upgrade or downgrade of the node, or one
// image config shared by pools on different versions).
// readByOther restarts the fake host on containerd `to` over the config `from` wrote, and returns the dump once `to`
// serves CRI with both runc and runsc from it.
func (h *Host) readByOther(from, to string) Dump {
	h.t.Helper()
	h.useContainerd(to)
	if out, err := h.hostCmd("systemctl", "restart", "containerd"); err != nil {
		h.t.Fatalf("containerd %s does not start on the file written on %s: %v\n%s\n%s", to, from, err, out, h.containerdLog())
	}
	h.waitCRI()
	d := h.dump(h.Ctrd, "/etc/containerd/config.toml")
	if !d.HasRuntime("runsc") || !d.HasRuntime("runc") {
		h.t.Fatalf("%s: runsc=%v runc=%v\n%s", to, d.HasRuntime("runsc"), d.HasRuntime("runc"), d.Stdout)
	}
	return d
}

func (h *Host) useContainerd(ver string) {
	h.t.Helper()
	h.CtrdName = ver
	h.Ctrd = map[string]string{"16": ctrd16, "17": ctrd17, "24": ctrd24}[ver]
	h.link(h.Ctrd, filepath.Join(h.Dir, "fakebin", "containerd"))
}

// A version 2 file is read by containerd 1.x and 2.x. Written on either, the result must load CRI with the runc and
// runsc runtimes on both (checked by each one's dump, and by really starting the other version on it), the block
// must hold only keys both know, and a run on the other version must leave it byte-identical with 0 restarts.
func TestBothReadersOfVersion2(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cfg   string
		wantMinimal bool // the block carries the minimal runc entry
	}{
		{"no-runtimes", cfgV2NoRuntimes, true},
		{"version-line-only", "version = 2\n", true},
		{"runc-defined-by-the-file", def16(), false},
		{"runc-defined-by-dotted-keys", cfgV2DottedRunscless, false},
	}
	for _, c := range cases {
		for _, pair := range [][2]string{{"16", "24"}, {"24", "16"}} {
			t.Run(c.name+"/written-on-"+pair[0]+"-read-by-"+pair[1], func(t *testing.T) {
				h := newHost(t, pair[0])
				h.setConfig(c.cfg)
				h.startContainerd()
				h.mustRun("install-runsc.sh", nil)
				h.mustRunRestarts("configure-containerd.sh", nil, 1)
				cfg := h.config()
				block := cfg[strings.Index(cfg, beginMarker):]
				if got := strings.Contains(block, minimalRuncV2); got != c.wantMinimal {
					t.Fatalf("minimal runc entry in the block: %v, want %v\n%s", got, c.wantMinimal, cfg)
				}
				for _, k := range []string{"runtime_engine", "runtime_root", "base_runtime_spec", "cni_conf_dir", "SystemdCgroup", "BinaryName"} {
					if strings.Contains(block, k) {
						t.Fatalf("the block holds %s, a key not every reader knows or needs:\n%s", k, block)
					}
				}
				h.checkReal(true) // dumps with 1.6 and 2.4.2, no unknown key gvisorgen wrote
				// the other version starts on the same file, serves CRI with runc and runsc
				h.readByOther(pair[0], pair[1])
				r1 := h.restarts()
				h.mustRun("configure-containerd.sh", nil)
				if h.config() != cfg || h.restarts() != r1 {
					t.Fatalf("the run on %s changed the file or restarted (%d):\n%s", pair[1], h.restarts()-r1, h.config())
				}
				h.mustRun("ready.sh", nil)
			})
		}
	}
}

const cfgV2DottedRunscless = `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
  runtimes.runc.runtime_type = "io.containerd.runc.v2"
`

// The unknown-key check of the tests catches what it must: keys gvisorgen's block holds that 2.4.2 ignores (by
// plugin and key path, parsed from the warning's fields), and not keys the original config had ignored already.
func TestUnknownKeyCheckCatches(t *testing.T) {
	t.Parallel()
	h := newHost(t, "24")
	cfg := def16() + "\n" + beginMarker + "\n" + tblV2 + "\n  runtime_type = \"io.containerd.runsc.v1\"\n  runtime_engine = \"\"\n" +
		`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]` + "\n  TypeUrl = \"io.containerd.runsc.v1.options\"\n" + endMarker + "\n"
	h.setConfig(cfg)
	d := h.dump(ctrd24, "/etc/containerd/config.toml")
	if d.Code != 0 {
		t.Fatalf("dump failed: %s", d.Stderr)
	}
	bad := gvisorgenUnknownKeys(cfg, "/etc/containerd/config.toml", d.Stderr)
	want := []string{"io.containerd.cri.v1.runtime: containerd runtimes runsc runtime_engine"}
	if strings.Join(bad, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q\n%s", bad, want, d.Stderr)
	}
	// the 1.6 default's own runc table has 1.6-only keys: 2.4.2 ignores them, and they are not gvisorgen's
	if !strings.Contains(d.Stderr, "containerd runtimes runc runtime_engine") {
		t.Fatalf("expected 2.4.2 to ignore the 1.6 default's runc.runtime_engine:\n%s", d.Stderr)
	}
	// a top-level key reported by file and row inside the block
	top := "version = 2\n" + beginMarker + "\nbogus_top = 1\n" + endMarker + "\n"
	h.setConfig(top)
	d = h.dump(ctrd24, "/etc/containerd/config.toml")
	if got := gvisorgenUnknownKeys(top, "/etc/containerd/config.toml", d.Stderr); len(got) != 1 || !strings.Contains(got[0], "row 3") {
		t.Fatalf("top-level key in the block not caught: %q\n%s", got, d.Stderr)
	}
}

// A config that imports a glob covering containerd's own folder ("/etc/containerd/*.toml", a common pattern) matches
// config.toml itself and runsc.toml. The installer validates its candidate as a copy next to config.toml, which the
// glob would make import the live config.toml (with the block, from the first run): the second run must still see
// no runsc "by hand", leave every file byte-identical and not restart containerd. A glob that would make containerd
// load gvisorgen's bookkeeping files (not TOML) is refused before anything is written.
func TestImportGlobs(t *testing.T) {
	t.Parallel()
	// ver/mode: 2.x takes the drop-in where the glob covers a folder for it (/etc/containerd itself, or conf.d), and the
	// block with CONTAINERD_CONFIG_MODE=block; 1.x the block.
	for _, vm := range []string{"16/auto", "24/auto", "24/block"} {
		ver, mode := strings.Split(vm, "/")[0], strings.Split(vm, "/")[1]
		for _, glob := range []string{`"/etc/containerd/*.toml"`, `"*.toml"`, `"/etc/containerd/conf.d/*.toml", "/etc/containerd/config.toml"`} {
			name := strings.NewReplacer(`"`, "", "/", "_", "*", "x", ", ", "+").Replace(glob)
			t.Run(name+"/"+vm, func(t *testing.T) {
				h := newHost(t, ver)
				h.Env["CONTAINERD_CONFIG_MODE"] = mode
				din := ""
				if ver == "24" && mode == "auto" {
					din = "/etc/containerd/gvisorgen-runsc.toml"
					if strings.Contains(glob, "conf.d") {
						din = dropIn
					}
				}
				orig := "version = 2\nimports = [" + glob + "]\n\n" + `[plugins."io.containerd.grpc.v1.cri".containerd]` + "\n  default_runtime_name = \"runc\"\n"
				h.write(h.P("/etc/containerd/conf.d/gc.toml"), 0o644, dropInGC)
				h.setConfig(orig)
				h.startContainerd()
				h.mustRun("install-runsc.sh", nil)
				h.mustRunRestarts("configure-containerd.sh", nil, 1)
				first := h.config()
				dropin := ""
				if din != "" {
					dropin = h.read(din)
					if first != orig || !strings.Contains(dropin, tblV2) {
						t.Fatalf("want the original and gvisorgen's drop-in %s with %s:\n%s\n%s", din, tblV2, first, dropin)
					}
					if d := h.dump(h.Ctrd, "/etc/containerd/config.toml"); !d.HasRuntime("runsc") || strings.Contains(glob, "conf.d") != strings.Contains(d.Stdout, "pause_threshold = 0.03") {
						t.Fatalf("the node's containerd: runsc and gc.toml's setting expected:\n%s%s", d.Stdout, d.Stderr)
					}
				} else {
					if countLines(first, beginMarker) != 1 || !strings.HasPrefix(first, orig) {
						t.Fatalf("want the original and one block:\n%s", first)
					}
					h.checkReal(true)
				}
				runscToml := h.read("/etc/containerd/runsc.toml")
				for i := 2; i <= 3; i++ {
					r := h.mustRunRestarts("configure-containerd.sh", nil, 0)
					if din != "" && h.read(din) != dropin {
						t.Fatalf("run %d changed the drop-in", i)
					}
					if h.config() != first || h.read("/etc/containerd/runsc.toml") != runscToml {
						t.Fatalf("run %d changed a file:\n%s", i, h.config())
					}
					if strings.Contains(r.Output, "already exists outside gvisorgen's block") {
						t.Fatalf("run %d took its own block, imported through the glob, for a hand-written runtime:\n%s", i, r.Output)
					}
				}
				h.mustRun("ready.sh", nil)
				h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
				if h.config() != orig || (din != "" && h.exists(din)) {
					t.Fatalf("uninstall did not restore the original (or left the drop-in):\n%q", h.config())
				}
			})
		}
		if mode == "block" {
			continue
		}
		// Each imports array below reaches config.toml* as containerd reads it: cleaned (filepath.Clean) before it is
		// globbed, TOML's strings, escapes, comments and line breaks read as go-toml reads them. The last one holds an
		// escape the installer does not decode (beyond ASCII): refused for that, since it cannot judge what is loaded.
		hit := `the imports pattern /etc/containerd/config\.toml\* of /etc/containerd/config\.toml matches files gvisorgen writes .*/etc/containerd/config\.toml\.gvisorgen-applied.*Fix: narrow the pattern`
		for i, arr := range []string{`["/etc/containerd/config.toml*"]`, `["./config.toml*"]`,
			`["/etc/containerd/conf.d/../config.toml*"]`, `["/etc//containerd/./config.toml*"]`,
			"[\n  \"/etc/containerd/conf.d/[0-9]*.toml\",\n  \"/etc/containerd/config.toml*\",\n]",
			"[\n  # don't remove: drop-ins\n  \"/etc/containerd/config.toml*\", # it's ours\n]",
			`["/x/none\"*", "/etc/containerd/config.toml*"]`, `["/etc/containerd/config.toml\u002a"]`,
			`["/etc/containerd/conf.d/\u00e9*.toml", "/etc/containerd/config.toml*"]`} {
			t.Run(fmt.Sprintf("glob-reaching-bookkeeping-files-refused/%s/%d", ver, i), func(t *testing.T) {
				h := newHost(t, ver)
				orig := "version = 2\nimports = " + arr + "\n"
				h.setConfig(orig)
				h.startContainerd()
				h.mustRun("install-runsc.sh", nil)
				before := h.restarts()
				r := h.run("configure-containerd.sh", nil)
				want := hit
				if strings.Contains(arr, `\u00e9`) {
					want = `cannot read the imports of /etc/containerd/config\.toml exactly \(its text: an imports entry with a \\u escape beyond printable ASCII\).*nothing was changed`
				}
				h.assertRefused(r, want, before, orig)
				for _, f := range []string{"config.toml.gvisorgen-backup", "config.toml.gvisorgen-applied", "runsc.toml"} {
					if h.exists("/etc/containerd/" + f) {
						t.Fatalf("%s written on a refusal", f)
					}
				}
			})
		}
	}
}
