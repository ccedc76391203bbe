//go:build nodetest

package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The lock's interleavings, made deterministic (issue 26's flake hunt found, under load, a run that broke a stale
// lock renaming away the fresh lock another run had just made, before that run wrote its holder: the other run died).
// Each run here is lib.sh's lock as the scripts take it, driven by a small script that sources lib.sh: it takes the
// lock, copies the holder line it sees to DIR/held, waits for DIR/release, and releases it (exit trap). With
// GVZT_PAUSE="APPLET PATTERN" (mv or rm) it stops once before that applet's first call whose first operand matches
// the pattern (after writing DIR/paused) until DIR/go exists: a function named like the applet wins over it in busybox sh, and the product scripts have no
// test-only path. The driver is named like an installer script ($0), as the leftover sweep recognises a live run.
const lockDriver = `set -eu
. "$GVISORGEN_SCRIPTS/lib.sh"
gvz_load_env
GVZ_NAME=lock-driver
_gvzt_pause() {
    [ "$1" = "${GVZT_PAUSE%% *}" ] || return 0
    shift
    for _a in "$@"; do
        case $_a in -*) continue ;; esac
        # shellcheck disable=SC2254 # the pattern comes from the test
        case $_a in ${GVZT_PAUSE#* })
            if [ ! -e "$GVZT_DIR/paused" ]; then
                : >"$GVZT_DIR/paused"
                while [ ! -e "$GVZT_DIR/go" ]; do sleep 0.02; done
            fi ;;
        esac
        return 0
    done
}
if [ -n "${GVZT_PAUSE:-}" ]; then
    mv() { _gvzt_pause mv "$@"; command mv "$@"; }
    rm() { _gvzt_pause rm "$@"; command rm "$@"; }
fi
gvz_setup_traps
gvz_lock
cat "$GVZ_LOCK_DIR/holder" >"$GVZT_DIR/held.tmp"
command mv "$GVZT_DIR/held.tmp" "$GVZT_DIR/held"
while [ ! -e "$GVZT_DIR/release" ]; do sleep 0.02; done
`

type lockRun struct {
	dir  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (r *lockRun) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(p)
}
func (r *lockRun) output() string { r.mu.Lock(); defer r.mu.Unlock(); return r.out.String() }

func (h *Host) startLockRun(t *testing.T, name string, env map[string]string) *lockRun {
	t.Helper()
	r := &lockRun{dir: filepath.Join(h.Dir, "lockrun-"+name), done: make(chan error, 1)}
	must(os.MkdirAll(r.dir, 0o755))
	e := map[string]string{"GVISORGEN_SCRIPTS": scriptsDir, "GVZT_DIR": r.dir, "LOCK_TIMEOUT_SECONDS": "120"}
	for k, v := range env {
		e[k] = v
	}
	r.cmd = exec.Command(filepath.Join(bbDir, "sh"), "-c", lockDriver, "/gvisorgen/install-runsc.sh")
	r.cmd.Env = h.scriptEnv(e)
	r.cmd.Stdout, r.cmd.Stderr = r, r
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Logf("%s: %s", name, r.output())
	})
	return r
}

// waitFor polls cond (every 10 ms, up to a minute) and fails the test naming what it waited for.
func (r *lockRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the run ended (%v) while waiting for %s:\n%s", err, what, r.output())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("no %s after a minute:\n%s", what, r.output())
		}
	}
}

func (r *lockRun) file(n string) string {
	b, _ := os.ReadFile(filepath.Join(r.dir, n))
	return string(b)
}
func (r *lockRun) has(n string) bool { _, err := os.Stat(filepath.Join(r.dir, n)); return err == nil }
func (r *lockRun) touch(n string)    { must(os.WriteFile(filepath.Join(r.dir, n), nil, 0o644)) }

func (r *lockRun) finish(t *testing.T) {
	t.Helper()
	r.touch("release")
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("the run failed (%v):\n%s", err, r.output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the run did not end after its release:\n%s", r.output())
	}
}

func TestLockInterleavings(t *testing.T) {
	t.Parallel()
	stale := func(h *Host) string {
		line := fmt.Sprintf("%s %s %d 12345 node-a 1 install-runsc", bootID(), pidNS("self"), deadPid())
		h.plantLock(line)
		return line
	}
	// The flake's shape: a run (A) has judged the holder gone and is about to break the lock; before it does, another
	// run (B) breaks it and takes the lock. A's break then meets B's lock: it must leave it to B (put its holder back,
	// wait for B to release), and B must hold alone until then.
	t.Run("breaker-meets-a-lock-taken-since", func(t *testing.T) {
		h := newHost(t, "16")
		stale(h)
		a := h.startLockRun(t, "a", map[string]string{"GVZT_PAUSE": "mv */lock/holder"})
		a.waitFor(t, "A paused before its break", func() bool { return a.has("paused") })
		b := h.startLockRun(t, "b", nil)
		b.waitFor(t, "B holding the lock", func() bool { return b.has("held") })
		assertContains(t, "B's output", b.output(), "broke a stale lock")
		mine := b.file("held")
		a.touch("go")
		a.waitFor(t, "A waiting for B", func() bool { return strings.Contains(a.output(), "waiting for the lock") })
		if got := h.read("/run/gvisorgen/lock/holder"); got != mine {
			t.Fatalf("B's holder line changed while B held the lock: %q, was %q", got, mine)
		}
		if a.has("held") {
			t.Fatal("A took the lock while B held it")
		}
		b.finish(t)
		a.waitFor(t, "A holding the lock after B", func() bool { return a.has("held") })
		if a.file("held") == mine {
			t.Fatal("A holds B's lock line")
		}
		a.finish(t)
		h.assertNoLock(t)
	})
	// While a breaker has the holder file aside the lock has no holder: another run must wait for a breaker that still
	// runs (not put the line back under it; TestLock covers a dead breaker's, which is put back and judged).
	t.Run("breaker-at-work-waited-for", func(t *testing.T) {
		h := newHost(t, "16")
		stale(h)
		// pause A right after its break moved the stale holder aside, before it removes it
		a := h.startLockRun(t, "a", map[string]string{"GVZT_PAUSE": "rm */lock/holder.broken.*"})
		a.waitFor(t, "A paused with the holder file aside", func() bool { return a.has("paused") })
		if h.exists("/run/gvisorgen/lock/holder") {
			t.Fatal("the holder file is not aside")
		}
		b := h.startLockRun(t, "b", nil)
		// B finds no holder and a breaker that still runs: it waits
		b.waitFor(t, "B waiting", func() bool { return strings.Contains(b.output(), "waiting for the lock") })
		if b.has("held") {
			t.Fatal("B took the lock while A was breaking it")
		}
		a.touch("go")
		a.waitFor(t, "A holding the lock", func() bool { return a.has("held") })
		a.finish(t)
		b.waitFor(t, "B holding the lock after A", func() bool { return b.has("held") })
		b.finish(t)
		h.assertNoLock(t)
	})
	// Many runs at once on a stale lock: each holds it alone (the holder file always names the run that holds it).
	t.Run("six-runs-on-a-stale-lock-take-turns", func(t *testing.T) {
		h := newHost(t, "16")
		stale(h)
		var runs []*lockRun
		for i := 0; i < 6; i++ {
			runs = append(runs, h.startLockRun(t, fmt.Sprint(i), nil))
		}
		for left := len(runs); left > 0; left-- {
			var holder *lockRun
			for end := time.Now().Add(time.Minute); holder == nil; time.Sleep(10 * time.Millisecond) {
				for _, r := range runs {
					if r != nil && r.has("held") {
						if holder != nil {
							t.Fatal("two runs hold the lock")
						}
						holder = r
					}
				}
				if time.Now().After(end) {
					t.Fatal("no run holds the lock after a minute")
				}
			}
			if got := h.read("/run/gvisorgen/lock/holder"); got != holder.file("held") {
				t.Fatalf("the lock names %q, its holder saw %q", got, holder.file("held"))
			}
			holder.finish(t)
			for i, r := range runs {
				if r == holder {
					runs[i] = nil
				}
			}
		}
		h.assertNoLock(t)
	})
}

// assertNoLock: no lock, no staging folder and no holder moved aside is left in STATE_DIR.
func (h *Host) assertNoLock(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(h.P("/run/gvisorgen"))
	for _, e := range ents {
		if n := e.Name(); n == "lock" || strings.HasPrefix(n, ".lock.") || strings.HasPrefix(n, "lock.") {
			t.Errorf("left in the state dir: %s", n)
		}
	}
}
