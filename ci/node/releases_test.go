//go:build nodetest

package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Releases side by side (issue 27): every release in INSTALL_DIR/gvisor-releases/<version>/, runsc.toml naming the
// current one's runsc and state root, an old release kept while its runsc lists a container or a host process runs
// one of its files, collected by the next run once nothing does, and never by the run that switches away from it.
// A "sandbox" here is a state file in the release's root (the fake runsc's `list` reads them, as runsc's does).

const idir = "/usr/local/bin"

// sandbox plants a container of release rel (runsc's state file under STATE_DIR/runsc/<rel>/k8s.io) and returns a
// function that removes it (the pod is deleted).
func (h *Host) sandbox(rel, id string) func() {
	h.t.Helper()
	root := "/run/gvisorgen/runsc/" + rel
	if rel == "legacy" {
		root = "/run/containerd/runsc"
	}
	p := h.P(filepath.Join(root, "k8s.io", id+"_sandbox:"+id+".state"))
	h.write(p, 0o644, "{}")
	return func() { _ = os.Remove(p) }
}

func (h *Host) stampLine(key string) string {
	for _, l := range strings.Split(h.read(idir+"/.gvisorgen-runsc.stamp"), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == key {
			return f[1]
		}
	}
	return ""
}

func (h *Host) assertReleases(want ...string) {
	h.t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := h.releases(idir); !slices.Equal(got, want) {
		h.t.Fatalf("release folders %v, want %v", got, want)
	}
	// the stamp records exactly those (and no collection under way)
	stamp := h.read(idir + "/.gvisorgen-runsc.stamp")
	for _, r := range want {
		assertContains(h.t, "stamp", stamp, "gvisor-releases/"+r+"/runsc\n")
		assertContains(h.t, "stamp", stamp, "rsource "+r+" ")
	}
	if strings.Contains(stamp, "collecting") {
		h.t.Fatalf("stamp still marks a collection:\n%s", stamp)
	}
}

func (h *Host) assertToml(rel string) {
	h.t.Helper()
	toml := h.read("/etc/containerd/runsc.toml")
	assertContains(h.t, "runsc.toml", toml, `binary_name = "`+idir+`/gvisorgen-runsc"`)
	assertContains(h.t, "runsc.toml", toml, `root = "/run/gvisorgen/runsc/`+rel+`"`)
}

func TestReleases(t *testing.T) {
	t.Parallel()
	v := func(tag string) map[string]string { return map[string]string{"GVISOR_VERSION": tag} }

	t.Run("bump-keeps-a-used-release-then-collects-it", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		h.assertToml(tagBin)
		gone := h.sandbox(tagBin, "old-pod")
		r0 := h.restarts()
		// the bump: the archive release beside the running one, runsc.toml switched, no containerd restart
		r := h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "keeping "+idir+"/gvisor-releases/"+tagBin+": still used (container k8s.io/old-pod)")
		h.assertInstalled(idir, tagArch, archFiles...)
		h.mustRun("configure-containerd.sh", v(tagArch))
		h.assertToml(tagArch)
		if n := h.restarts() - r0; n != 0 {
			t.Fatalf("the bump restarted containerd %d times", n)
		}
		h.mustRun("ready.sh", v(tagArch))
		h.assertReleases(tagArch, tagBin)
		// the old release's own files are intact: its sandboxes still run it
		b, _ := os.ReadFile(h.P(idir + "/gvisor-releases/" + tagBin + "/runsc"))
		if sum(b) != artSHA[tagBin+"/runsc"] {
			t.Fatal("the old release's runsc changed")
		}
		// runs while the pod lives keep it; the run after it is gone collects it, state root and all
		r = h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "still used (container k8s.io/old-pod)")
		h.assertReleases(tagArch, tagBin)
		gone()
		r = h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "removed "+idir+"/gvisor-releases/"+tagBin+": no sandbox uses it any more")
		assertContains(t, "output", r.Output, "already installed")
		h.assertReleases(tagArch)
		if h.exists("/run/gvisorgen/runsc/" + tagBin) {
			t.Fatal("the old release's state root was left")
		}
		h.mustRun("ready.sh", v(tagArch))
	})

	t.Run("the-release-switched-from-waits-one-run", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		r := h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "keeping "+idir+"/gvisor-releases/"+tagBin+" until the next run: this run switches away from it")
		h.assertReleases(tagArch, tagBin)
		h.mustRun("configure-containerd.sh", v(tagArch))
		r = h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "no sandbox uses it any more")
		h.assertReleases(tagArch)
	})

	t.Run("rollback-to-a-kept-release-needs-no-download", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		h.sandbox(tagBin, "old-pod")
		h.mustRun("install-runsc.sh", v(tagArch))
		h.mustRun("configure-containerd.sh", v(tagArch))
		newPod := h.sandbox(tagArch, "new-pod")
		// back to tagBin, with the release server unreachable: the kept folder verifies and serves again
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": refusedURL})
		assertContains(t, "output", r.Output, "switching back to it, no download")
		h.assertInstalled(idir, tagBin, binFiles...)
		h.mustRun("configure-containerd.sh", nil)
		h.assertToml(tagBin)
		h.mustRun("ready.sh", nil)
		h.assertReleases(tagArch, tagBin)
		// a kept release that no longer verifies is not trusted: downloaded again
		h.write(h.P(idir+"/gvisor-releases/"+tagArch+"/runsc"), 0o755, "tampered")
		newPod()
		h.sandbox(tagBin, "old-pod-2")
		r = h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "downloading")
		h.assertInstalled(idir, tagArch, archFiles...)
	})

	t.Run("more-used-releases-than-keepOld-refused-before-download", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		h.sandbox(tagBin, "pod-a")
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch, "KEEP_OLD_RELEASES": "1"})
		h.mustRun("configure-containerd.sh", v(tagArch))
		h.sandbox(tagArch, "pod-b")
		stamp := h.read(idir + "/.gvisorgen-runsc.stamp")
		r := h.mustFail("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArchDir, "KEEP_OLD_RELEASES": "1"},
			`refusing to install gVisor `+tagArchDir+`: 2 older release\(s\) on this node still serve sandboxes \(`+tagArch+` `+tagBin+`|`+tagBin+` `+tagArch+`\), more than KEEP_OLD_RELEASES=1`)
		if strings.Contains(r.Output, "downloading") {
			t.Fatal("downloaded before refusing")
		}
		if h.read(idir+"/.gvisorgen-runsc.stamp") != stamp {
			t.Fatal("the stamp changed")
		}
		h.assertReleases(tagArch, tagBin)
		h.mustRun("ready.sh", v(tagArch))
		// with the default bound it goes through
		h.mustRun("install-runsc.sh", v(tagArchDir))
		h.assertReleases(tagArch, tagBin, tagArchDir)
	})

	t.Run("a-process-of-the-release-keeps-it", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		h.mustRun("install-runsc.sh", v(tagArch))
		h.mustRun("configure-containerd.sh", v(tagArch))
		// a sandbox process whose state is gone (its runsc lists nothing) still runs a file of the release
		bb, err := os.ReadFile("/usr/bin/sleep") // coreutils: runs whatever its name
		if err != nil {
			t.Fatal(err)
		}
		h.write(h.P(idir+"/gvisor-releases/"+tagBin+"/sandbox-process"), 0o755, string(bb))
		cmd := exec.Command(h.hostExec("hostexec"), idir+"/gvisor-releases/"+tagBin+"/sandbox-process", "120")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
		time.Sleep(200 * time.Millisecond)
		r := h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "still used (process ")
		assertContains(t, "output", r.Output, "runs "+idir+"/gvisor-releases/"+tagBin+"/sandbox-process")
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		r = h.mustRun("install-runsc.sh", v(tagArch))
		assertContains(t, "output", r.Output, "no sandbox uses it any more")
		// the file gvisorgen did not install stays, and its folder with it
		assertContains(t, "output", r.Output, "holds files gvisorgen did not install; left in place")
		if !h.exists(idir + "/gvisor-releases/" + tagBin + "/sandbox-process") {
			t.Fatal("a file gvisorgen did not install was removed")
		}
	})

	t.Run("unversioned-install-moves-to-releases-with-a-sandbox-running", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "24")
		h.setConfig(def24())
		h.startContainerd()
		h.mustRun("configure-containerd.sh", nil) // the handler, as the unversioned install had it
		h.legacyInstall(tagOld)
		gone := h.sandbox("legacy", "legacy-pod")
		r0 := h.restarts()
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "keeping the unversioned install (runsc in "+idir+"): still used (container k8s.io/legacy-pod)")
		h.assertInstalled(idir, tagBin, binFiles...)
		h.mustRun("configure-containerd.sh", nil)
		h.assertToml(tagBin)
		if n := h.restarts() - r0; n != 0 {
			t.Fatalf("moving to versioned releases restarted containerd %d times", n)
		}
		h.mustRun("ready.sh", nil)
		if b, _ := os.ReadFile(h.P(idir + "/runsc")); sum(b) != artSHA[tagOld+"/runsc"] {
			t.Fatal("the unversioned runsc its sandbox runs was replaced")
		}
		gone()
		r = h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "removed the unversioned install (runsc in "+idir+"): no sandbox uses it any more")
		if h.exists(idir + "/runsc") {
			t.Fatal("the unversioned runsc was left")
		}
		h.assertReleases(tagBin)
		// and back by uninstall: nothing of gvisorgen's left
		h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
		h.assertNothingInstalled()
		h.mustRun("ready.sh", map[string]string{"GVISOR_MODE": "uninstall"})
	})

	t.Run("uninstall-removes-every-release", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "24")
		h.setConfig(def24())
		h.startContainerd()
		h.legacyInstall(tagOld)
		legacyPod := h.sandbox("legacy", "legacy-pod")
		h.mustRun("install-runsc.sh", nil)
		h.mustRun("configure-containerd.sh", nil)
		binPod := h.sandbox(tagBin, "bin-pod")
		h.mustRun("install-runsc.sh", v(tagArch))
		h.mustRun("configure-containerd.sh", v(tagArch))
		h.assertReleases(tagArch, tagBin)
		legacyPod()
		binPod()
		h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
		h.assertNothingInstalled()
		if h.exists("/run/gvisorgen/runsc") {
			t.Fatal("release state roots left")
		}
	})
}

// legacyInstall lays out what gvisorgen installed before versioned releases: runsc and the shim directly in the
// install dir, a stamp naming them, runsc.toml without binary_name (the shim ran "runsc" from PATH).
func (h *Host) legacyInstall(tag string) {
	h.t.Helper()
	var files []string
	for _, f := range binFiles {
		b := fakeBinaryOf(h.t, tag, f)
		h.write(h.P(idir+"/"+f), 0o755, string(b))
		files = append(files, "file "+sum(b)+" "+f)
	}
	h.write(h.P(idir+"/.gvisorgen-runsc.stamp"), 0o644, "# gvisorgen: what is installed in "+idir+" (written last by install-runsc). Do not edit.\n"+
		"version "+tag+"\narch x86_64\nlayout binaries\n"+
		"source runsc "+artSHA[tag+"/runsc"]+" pinned\nsource containerd-shim-runsc-v1 "+artSHA[tag+"/containerd-shim-runsc-v1"]+" pinned\n"+
		strings.Join(files, "\n")+"\n")
	h.write(h.P("/etc/containerd/runsc.toml"), 0o644, "# Managed by gvisorgen: options of containerd-shim-runsc-v1 for the runsc runtime. Overwritten on every run.\n[runsc_config]\n")
}

// fakeBinaryOf: the bytes the test release server serves for tag's binary f.
func fakeBinaryOf(t *testing.T, tag, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, "serve", "release", tag, "x86_64", f))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
