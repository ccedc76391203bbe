//go:build nodetest

package node

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Nothing the suite starts outlives it. A fake host's containerd is detached (setsid, a child of a fake systemctl
// that exits, as systemd's would be), so neither a test's end nor the test binary's death takes it along: t.Cleanup
// stops it, but go test's -timeout panics past every cleanup, and a Ctrl-C kills the binary before them. The reaper
// finds the run's processes by the folders they name (command line or environment): the run's scratch (every
// script's PATH is its busybox folder; busybox httpd serves from it) and every fake host's folder (containerd's
// --root, HOST_ROOT, the HOST_EXEC wrappers).

// suiteDirs: the folders whose processes are this run's (a set of paths).
var suiteDirs sync.Map

func trackDir(dir string) { suiteDirs.Store(dir, struct{}{}) }

// trackedDirs: the tracked folders, each with a trailing slash (as processes name what is inside them).
func trackedDirs() [][]byte {
	var dirs [][]byte
	suiteDirs.Range(func(k, _ any) bool {
		dirs = append(dirs, []byte(k.(string)+"/"))
		return true
	})
	return dirs
}

// reapSuite kills (SIGKILL) every process but this one whose command line or environment names a tracked folder,
// sweeping again while a sweep finds new ones (a fake systemctl killed mid-start has started its containerd by the
// next), and returns what it killed as "comm[pid]".
func reapSuite() []string {
	dirs := trackedDirs()
	var killed []string
	seen := map[int]bool{}
	for sweep := 0; sweep < 5; sweep++ {
		n := len(killed)
		for _, p := range suiteProcs(dirs) {
			if !seen[p.pid] && p.proc.Kill() == nil {
				seen[p.pid] = true
				killed = append(killed, fmt.Sprintf("%s[%d]", p.comm, p.pid))
			}
			_ = p.proc.Release()
		}
		if len(killed) == n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return killed
}

// suiteRunning: a process of the run is still running.
func suiteRunning() bool {
	ps := suiteProcs(trackedDirs())
	for _, p := range ps {
		_ = p.proc.Release()
	}
	return len(ps) > 0
}

type suiteProc struct {
	pid  int
	comm string      // read before the kill: a killed orphan is reaped at once by its new parent
	proc *os.Process // a pidfd, opened before the process was judged: a PID reused since is not signalled
}

// suiteProcs: the live processes, this one excepted, that name one of dirs.
func suiteProcs(dirs [][]byte) []suiteProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var ps []suiteProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		proc, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		mine := false
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			mine = mine || containsAny(b, dirs)
		}
		if mine {
			ps = append(ps, suiteProc{pid: pid, comm: comm(pid), proc: proc})
		} else {
			_ = proc.Release()
		}
	}
	return ps
}

func containsAny(b []byte, subs [][]byte) bool {
	for _, s := range subs {
		if bytes.Contains(b, s) {
			return true
		}
	}
	return false
}

// removeSuiteDirs removes the tracked folders (for a host's, also the test's folder around it once empty), for the
// ends that skip the cleanups that would have: call it after reapSuite.
func removeSuiteDirs() {
	suiteDirs.Range(func(k, _ any) bool {
		d := k.(string)
		_ = os.RemoveAll(d)
		if d != work {
			_ = os.Remove(filepath.Dir(d))
		}
		return true
	})
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// guardSuite arms the reaper for the two ends that skip the tests' cleanups: go test's -timeout (the reaper runs
// shortly before its panic) and SIGINT / SIGTERM (the reaper runs, then the signal takes its default course). Call it
// just before m.Run, which starts the -timeout clock; the returned func disarms both.
func guardSuite() (disarm func()) {
	var timer *time.Timer
	if f := flag.Lookup("test.timeout"); f != nil {
		// before the panic, with time to kill and print
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			margin := min(30*time.Second, d/4)
			timer = time.AfterFunc(d-margin, func() {
				fmt.Fprintf(os.Stderr, "node suite: go test's -timeout %s ends the run in %s, past every test's cleanup: "+
					"killed what the run still ran: %s\n", d, margin, strings.Join(reapSuite(), " "))
				removeSuiteDirs()
			})
		}
	}
	sigs := make(chan os.Signal, 1)
	// an ignored SIGINT (a run started in the background by a shell) stays ignored: after signal.Reset the re-raised
	// one would be too, and the run would go on without its fixture
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "node suite: %v: killed what the run still ran: %s\n", s, strings.Join(reapSuite(), " "))
			removeSuiteDirs()
			signal.Reset(s)
			_ = syscall.Kill(os.Getpid(), s.(syscall.Signal))
			time.Sleep(time.Second)
			os.Exit(128 + int(s.(syscall.Signal))) // not reached: the signal's default action ends the run
		case <-done:
		}
	}()
	return func() {
		if timer != nil {
			timer.Stop()
		}
		signal.Stop(sigs)
		close(done)
	}
}

// TestReaped: a run that ends past its tests' cleanups leaves no fake host's containerd behind, nor its folders. The
// test binary runs itself on one case (TestReapedChild: a host's containerd started, then it waits forever) and is
// ended the two ways that skip t.Cleanup: SIGTERM, and its own -timeout's panic.
func TestReaped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		timeout string
		want    string // in the child's output
	}{
		{name: "SIGTERM", timeout: "10m", want: "node suite: terminated: killed what the run still ran: "},
		// the reaper fires 45 s into the child's tests: time enough for one containerd to start on a loaded machine
		{name: "timeout", timeout: "60s", want: "node suite: go test's -timeout 1m0s ends the run in 15s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "containerd.pid")
			// the child and its containerd name this folder in their environment: this run's reaper takes them too
			trackDir(filepath.Dir(pidFile))
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0], "-test.run", "^TestReapedChild$", "-test.timeout", c.timeout)
			cmd.Env = append(os.Environ(), "GVZ_REAP_CHILD="+pidFile)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			pid := 0
			var dirs []string
			var ctrd *os.Process // a pidfd: killed at the end if it is still that containerd, whatever its PID is by then
		wait:
			for len(dirs) < 2 {
				select {
				case err := <-exited:
					t.Fatalf("the child ended (%v) before its containerd ran:\n%s", err, out.String())
				case <-time.After(50 * time.Millisecond):
				}
				b, _ := os.ReadFile(pidFile)
				if f := strings.Fields(string(b)); len(f) == 3 && strings.HasSuffix(string(b), "\n") {
					pid, _ = strconv.Atoi(f[0])
					dirs = f[1:]
					if p, err := os.FindProcess(pid); err == nil && alive(pid) {
						ctrd = p
						break wait
					}
					_ = cmd.Process.Kill()
					<-exited
					t.Fatalf("the child's containerd (%d) is not running:\n%s", pid, out.String())
				}
			}
			defer func() { _ = ctrd.Kill() }()
			if c.name == "SIGTERM" {
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			err := <-exited
			if err == nil {
				t.Fatalf("the child passed:\n%s", out.String())
			}
			for i := 0; i < 100 && alive(pid); i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("the fake host's containerd (%d) outlived the run (%v):\n%s", pid, err, out.String())
			}
			for _, d := range dirs {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("the run's folder %s outlived it", d)
					_ = os.RemoveAll(d)
				}
			}
			if !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), fmt.Sprintf("containerd[%d]", pid)) {
				t.Errorf("no %q naming containerd[%d] in:\n%s", c.want, pid, out.String())
			}
		})
	}
}

// TestReapedChild is TestReaped's child (it returns at once unless GVZ_REAP_CHILD names the file for its
// containerd's PID).
func TestReapedChild(t *testing.T) {
	f := os.Getenv("GVZ_REAP_CHILD")
	if f == "" {
		return
	}
	h := newHost(t, "24")
	h.startContainerd()
	b, err := os.ReadFile(filepath.Join(h.Dir, "containerd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	// the PID, then the folders that must be gone after the run: the run's scratch and the host's
	if err := os.WriteFile(f, fmt.Appendf(b, "%s\n%s\n", work, h.Dir), 0o644); err != nil {
		t.Fatal(err)
	}
	select {}
}
