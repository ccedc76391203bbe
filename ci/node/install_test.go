//go:build nodetest

package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// assertInstalled: tag's files are installed in dir's release folder gvisor-releases/<tag>/ (mode 0755, the release's
// digests), the shim in dir is tag's, the stamp names tag as current, and no temp file or staging folder is left.
func (h *Host) assertInstalled(dir, tag string, files ...string) {
	h.t.Helper()
	for _, f := range append(append([]string{}, files...), "../../containerd-shim-runsc-v1") {
		p := h.P(filepath.Join(dir, "gvisor-releases", tag, f))
		st, err := os.Stat(p)
		if err != nil {
			h.t.Fatalf("%s not installed: %v", f, err)
		}
		if st.Mode().Perm() != 0o755 {
			h.t.Fatalf("%s mode %v, want 0755", f, st.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		if got, want := sum(b), artSHA[tag+"/"+filepath.Base(f)]; strings.HasPrefix(f, "gvisor-bin/") {
			if want = artSHA[tag+"/"+f]; got != want {
				h.t.Fatalf("%s: installed digest %s, want %s (%s)", f, got[:16], want, tag)
			}
		} else if got != want {
			h.t.Fatalf("%s: installed digest %s, want %s (%s)", f, got[:16], want, tag)
		}
	}
	stamp := h.read(filepath.Join(dir, ".gvisorgen-runsc.stamp"))
	assertContains(h.t, "stamp", stamp, "version "+tag+"\n")
	// gvisorgen-runsc, with this node's paths, recorded in the stamp
	d := h.P(filepath.Join(dir, "gvisorgen-runsc"))
	if st, err := os.Lstat(d); err != nil || st.Mode() != 0o755 {
		h.t.Fatalf("gvisorgen-runsc not installed as a 0755 file: %v %v", st, err)
	}
	b, _ := os.ReadFile(d)
	assertContains(h.t, "gvisorgen-runsc", string(b), "\nGVZ_D_RELEASES="+dir+"/gvisor-releases\n")
	assertContains(h.t, "stamp", stamp, "file "+sum(b)+" gvisorgen-runsc\n")
	// no temp files or staging folders left behind
	for _, d := range []string{dir, filepath.Join(dir, "gvisor-releases")} {
		ents, _ := os.ReadDir(h.P(d))
		for _, e := range ents {
			if strings.Contains(e.Name(), "gvisorgen-tmp") || strings.Contains(e.Name(), "gvisorgen-probe") || strings.HasPrefix(e.Name(), ".") && d != dir {
				h.t.Fatalf("temp file left: %s/%s", d, e.Name())
			}
		}
	}
}

// releases: the release folders in dir/gvisor-releases.
func (h *Host) releases(dir string) []string {
	h.t.Helper()
	ents, _ := os.ReadDir(h.P(filepath.Join(dir, "gvisor-releases")))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (h *Host) assertNothingInstalled() {
	h.t.Helper()
	ents, _ := os.ReadDir(h.P("/usr/local/bin"))
	if len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		h.t.Fatalf("install dir not empty after a failure: %v", names)
	}
}

var binFiles = []string{"runsc", "containerd-shim-runsc-v1"}
var archFiles = []string{"runsc", "containerd-shim-runsc-v1", "gvisor-bin/helper-a", "gvisor-bin/helper-b"}

func pins(tag string, arts ...string) string {
	var b strings.Builder
	for _, a := range arts {
		b.WriteString("x86_64/" + a + " " + artSHA[tag+"/"+a] + "\n")
	}
	return b.String()
}

// autoPins pins every artifact of a tag that the fixture knows (the default of every script run, see runShellWith).
func autoPins(tag string) string {
	var arts []string
	for _, a := range []string{"runsc", "containerd-shim-runsc-v1", "gvisor.tar.bz2"} {
		if artSHA[tag+"/"+a] != "" {
			arts = append(arts, a)
		}
	}
	return pins(tag, arts...)
}

// tlsEnv: unpinned, from the good HTTPS server, trusting the test CA (the verifying download path).
func tlsEnv(path string, kv ...string) map[string]string {
	env := map[string]string{"GVISOR_BASE_URL": tlsGoodURL + path, "GVISOR_SHA512_PINS": "", "GVISOR_CA_BUNDLE": testCAPEM}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func TestInstall(t *testing.T) {
	t.Parallel()
	t.Run("binaries-layout-then-skip", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustRun("install-runsc.sh", nil)
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		stamp := h.read("/usr/local/bin/.gvisorgen-runsc.stamp")
		// second run: skips without any network (base URL refused), stamp byte-identical
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": refusedURL})
		assertContains(t, "output", r.Output, "already installed")
		if h.read("/usr/local/bin/.gvisorgen-runsc.stamp") != stamp {
			t.Fatal("stamp rewritten on skip")
		}
	})
	t.Run("archive-layout-flat", func(t *testing.T) {
		h := newHost(t, "24")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
		assertContains(t, "output", r.Output, "archive")
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
	})
	t.Run("archive-layout-in-folder-pinned", func(t *testing.T) {
		h := newHost(t, "24")
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArchDir, "GVISOR_SHA512_PINS": pins(tagArchDir, "gvisor.tar.bz2")})
		h.assertInstalled("/usr/local/bin", tagArchDir, archFiles...)
	})
	t.Run("archive-binary-pins-checked-inside-the-archive", func(t *testing.T) {
		h := newHost(t, "24")
		bad := pins(tagArch, "gvisor.tar.bz2") + "x86_64/runsc " + strings.Repeat("cd", 64)
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_SHA512_PINS": bad}, `mismatch for runsc inside gvisor\.tar\.bz2`)
		h.assertNothingInstalled()
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_SHA512_PINS": pins(tagArch, "gvisor.tar.bz2", "runsc", "containerd-shim-runsc-v1")})
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
	})
	t.Run("archive-forced-on-old-tag-404", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", tlsEnv("/release", "GVISOR_LAYOUT", "archive"), `gvisor\.tar\.bz2: not found \(HTTP 404\)`)
		h.assertNothingInstalled()
	})
	t.Run("binaries-forced-on-new-tag-404", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_LAYOUT": "binaries"}, `runsc: not found \(HTTP 404\)`)
		h.assertNothingInstalled()
	})
	t.Run("auto-layout-boundary-2026-07-21", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", tlsEnv("/release", "GVISOR_VERSION", "20260720"), `20260720/x86_64/runsc: not found .*resolved to binaries`)
		h.mustFail("install-runsc.sh", tlsEnv("/release", "GVISOR_VERSION", "20260721.1"), `20260721\.1/x86_64/gvisor\.tar\.bz2: not found .*resolved to archive`)
	})
	t.Run("404-no-such-release", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", tlsEnv("/release", "GVISOR_VERSION", "20240101"), `not found \(HTTP 404\)`)
		h.assertNothingInstalled()
	})
	t.Run("connection-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": refusedURL}, `failed after 2 attempt\(s\): connection refused`)
		h.assertNothingInstalled()
	})
	t.Run("timeout", func(t *testing.T) {
		h := newHost(t, "16")
		r := h.mustFail("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": faultURL + "/hang", "DOWNLOAD_TIMEOUT_SECONDS": "1"}, `failed after 2 attempt\(s\): timed out after 1s`)
		assertContains(t, "output", r.Output, "retry 1/1")
		h.assertNothingInstalled()
	})
	t.Run("truncated-download", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": faultURL + "/trunc"}, `(sha512 mismatch|failed after)`)
		h.assertNothingInstalled()
	})
	t.Run("flaky-server-retried", func(t *testing.T) {
		h := newHost(t, "16")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": faultURL + "/flaky/1-install", "DOWNLOAD_RETRIES": "3"})
		assertContains(t, "output", r.Output, "503")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
	})
	t.Run("published-sha-mismatch", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", tlsEnv("/badsha"), `sha512 mismatch for .*runsc against the published runsc\.sha512 over verified TLS`)
		h.assertNothingInstalled()
	})
	t.Run("pinned-sha-mismatch", func(t *testing.T) {
		h := newHost(t, "16")
		bad := "x86_64/runsc " + strings.Repeat("ab", 64) + "\n" + "x86_64/containerd-shim-runsc-v1 " + artSHA[tagBin+"/containerd-shim-runsc-v1"]
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_SHA512_PINS": bad}, `sha512 mismatch for .*runsc against the pinned digest`)
		h.assertNothingInstalled()
	})
	t.Run("pin-wins-over-bad-published-sha", func(t *testing.T) {
		h := newHost(t, "16")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": httpdURL + "/badsha", "GVISOR_SHA512_PINS": pins(tagBin, binFiles...)})
		assertContains(t, "output", r.Output, "pinned digest")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
	})
	t.Run("bad-pin-line-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_SHA512_PINS": "x86_64/runsc deadbeef"}, `GVISOR_SHA512_PINS`)
		h.assertNothingInstalled()
	})
	t.Run("version-latest-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": "latest"}, `GVISOR_VERSION must be a release tag`)
	})
	t.Run("unknown-arch", func(t *testing.T) {
		h := newHost(t, "16")
		// a real personality change: uname -m says i686
		r := h.runWith([]string{"setarch", "linux32"}, "install-runsc.sh", nil)
		if r.Code == 0 || !strings.Contains(r.Output, "unsupported architecture 'i686'") {
			t.Fatalf("want unknown-arch failure: %s", r)
		}
		h.assertNothingInstalled()
	})
	t.Run("missing-applet-named", func(t *testing.T) {
		h := newHost(t, "16")
		// Debian's busybox sh finds its own applets whatever PATH says, so this case runs the script under dash
		// with a PATH of busybox applets that lacks wget (as an image without wget would).
		dir := filepath.Join(h.Dir, "nowget")
		_ = os.MkdirAll(dir, 0o755)
		ents, _ := os.ReadDir(bbDir)
		for _, e := range ents {
			if e.Name() != "wget" && e.Name() != "sh" {
				_ = os.Symlink(busybox, filepath.Join(dir, e.Name()))
			}
		}
		r := h.runShell("/bin/dash", "install-runsc.sh", map[string]string{"PATH": dir})
		if r.Code == 0 || !strings.Contains(r.Output, "has no 'wget' command") {
			t.Fatalf("want missing-applet failure: %s", r)
		}
		h.assertNothingInstalled()
	})
	t.Run("read-only-install-dir", func(t *testing.T) {
		h := newHost(t, "16")
		d := h.P("/usr/local/bin")
		ro := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"`, d}
		r := h.runWith(ro, "install-runsc.sh", nil)
		if r.Code == 0 || !strings.Contains(r.Output, "not writable (read-only filesystem?)") {
			t.Fatalf("want read-only failure: %s", r)
		}
		if strings.Contains(r.Output, "downloading") {
			t.Fatal("downloaded before checking the install dir")
		}
	})
	t.Run("upgrade-from-older-stamp-no-restart", func(t *testing.T) {
		h := newHost(t, "16")
		h.setConfig(def16())
		h.startContainerd()
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagOld})
		h.assertInstalled("/usr/local/bin", tagOld, binFiles...)
		h.mustRun("configure-containerd.sh", nil)
		restarts := h.restarts()
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "installed gVisor "+tagBin)
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		h.mustRun("configure-containerd.sh", nil)
		if h.restarts() != restarts {
			t.Fatal("containerd restarted for new binaries")
		}
		h.mustRun("ready.sh", nil)
	})
	t.Run("upgrade-binaries-to-archive-and-back", func(t *testing.T) {
		h := newHost(t, "24")
		h.mustRun("install-runsc.sh", nil)
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
		h.mustRun("install-runsc.sh", nil)
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		if h.exists("/usr/local/bin/gvisor-bin") {
			t.Fatal("gvisor-bin of the archive release left behind")
		}
	})
	t.Run("corrupted-binary-reinstalled", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustRun("install-runsc.sh", nil)
		h.write(h.P("/usr/local/bin/gvisor-releases/"+tagBin+"/runsc"), 0o755, "garbage")
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "installed gVisor")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
	})
	t.Run("archive-with-dotdot-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_BASE_URL": httpdURL + "/evil", "GVISOR_SHA512_PINS": "x86_64/gvisor.tar.bz2 " + artSHA["evil/gvisor.tar.bz2"]}, `absolute or '\.\.' paths`)
		h.assertNothingInstalled()
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_BASE_URL": httpdURL + "/evil-late", "GVISOR_SHA512_PINS": "x86_64/gvisor.tar.bz2 " + artSHA["evil-late/gvisor.tar.bz2"]}, `absolute or '\.\.' paths`)
		h.assertNothingInstalled()
	})
	t.Run("wrong-mode-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.mustFail("install-runsc.sh", map[string]string{"GVISOR_MODE": "uninstall"}, `runs only in install mode`)
		h.mustFail("configure-containerd.sh", map[string]string{"GVISOR_MODE": "uninstall"}, `runs only in install mode`)
		h.mustFail("uninstall.sh", nil, `runs only in uninstall mode`)
	})
}
