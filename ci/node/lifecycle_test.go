//go:build nodetest

package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fullInstall: the host runs containerd on cfg, then install-runsc + configure-containerd succeed.
func fullInstall(t *testing.T, ver, cfg string) *Host {
	h := installedHost(t, ver, cfg, false)
	h.mustRun("configure-containerd.sh", nil)
	return h
}

// lifecycleNodes are the nodes the lifecycle cases run on, one per way the runtime reaches containerd: 1.6 and 2.4.2
// with the block in place (2.4.2 on a config that imports nothing), and 2.2.9 with its own default config, which
// imports conf.d: the drop-in.
type lifecycleNode struct {
	name, ver string
	config    func() string
}

var lifecycleNodes = []lifecycleNode{
	{"16", "16", def16},
	{"24", "24", def24},
	{"22-dropin", "22", func() string { return realDefault("22") }},
}

// wantPath fails unless the installed node took the node's path: the drop-in on 22-dropin, the block elsewhere.
func (n lifecycleNode) wantPath(t *testing.T, h *Host) {
	t.Helper()
	if dropin := strings.HasSuffix(n.name, "dropin"); h.exists(dropIn) != dropin {
		t.Fatalf("%s: drop-in %s there: %v, want %v", n.name, dropIn, h.exists(dropIn), dropin)
	}
}

func TestRestartFailure(t *testing.T) {
	t.Parallel()
	t.Run("rollback-when-containerd-does-not-come-back/1.6", func(t *testing.T) {
		h := newHost(t, "16")
		h.setConfig(def16())
		h.startContainerd()
		h.mustRun("install-runsc.sh", nil)
		h.knob("fail-restarts", "1")
		before := h.restarts()
		h.mustFail("configure-containerd.sh", nil, `rolled back to the previous config and containerd runs again`)
		if h.config() != def16() {
			t.Fatalf("config not rolled back:\n%s", h.config())
		}
		if got := h.restarts() - before; got != 2 {
			t.Fatalf("want 2 restarts (change, rollback), got %d", got)
		}
		if !h.criOK() {
			t.Fatal("containerd not back after the rollback")
		}
		h.mustFail("ready.sh", nil, "not ready")
		// the next attempt (the init container's retry) succeeds
		h.mustRun("configure-containerd.sh", nil)
		h.checkReal(true)
		h.mustRun("ready.sh", nil)
	})
	t.Run("rollback-then-still-down-says-so/2.4", func(t *testing.T) {
		h := newHost(t, "24")
		h.setConfig(def24())
		h.startContainerd()
		h.knob("fail-restarts", "2")
		h.mustFail("configure-containerd.sh", nil, `does not come back either; the node needs attention`)
		if h.config() != def24() {
			t.Fatalf("config not rolled back")
		}
	})
	t.Run("rollback-of-a-missing-config-removes-it/2.4", func(t *testing.T) {
		h := newHost(t, "24")
		h.startContainerd()
		h.knob("fail-restarts", "1")
		h.mustFail("configure-containerd.sh", nil, `rolled back`)
		if h.exists("/etc/containerd/config.toml") {
			t.Fatal("config created from defaults left after the rollback")
		}
		if !h.criOK() {
			t.Fatal("containerd not back")
		}
	})
	t.Run("crashed-before-restart-restarts-on-next-run/1.6", func(t *testing.T) {
		h := fullInstall(t, "16", def16())
		// a run that wrote the config but died before restarting containerd leaves neither the applied marker nor
		// the record of a restart for these bytes
		for _, f := range []string{"/etc/containerd/config.toml.gvisorgen-applied", "/run/gvisorgen/restarted-for"} {
			if err := os.Remove(h.P(f)); err != nil {
				t.Fatal(err)
			}
		}
		h.mustFail("ready.sh", nil, "never seen running")
		before := h.restarts()
		r := h.mustRun("configure-containerd.sh", nil)
		assertContains(t, "output", r.Output, "never seen running with it: restarting")
		if h.restarts() != before+1 {
			t.Fatal("no restart")
		}
		h.mustRun("ready.sh", nil)
	})
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	for _, n := range lifecycleNodes {
		t.Run(n.name, func(t *testing.T) {
			h := newHost(t, n.ver)
			cfg := n.config()
			h.setConfig(cfg)
			h.startContainerd()
			var wg sync.WaitGroup
			res := make([]Result, 4)
			for i := range res {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					script := "install-runsc.sh"
					if i >= 2 {
						script = "configure-containerd.sh"
					}
					// what is tested is that the runs take turns, not the lock's timeout (TestLock's): four runs one after
					// another took over 20 s under load (average 10 on 2 cores), and the last gave up waiting
					res[i] = h.run(script, map[string]string{"LOCK_TIMEOUT_SECONDS": "180"})
				}(i)
			}
			wg.Wait()
			for i, r := range res {
				if r.Code != 0 {
					t.Fatalf("run %d failed: %s", i, r)
				}
			}
			c := h.config()
			n.wantPath(t, h)
			if strings.HasSuffix(n.name, "dropin") && c != cfg {
				t.Fatalf("the drop-in node's config changed:\n%s", c)
			} else if !strings.HasSuffix(n.name, "dropin") && countLines(c, beginMarker) != 1 {
				t.Fatalf("want one block after concurrent runs:\n%s", c)
			}
			if h.restarts() != 1 {
				t.Fatalf("want 1 restart, got %d", h.restarts())
			}
			h.checkReal(true)
			h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
			if h.exists("/run/gvisorgen/lock") {
				t.Fatal("lock left behind")
			}
			h.mustRun("ready.sh", nil)
		})
	}
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

func pidNS(pid string) string {
	s, _ := os.Readlink("/proc/" + pid + "/ns/pid")
	return s
}

func startTime(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ") ")+2:])
	return f[19]
}

func (h *Host) plantLock(holder string) {
	h.write(h.P("/run/gvisorgen/lock/holder"), 0o644, holder+"\n")
}

// deadPid is the pid of a process that has exited.
func deadPid() int {
	c := exec.Command("true")
	_ = c.Run()
	return c.Process.Pid
}

// liveHolder starts a process in this pid namespace and returns the lock holder line that names it (as a
// configure-containerd run would write it) and a stop that ends it; the test's cleanup ends it too.
func liveHolder(t *testing.T) (line string, stop func()) {
	t.Helper()
	p := exec.Command("sleep", "60")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = p.Process.Kill(); _ = p.Wait() }) }
	t.Cleanup(stop)
	pid := p.Process.Pid
	return fmt.Sprintf("%s %s %d %s node-a 1 configure-containerd", bootID(), pidNS("self"), pid, startTime(pid)), stop
}

func TestLock(t *testing.T) {
	t.Parallel()
	self := pidNS("self")
	t.Run("stale-dead-holder-same-pidns-broken", func(t *testing.T) {
		h := newHost(t, "16")
		h.plantLock(fmt.Sprintf("%s %s %d 12345 node-a 1 install-runsc", bootID(), self, deadPid()))
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
	})
	t.Run("stale-other-boot-broken", func(t *testing.T) {
		h := newHost(t, "16")
		h.plantLock(fmt.Sprintf("00000000-0000-0000-0000-000000000000 %s 1 1 node-a 1 install-runsc", self))
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
	})
	t.Run("stale-other-pidns-without-processes-broken", func(t *testing.T) {
		h := newHost(t, "16")
		h.plantLock(fmt.Sprintf("%s pid:[1] 1 1 node-a 1 install-runsc", bootID()))
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
	})
	t.Run("empty-lock-dir-taken-at-once", func(t *testing.T) {
		// an older installer killed between its mkdir and writing the holder, or a run killed while releasing: an
		// empty folder holds no lock (the staged lock is renamed onto it)
		h := newHost(t, "16")
		_ = os.MkdirAll(h.P("/run/gvisorgen/lock"), 0o755)
		r := h.mustRun("install-runsc.sh", nil)
		assertNotContains(t, "output", r.Output, "waiting for the lock")
	})
	t.Run("holder-moved-aside-by-a-dead-breaker-put-back-then-broken", func(t *testing.T) {
		h := newHost(t, "16")
		h.write(h.P("/run/gvisorgen/lock/holder.broken."+fmt.Sprint(deadPid())), 0o644,
			fmt.Sprintf("%s %s %d 12345 node-a 1 install-runsc\n", bootID(), self, deadPid()))
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "put back the lock's holder file that run")
		assertContains(t, "output", r.Output, "broke a stale lock")
		if h.exists("/run/gvisorgen/lock") {
			t.Fatal("lock left behind")
		}
	})
	t.Run("holder-moved-aside-by-a-dead-breaker-put-back-and-waited-for", func(t *testing.T) {
		h := newHost(t, "16")
		line, _ := liveHolder(t)
		h.write(h.P("/run/gvisorgen/lock/holder.broken."+fmt.Sprint(deadPid())), 0o644, line+"\n")
		h.mustFail("install-runsc.sh", map[string]string{"LOCK_TIMEOUT_SECONDS": "2"}, `still holds /run/gvisorgen/lock after 2s`)
		h.assertNothingInstalled()
		if got := strings.TrimSpace(h.read("/run/gvisorgen/lock/holder")); got != line {
			t.Fatalf("the live holder's line was not put back: %q", got)
		}
	})
	t.Run("live-holder-same-pidns-waited-for-then-gone", func(t *testing.T) {
		h := newHost(t, "16")
		line, stop := liveHolder(t)
		h.plantLock(line)
		h.mustFail("install-runsc.sh", map[string]string{"LOCK_TIMEOUT_SECONDS": "2"}, `still holds /run/gvisorgen/lock after 2s`)
		h.assertNothingInstalled()
		stop()
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
	})
	t.Run("live-holder-other-pidns-waited-for-then-gone", func(t *testing.T) {
		h := newHost(t, "16")
		// a holder in its own pid namespace, as another container's process would be
		holder := exec.Command("unshare", "--pid", "--fork", "--kill-child", "sleep", "60")
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
		var ns string
		for i := 0; i < 100 && ns == ""; i++ {
			kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", holder.Process.Pid, holder.Process.Pid))
			if f := strings.Fields(string(kids)); len(f) > 0 {
				ns = pidNS(f[0])
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ns == "" || ns == self {
			t.Fatalf("no separate pid namespace (%q)", ns)
		}
		h.plantLock(fmt.Sprintf("%s %s 1 999 node-b 1 install-runsc", bootID(), ns))
		h.mustFail("install-runsc.sh", map[string]string{"LOCK_TIMEOUT_SECONDS": "2"}, `still holds`)
		_ = holder.Process.Kill()
		_ = holder.Wait()
		// unshare's child dies with it (SIGKILL of pid 1 of the namespace)
		time.Sleep(200 * time.Millisecond)
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
	})
	t.Run("killed-run-leaves-no-lock-forever", func(t *testing.T) {
		h := newHost(t, "16")
		// a run killed in the middle of a download (SIGKILL: no trap runs), with every process of the run, as a
		// container's kill does. The kill waits for the download to be in flight (the fault server's /hang/ got
		// the request), not for a moment: the run then holds the lock and has its scratch folder (the download's
		// target), which the next run must remove (TestKilledRun kills right after each step that makes a path).
		cmd := exec.Command(filepath.Join(bbDir, "sh"), filepath.Join(scriptsDir, "install-runsc.sh"))
		tok := filepath.Base(h.Dir) + "-" + filepath.Base(filepath.Dir(h.Dir))
		hits := counter(&hangHits, tok)
		cmd.Env = h.scriptEnv(map[string]string{"GVISOR_BASE_URL": faultURL + "/hang/" + tok, "DOWNLOAD_TIMEOUT_SECONDS": "30",
			"GVISOR_SHA512_PINS": autoPins(tagBin)})
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		hangs := hits.Load()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(2 * time.Minute); hits.Load() == hangs; {
			select {
			case err := <-done:
				t.Fatalf("the run ended (%v) before its download", err)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Fatal("no download in flight after 2 minutes")
			}
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if b, err := os.ReadFile(h.P("/run/gvisorgen/lock/holder")); err != nil || len(b) == 0 {
			t.Fatalf("the killed run held no lock (%v)", err)
		}
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "broke a stale lock")
		assertContains(t, "output", r.Output, "left by an earlier run that did not finish")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		if ents, _ := os.ReadDir(filepath.Join(h.Dir, "tmp")); len(ents) != 0 {
			t.Fatalf("scratch left in TMPDIR: %v", ents)
		}
	})
}

func TestReady(t *testing.T) {
	t.Parallel()
	h := newHost(t, "24")
	h.setConfig(def24())
	h.startContainerd()
	h.mustFail("ready.sh", nil, "no stamp")
	h.mustRun("install-runsc.sh", nil)
	h.mustFail("ready.sh", nil, "never seen running")
	h.mustRun("configure-containerd.sh", nil)
	h.mustRun("ready.sh", nil)
	h.mustFail("ready.sh", map[string]string{"GVISOR_VERSION": tagOld}, "does not name "+tagOld)
	// someone edits the config after us
	cfg := h.config()
	h.setConfig(cfg + "# edited\n")
	h.mustFail("ready.sh", nil, "changed since configure-containerd validated it")
	h.setConfig(cfg)
	h.mustRun("ready.sh", nil)
	// a binary vanishes
	_ = os.Rename(h.P("/usr/local/bin/containerd-shim-runsc-v1"), h.P("/usr/local/bin/shim.away"))
	h.mustFail("ready.sh", nil, "containerd-shim-runsc-v1 is missing")
	_ = os.Rename(h.P("/usr/local/bin/shim.away"), h.P("/usr/local/bin/containerd-shim-runsc-v1"))
	// a binary changes in place (same name, other bytes)
	shim := h.P("/usr/local/bin/containerd-shim-runsc-v1")
	orig, _ := os.ReadFile(shim)
	h.write(shim, 0o755, string(orig)+"x")
	h.mustFail("ready.sh", nil, "containerd-shim-runsc-v1 no longer has the sha512 the stamp records")
	h.write(shim, 0o755, string(orig))
	// runsc.toml edited by hand
	rt := h.read("/etc/containerd/runsc.toml")
	h.write(h.P("/etc/containerd/runsc.toml"), 0o644, rt+"debug = true\n")
	h.mustFail("ready.sh", nil, "runsc.toml changed since configure-containerd wrote it")
	h.write(h.P("/etc/containerd/runsc.toml"), 0o644, rt)
	h.mustRun("ready.sh", nil)
	// The probe reads files only (issue 16): containerd down does not flip it (configure-containerd verified CRI at
	// install; a containerd that is down makes kubelet report the node NotReady itself).
	if out, err := h.hostCmd("systemctl", "stop", "containerd"); err != nil {
		t.Fatal(err, out)
	}
	r := h.mustRun("ready.sh", nil)
	if strings.Contains(r.Output, "containerd") {
		t.Fatalf("the probe asked containerd: %s", r)
	}
	// and the last init container does verify CRI: with containerd down it refuses, naming the cause
	h.mustFail("configure-containerd.sh", nil, `containerd does not answer on /run/containerd/containerd.sock`)
	h.startContainerd()
	h.mustRun("ready.sh", nil)
}

// TestReadyUnprivileged: ready.sh as the runsc-ready container runs it: another user than root (65534), no
// capabilities, the host folders mounted read-only, and HOST_EXEC unusable (no host command may run).
func TestReadyUnprivileged(t *testing.T) {
	t.Parallel()
	for _, n := range lifecycleNodes {
		t.Run(n.name, func(t *testing.T) {
			h := fullInstall(t, n.ver, n.config())
			n.wantPath(t, h)
			// the test's temp dirs are 0700; the node's real folders are world-readable
			for d := h.Root; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
				_ = os.Chmod(d, 0o755)
			}
			for _, d := range []string{"etc/containerd", "usr/local/bin", "run"} {
				_ = os.Chmod(h.P(d), 0o755)
			}
			ro := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
				`for d in "$0/etc/containerd" "$0/usr/local/bin" "$0/run/gvisorgen"; do mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 1; done
exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$@"`, h.Root}
			// no host command can run: HOST_EXEC's first word must exist (gvz_load_env), the flag makes it fail
			env := map[string]string{"HOST_EXEC": "nsenter --no-such-flag", "HOST_EXEC_NET": "nsenter --no-such-flag"}
			r := h.runWith(ro, "ready.sh", env)
			if r.Code != 0 {
				t.Fatalf("unprivileged probe not ready on an installed node: %s", r)
			}
			// it still says no when the state on disk is wrong
			c := h.config()
			h.setConfig(c + "# edited\n")
			r = h.runWith(ro, "ready.sh", env)
			if r.Code == 0 || !strings.Contains(r.Output, "changed since configure-containerd validated it") {
				t.Fatalf("want not ready: %s", r)
			}
			h.setConfig(c)
			// a config only root can read: the message says so
			_ = os.Chmod(h.P("/etc/containerd/config.toml"), 0o600)
			r = h.runWith(ro, "ready.sh", env)
			if r.Code == 0 || !strings.Contains(r.Output, "cannot read /etc/containerd/config.toml (mode 600)") {
				t.Fatalf("want the unreadable config named: %s", r)
			}
		})
	}
}

// ociImage: a minimal OCI image archive (one layer with one file) for `ctr images import`.
func ociImage(ref string) []byte {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	_ = lw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
	_, _ = lw.Write([]byte("hi\n"))
	_ = lw.Close()
	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		s := sha256.Sum256(b)
		d := hex.EncodeToString(s[:])
		blobs[d] = b
		return d, len(b)
	}
	ld, ls := add(layer.Bytes())
	cd, cs := add([]byte(fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{"Cmd":["/hello"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}`, ld)))
	md, ms := add([]byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}`, cd, cs, ld, ls)))
	index := fmt.Sprintf(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}]}`, md, ms, ref, ref)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	put := func(name string, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(b)
	}
	put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	put("index.json", []byte(index))
	for _, d := range sortedKeys(blobs) {
		put("blobs/sha256/"+d, blobs[d])
	}
	_ = tw.Close()
	return out.Bytes()
}

func TestUninstall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, ver, cfg string }{{"default", "16", def16()}, {"default", "24", def24()}, {"default-dropin", "22", realDefault("22")}, {"no-runtimes", "16", cfgV2NoRuntimes}} {
		t.Run("removes-everything-restores-config/"+c.name+"/"+c.ver, func(t *testing.T) {
			h := fullInstall(t, c.ver, c.cfg)
			if h.exists(dropIn) != strings.HasSuffix(c.name, "dropin") {
				t.Fatalf("drop-in %s there: %v, want it only on the drop-in node", dropIn, h.exists(dropIn))
			}
			h.Env["GVISOR_MODE"] = "uninstall"
			h.mustFail("ready.sh", nil, "still there")
			before := h.restarts()
			h.mustRun("uninstall.sh", nil)
			if got := h.config(); got != c.cfg {
				t.Fatalf("config after uninstall differs from the original:\n%s", got)
			}
			for _, p := range []string{"/usr/local/bin/runsc", "/usr/local/bin/containerd-shim-runsc-v1", "/usr/local/bin/.gvisorgen-runsc.stamp",
				"/etc/containerd/runsc.toml", "/etc/containerd/config.toml.gvisorgen-applied", dropIn} {
				if h.exists(p) {
					t.Fatalf("%s left after uninstall", p)
				}
			}
			if h.restarts() != before+1 {
				t.Fatal("want one restart")
			}
			h.checkReal(false)
			h.mustRun("ready.sh", nil)
			// again: nothing to do, no restart
			h.mustRun("uninstall.sh", nil)
			if h.restarts() != before+1 {
				t.Fatal("second uninstall restarted containerd")
			}
		})
	}
	t.Run("archive-release-removes-gvisor-bin/2.4", func(t *testing.T) {
		h := newHost(t, "24")
		h.setConfig(def24())
		h.startContainerd()
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
		h.mustRun("configure-containerd.sh", map[string]string{"GVISOR_VERSION": tagArch})
		h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
		ents, _ := os.ReadDir(h.P("/usr/local/bin"))
		if len(ents) != 0 {
			t.Fatalf("install dir not empty: %v", ents)
		}
	})
	t.Run("handwritten-runtime-left-alone/1.6", func(t *testing.T) {
		cfg := def16() + "\n" + tblV2 + "\n  runtime_type = \"io.containerd.runsc.v1\"\n"
		h := newHost(t, "16")
		h.setConfig(cfg)
		h.startContainerd()
		h.mustRun("install-runsc.sh", nil)
		h.mustRun("configure-containerd.sh", adopt)
		h.mustRun("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"})
		if h.config() != cfg {
			t.Fatal("hand-written runtime touched")
		}
	})
	for _, n := range lifecycleNodes {
		t.Run("refused-while-a-sandbox-runs/"+n.name, func(t *testing.T) {
			cfg := n.config()
			h := fullInstall(t, n.ver, cfg)
			n.wantPath(t, h)
			img := filepath.Join(h.Dir, "img.tar")
			if err := os.WriteFile(img, ociImage("docker.io/library/tiny:1"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"ctr", "-n", "k8s.io", "images", "import", img},
				{"ctr", "-n", "k8s.io", "containers", "create", "--runtime", "io.containerd.runsc.v1", "docker.io/library/tiny:1", "sandbox-1"},
			} {
				if out, err := h.hostCmd(args...); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
			}
			stamp := h.read("/usr/local/bin/.gvisorgen-runsc.stamp")
			h.Env["GVISOR_MODE"] = "uninstall"
			before := h.restarts()
			h.mustFail("uninstall.sh", nil, `1 stopped gVisor container\(s\) still on this node \(k8s.io/sandbox-1 \): kubelet removes`)
			// still installed: the block in the config, or the drop-in beside it
			if (h.config() == cfg && !h.exists(dropIn)) || h.read("/usr/local/bin/.gvisorgen-runsc.stamp") != stamp || h.restarts() != before {
				t.Fatal("uninstall changed something while refusing")
			}
			if out, err := h.hostCmd("ctr", "-n", "k8s.io", "containers", "rm", "sandbox-1"); err != nil {
				t.Fatal(err, out)
			}
			h.mustRun("uninstall.sh", nil)
			if h.config() != cfg || h.exists(dropIn) {
				t.Fatal("config not restored, or the drop-in left")
			}
		})
	}
}
