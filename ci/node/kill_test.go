//go:build nodetest

package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Killed runs (issue 26). A run killed with SIGKILL (no trap runs) at any step that creates a file must leave nothing
// that the next run does not remove: the next run succeeds and the node ends exactly as after one uninterrupted run.
//
// The kill is deterministic: the scripts run from a copy of cue/installer whose lib.sh has a test hook appended (the
// product scripts have no test-only path). busybox sh runs its applets without a PATH lookup, so the hook defines a
// shell function for each applet the scripts call (functions win over applets) that, before running the applet,
//   - record mode (GVZT_RECORD): appends a listing of the host tree and of TMPDIR's top level to the record file;
//   - kill mode (GVZT_KILL, a glob): when the glob matches an existing path, writes GVZT_HIT and blocks, and the test
//     kills the run's whole process group with SIGKILL (as the kubelet kills a container: every process in it).
//   - calls mode (GVZT_CALLS, a file): appends each call, the applet and its arguments, to that file (what a run
//     costs: TestInstallHashesEachFileOnce).
// An uninterrupted reference run in record mode lists every path the script creates (transient or not) and at which
// applet call it first exists; each such step is then killed right after it, on a fresh host, followed by a second,
// plain run.

const killHook = `
# --- appended by ci/node/kill_test.go: test hook, see there ---
_gvzt_walk() {
    for _gvzt_e in "$1"/* "$1"/.*; do
        case ${_gvzt_e##*/} in . | ..) continue ;; esac
        [ -e "$_gvzt_e" ] || [ -L "$_gvzt_e" ] || continue
        case $_gvzt_e in "$HOST_ROOT/run/containerd" | "$HOST_ROOT/run/mount") continue ;; esac
        printf '%s\n' "$_gvzt_e"
        if [ -d "$_gvzt_e" ] && [ ! -L "$_gvzt_e" ]; then _gvzt_walk "$_gvzt_e"; fi
    done
}
_gvzt_hook() {
    if [ -n "${GVZT_RECORD:-}" ]; then
        # one listing at a time (the stages of a pipeline call the hook at once)
        until command mkdir "$GVZT_RECORD.lk" 2>/dev/null; do :; done
        {
            echo "@ $$ $1"
            _gvzt_walk "$HOST_ROOT"
            for _gvzt_e in "${TMPDIR:-/tmp}"/* "${TMPDIR:-/tmp}"/.*; do
                case ${_gvzt_e##*/} in . | ..) continue ;; esac
                [ ! -e "$_gvzt_e" ] || printf '%s\n' "$_gvzt_e"
            done
        } >>"$GVZT_RECORD"
        command rmdir "$GVZT_RECORD.lk"
    fi
    if [ -n "${GVZT_KILL:-}" ]; then
        for _gvzt_e in $GVZT_KILL; do
            if [ -e "$_gvzt_e" ] || [ -L "$_gvzt_e" ]; then
                echo "$_gvzt_e $1" >"$GVZT_HIT"
                while :; do command sleep 1; done
            fi
        done
    fi
}
for _gvzt_a in @APPLETS@; do
    eval "$_gvzt_a() { [ -z \"\${GVZT_CALLS:-}\" ] || echo \"$_gvzt_a \$*\" >>\"\$GVZT_CALLS\"; _gvzt_hook $_gvzt_a; command $_gvzt_a \"\$@\"; }"
done
`

// Every applet the scripts run (checked against the scripts' gvz_need_applets lists below).
var hookedApplets = []string{"awk", "bunzip2", "cat", "chmod", "cmp", "cp", "cut", "date", "find", "grep", "head",
	"hostname", "ls", "mkdir", "mktemp", "mv", "readlink", "rm", "rmdir", "sed", "sha512sum", "sleep", "sort", "stat",
	"tail", "tar", "timeout", "tr", "uname", "wc", "wget"}

var (
	hookedOnce sync.Once
	hookedDir  string
)

// hookedScripts: the copy of cue/installer with the hook appended to lib.sh (made once per test binary).
func hookedScripts(t *testing.T) string {
	t.Helper()
	hookedOnce.Do(func() {
		d := filepath.Join(work, "hooked")
		must(os.MkdirAll(d, 0o755))
		ents, err := os.ReadDir(scriptsDir)
		must(err)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".sh") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(scriptsDir, e.Name()))
			must(err)
			if e.Name() == "lib.sh" {
				b = append(b, strings.ReplaceAll(killHook, "@APPLETS@", strings.Join(hookedApplets, " "))...)
			}
			must(os.WriteFile(filepath.Join(d, e.Name()), b, 0o644))
		}
		hookedDir = d
	})
	return hookedDir
}

// TestKillHookCoversApplets: the hook wraps every applet a script names in gvz_need_applets (a new applet the hook
// did not wrap could be the first call after a file is created, and the kill would land later than meant).
func TestKillHookCoversApplets(t *testing.T) {
	t.Parallel()
	wrapped := map[string]bool{}
	for _, a := range hookedApplets {
		wrapped[a] = true
	}
	lib, _ := os.ReadFile(filepath.Join(scriptsDir, "lib.sh"))
	base := regexp.MustCompile(`GVZ_BASE_APPLETS="([^"]*)"`).FindStringSubmatch(string(lib))
	if base == nil {
		t.Fatal("no GVZ_BASE_APPLETS in lib.sh")
	}
	names := strings.Fields(base[1])
	for _, s := range []string{"install-runsc.sh", "configure-containerd.sh", "uninstall.sh", "ready.sh"} {
		b, _ := os.ReadFile(filepath.Join(scriptsDir, s))
		m := regexp.MustCompile(`(?m)^gvz_need_applets \$GVZ_BASE_APPLETS(.*)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("%s: no gvz_need_applets line", s)
		}
		names = append(names, strings.Fields(m[1])...)
	}
	for _, a := range names {
		if !wrapped[a] {
			t.Errorf("applet %s is not wrapped by the kill hook (hookedApplets)", a)
		}
	}
}

// tree: every path of the host tree (but containerd's own /run/containerd, and /run/mount, where the HOST_EXEC
// wrapper's mount(8) keeps its table) and TMPDIR's top level, with its type
// and, for regular files, a digest of the content; keys are "host/<path>" and "tmp/<name>".
func (h *Host) tree() map[string]string {
	h.t.Helper()
	m := map[string]string{}
	walk := func(root, prefix string, deep bool) {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p == root {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if prefix == "host/" && (rel == "run/containerd" || rel == "run/mount") {
				return filepath.SkipDir
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			v := info.Mode().String()
			if info.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				if d.Name() == ".gvisorgen-runsc.stamp" {
					b = seenIdentity.ReplaceAll(b, []byte("$1"))
				}
				s := sha256.Sum256(b)
				v += " " + hex.EncodeToString(s[:8])
			}
			m[prefix+rel] = v
			if d.IsDir() && !deep {
				return filepath.SkipDir
			}
			return nil
		})
	}
	walk(h.Root, "host/", true)
	walk(filepath.Join(h.Dir, "tmp"), "tmp/", false)
	return m
}

// seenIdentity is what a stamp's "seen" line says of a file's identity on this host (device, inode, size, times: see
// gvz_seen), which two hosts never share; tree keeps the line and its path.
var seenIdentity = regexp.MustCompile(`(?m)^(seen [^ \n]+)( [^ \n]+){9}$`)

func diffTrees(want, got map[string]string) string {
	var out []string
	for _, k := range sortedKeys(want) {
		if g, ok := got[k]; !ok {
			out = append(out, "missing "+k)
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("changed %s: %s, want %s", k, g, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			out = append(out, "left   "+k+" ("+got[k]+")")
		}
	}
	return strings.Join(out, "\n")
}

// killStep: a path the reference run created, as a glob (the run's pid and mktemp's random part as *), and the
// applet call before which it first existed.
type killStep struct {
	glob   string // relative: "host/..." or "tmp/..."
	before string // the applet whose call first saw it
	n      int    // index of that call
}

// steps parses a record: every path that did not exist at the previous applet call is a step, once per glob.
func parseSteps(h *Host, record string) []killStep {
	var steps []killStep
	seen := map[string]bool{}
	prev := map[string]bool{}
	cur := map[string]bool{}
	var pid, applet string
	n := 0
	tmp := filepath.Join(h.Dir, "tmp") + "/"
	flush := func() {
		var fresh []string
		for p := range cur {
			if !prev[p] {
				fresh = append(fresh, p)
			}
		}
		sort.Strings(fresh)
		for _, p := range fresh {
			g := p
			if pid != "" {
				g = regexp.MustCompile(`\.`+pid+`(\.|/|$)`).ReplaceAllString(g, `.*$1`)
			}
			if strings.HasPrefix(g, tmp) {
				rest := strings.TrimPrefix(g, tmp)
				if i := strings.Index(rest, "."); i >= 0 {
					rest = rest[:i] + ".*"
				}
				g = "tmp/" + rest
			} else {
				rel, _ := filepath.Rel(h.Root, g)
				g = "host/" + rel
			}
			if !seen[g] {
				seen[g] = true
				steps = append(steps, killStep{glob: g, before: applet, n: n})
			}
		}
		prev, cur = cur, map[string]bool{}
	}
	first := true
	for _, l := range strings.Split(record, "\n") {
		if strings.HasPrefix(l, "@ ") {
			if first {
				first = false
			} else if n == 1 {
				// what the first applet call saw is the state the run started from (nothing runs before it that
				// could create a path): not steps
				prev, cur = cur, map[string]bool{}
			} else {
				flush()
			}
			f := strings.Fields(l)
			pid, applet = f[1], f[2]
			n++
			continue
		}
		if l != "" {
			cur[l] = true
		}
	}
	flush()
	return steps
}

func (h *Host) absGlob(g string) string {
	if r, ok := strings.CutPrefix(g, "tmp/"); ok {
		return filepath.Join(h.Dir, "tmp", r)
	}
	return filepath.Join(h.Root, strings.TrimPrefix(g, "host/"))
}

// hookedCmd: a run of the hooked copy of script with the environment of runShellWith (scriptEnv) plus extra.
func (h *Host) hookedCmd(script string, env map[string]string, extra ...string) *exec.Cmd {
	dir := hookedScripts(h.t)
	e := map[string]string{}
	for k, v := range env {
		e[k] = v
	}
	e["GVISORGEN_SCRIPTS"] = dir
	cmd := exec.Command(filepath.Join(bbDir, "sh"), filepath.Join(dir, script))
	cmd.Env = h.scriptEnv(e)
	cmd.Env = append(cmd.Env, extra...)
	// its own process group: the kill takes every process of the run, as a container's kill does
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// newHostFrom: a new host whose tree is a copy of the host tree start (none: as newHost makes it), with containerd
// started when the copy has a config (the configure and uninstall cases).
func newHostFrom(t *testing.T, ver, start string) *Host {
	h := newHost(t, ver)
	if start == "" {
		return h
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(start, p)
		if rel == "run/containerd" || rel == "run/mount" {
			return filepath.SkipDir
		}
		dst := filepath.Join(h.Root, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, info.Mode().Perm())
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, info.Mode().Perm())
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			return os.Symlink(l, dst)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.exists("/etc/containerd/config.toml") {
		h.startContainerd()
	}
	return h
}

type killCase struct {
	name   string
	ver    string
	script string
	env    map[string]string
	prep   func(h *Host)
	// killed: what must hold on the node right after the kill, before any other run
	killed func(t *testing.T, h *Host)
}

func killCases() []killCase {
	installed := func(cfg func() string) func(h *Host) {
		return func(h *Host) {
			h.setConfig(cfg())
			h.startContainerd()
			h.mustRun("install-runsc.sh", nil)
		}
	}
	return []killCase{
		{
			// a stale lock of a run killed earlier is broken first (lock/holder.broken.<pid>), then the binaries layout
			name: "install-runsc/binaries-after-a-stale-lock", ver: "16", script: "install-runsc.sh",
			prep: func(h *Host) {
				h.plantLock(fmt.Sprintf("%s %s %d 12345 node-a 1 install-runsc", bootID(), pidNS("self"), deadPid()))
			},
		},
		{name: "install-runsc/archive", ver: "16", script: "install-runsc.sh", env: map[string]string{"GVISOR_VERSION": tagArchDir}},
		{
			// a bump with a sandbox of the old release running: the new release's folder filled and renamed, the
			// shim replaced, the stamp rewritten; killed anywhere, the stamp still names one release that verifies
			name: "install-runsc/bump-with-the-old-release-in-use", ver: "24", script: "install-runsc.sh",
			env: map[string]string{"GVISOR_VERSION": tagArch},
			prep: func(h *Host) {
				installed(def24)(h)
				h.mustRun("configure-containerd.sh", nil)
				h.sandbox(tagBin, "old-pod")
			},
			// one consistent current release: the stamp and runsc.toml still name the old one, whose files (its pod
			// runs them) are untouched; the shim may already be the new release's, as any shim is for new containers
			killed: func(t *testing.T, h *Host) {
				if v := h.stampLine("version"); v != tagBin {
					t.Fatalf("the stamp names %q right after the kill", v)
				}
				h.assertToml(tagBin)
				for _, f := range binFiles {
					if b, _ := os.ReadFile(h.P(idir + "/gvisor-releases/" + tagBin + "/" + f)); sum(b) != artSHA[tagBin+"/"+f] {
						t.Fatalf("the old release's %s changed", f)
					}
				}
			},
		},
		{
			// the run after a bump collects the release it switched away from (marked, removed, unmarked)
			name: "install-runsc/collect-an-unused-release", ver: "24", script: "install-runsc.sh",
			env: map[string]string{"GVISOR_VERSION": tagArch},
			prep: func(h *Host) {
				installed(def24)(h)
				h.mustRun("configure-containerd.sh", nil)
				h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
				h.mustRun("configure-containerd.sh", map[string]string{"GVISOR_VERSION": tagArch})
			},
		},
		{name: "install-runsc/verified-tls-with-a-ca-bundle", ver: "16", script: "install-runsc.sh", env: tlsEnv("/release")},
		{
			// runsc.toml in a subfolder that gvisorgen creates (with its marker)
			name: "configure-containerd/1.6", ver: "16", script: "configure-containerd.sh",
			env:  map[string]string{"RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"},
			prep: installed(def16),
		},
		{
			// the drop-in path: gvisorgen-runsc.toml in conf.d (2.4's default config imports it), config untouched
			name: "configure-containerd/2.4-dropin", ver: "24", script: "configure-containerd.sh",
			env:  map[string]string{"RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"},
			prep: installed(func() string { return realDefault("24") }),
		},
		{
			name: "uninstall/2.4-dropin", ver: "24", script: "uninstall.sh",
			env: map[string]string{"GVISOR_MODE": "uninstall", "RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"},
			prep: func(h *Host) {
				installed(func() string { return realDefault("24") })(h)
				h.mustRun("configure-containerd.sh", map[string]string{"RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"})
			},
		},
		{
			name: "uninstall/2.4", ver: "24", script: "uninstall.sh",
			env: map[string]string{"GVISOR_MODE": "uninstall", "RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"},
			prep: func(h *Host) {
				installed(def24)(h)
				h.mustRun("configure-containerd.sh", map[string]string{"RUNSC_CONFIG": "/etc/containerd/runsc/runsc.toml"})
			},
		},
	}
}

// TestKilledRun: for each script and start state, an uninterrupted reference run lists the steps that create a path;
// then, for each step, a fresh host, a run killed (SIGKILL, the whole process group) right after that path exists,
// and a second plain run, which must succeed and leave the host tree and TMPDIR exactly as the reference run did: no
// temp file, probe, CA bundle, candidate, staging folder, stale lock or scratch folder of the killed run is left.
func TestKilledRun(t *testing.T) {
	t.Parallel()
	for _, kc := range killCases() {
		t.Run(kc.name, func(t *testing.T) {
			// the start state is made once and copied into each host (then containerd is started on it)
			var start string
			if kc.prep != nil {
				tpl := newHost(t, kc.ver)
				kc.prep(tpl)
				tpl.stopContainerd()
				start = tpl.Root
			}
			ref := newHostFrom(t, kc.ver, start)
			rec := filepath.Join(ref.Dir, "record")
			cmd := ref.hookedCmd(kc.script, kc.env, "GVZT_RECORD="+rec)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("reference run: %v\n%s", err, out)
			}
			want := ref.tree()
			b, _ := os.ReadFile(rec)
			steps := parseSteps(ref, string(b))
			ref.stopContainerd()
			if len(steps) < 3 {
				t.Fatalf("only %d steps recorded: %v", len(steps), steps)
			}
			// one kill per applet call at which new paths first exist (a folder and the file made in it before the
			// next call, say, are one step)
			var points [][]killStep
			for _, st := range steps {
				if len(points) > 0 && points[len(points)-1][0].n == st.n {
					points[len(points)-1] = append(points[len(points)-1], st)
				} else {
					points = append(points, []killStep{st})
				}
			}
			var names []string
			for _, p := range points {
				var gs []string
				for _, st := range p {
					gs = append(gs, st.glob)
				}
				names = append(names, fmt.Sprintf("before call %d (%s): %s", p[0].n, p[0].before, strings.Join(gs, " ")))
			}
			t.Logf("%d steps:\n%s", len(points), strings.Join(names, "\n"))
			for i, p := range points {
				st := p[0]
				t.Run(fmt.Sprintf("%02d-%s", i, filepath.Base(st.glob)), func(t *testing.T) {
					// the steps run in parallel (go test -parallel, GOMAXPROCS by default): each on its own host
					t.Parallel()
					killAt(t, kc, st, want, start)
				})
			}
		})
	}
}

// killWhenHit starts a hooked run (hookedCmd), waits until its hook wrote hit (the run is then parked at the point
// the hook was asked for), and kills the run's process group. what names that point in failures: a run that ends
// first, or does not get there in 3 minutes, fails the test.
func killWhenHit(t *testing.T, cmd *exec.Cmd, hit, what string) {
	t.Helper()
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("%s: the run ended (%v) without getting there:\n%s", what, err, buf.String())
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Fatalf("%s: not reached in 3 minutes:\n%s", what, buf.String())
		case <-time.After(10 * time.Millisecond):
			if _, err := os.Stat(hit); err == nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				return
			}
		}
	}
}

// killAt: a fresh host, the script killed right after st.glob first exists, then a plain run, which must succeed and
// leave the tree want.
func killAt(t *testing.T, kc killCase, st killStep, want map[string]string, start string) {
	t0 := time.Now()
	h := newHostFrom(t, kc.ver, start)
	hit := filepath.Join(h.Dir, "hit")
	cmd := h.hookedCmd(kc.script, kc.env, "GVZT_KILL="+h.absGlob(st.glob), "GVZT_HIT="+hit)
	killWhenHit(t, cmd, hit, "step "+st.glob)
	if kc.killed != nil {
		kc.killed(t, h)
	}
	at := h.tree()
	var left []string
	for _, k := range sortedKeys(at) {
		if _, ok := want[k]; !ok {
			left = append(left, k)
		}
	}
	r := h.run(kc.script, kc.env)
	if r.Code != 0 {
		t.Fatalf("step %s: the run after the killed one failed: %s", st.glob, r)
	}
	if d := diffTrees(want, h.tree()); d != "" {
		t.Fatalf("step %s (killed before %s): after the next run the node differs from one uninterrupted run:\n%s\n(the killed run had left: %v)\n%s",
			st.glob, st.before, d, left, r.Output)
	}
	h.stopContainerd()
	t.Logf("killed before call %d (%s), leaving %v; the next run removed what was not to stay (%s)", st.n, st.before, left, time.Since(t0).Round(time.Millisecond))
}

// TestLeftovers: what the next run removes, and what it leaves. Planted: leftovers named with the pid of a process
// that is gone (removed), the same names with the pid of a live process running an installer script (kept), and
// lookalikes gvisorgen does not make (kept: other names, a symlink, a staging folder holding someone else's file).
func TestLeftovers(t *testing.T) {
	t.Parallel()
	h := newHost(t, "16")
	c := exec.Command("true")
	_ = c.Run()
	dead := fmt.Sprint(c.Process.Pid)
	live := exec.Command(filepath.Join(bbDir, "sh"), "-c", "sleep 60; :", "/gvisorgen/install-runsc.sh")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Process.Kill(); _ = live.Wait() }()
	lp := fmt.Sprint(live.Process.Pid)
	tmp := filepath.Join(h.Dir, "tmp")
	removed := []string{
		"/usr/local/bin/.gvisorgen-probe." + dead,
		"/usr/local/bin/.runsc.gvisorgen-tmp." + dead,
		"/usr/local/bin/..gvisorgen-runsc.stamp.gvisorgen-tmp." + dead,
		"/usr/local/bin/gvisor-bin/sub/.helper.gvisorgen-tmp." + dead,
		"/etc/containerd/.config.toml.gvisorgen-tmp." + dead,
		"/etc/containerd/.config.toml.gvisorgen-backup.gvisorgen-tmp." + dead,
		"/etc/containerd/config.toml.gvisorgen-check",
		"/etc/containerd/.runsc.gvisorgen-tmp." + dead + "/.gvisorgen-created",
		"/run/gvisorgen/.gvisorgen-ca." + dead + ".pem",
		"/run/gvisorgen/.restarted-for.gvisorgen-tmp." + dead,
		"/run/gvisorgen/lock.stale." + dead + "/holder",
		"/run/gvisorgen/.lock.new." + dead + "/holder",
	}
	kept := []string{
		"/usr/local/bin/.gvisorgen-probe." + lp,
		"/usr/local/bin/.runsc.gvisorgen-tmp." + lp,
		"/run/gvisorgen/.gvisorgen-ca." + lp + ".pem",
		"/usr/local/bin/.gvisorgen-probe.x" + dead,
		"/usr/local/bin/runsc.gvisorgen-tmp." + dead,
		"/usr/local/bin/.gvisorgen-tmp." + dead,
		"/etc/containerd/.mine.gvisorgen-tmp." + dead + "/.gvisorgen-created",
		"/etc/containerd/.mine.gvisorgen-tmp." + dead + "/notes",
		"/etc/containerd/notes.toml",
		"/run/gvisorgen/lock.stale.x",
	}
	for _, p := range append(append([]string{}, removed...), kept...) {
		h.write(h.P(p), 0o644, "x\n")
	}
	_ = os.Symlink("/etc/hostname", h.P("/usr/local/bin/.link.gvisorgen-tmp."+dead))
	kept = append(kept, "/usr/local/bin/.link.gvisorgen-tmp."+dead)
	h.write(filepath.Join(tmp, "gvisorgen."+dead+".AbCdEf", "dl", "runsc"), 0o644, "x")
	h.write(filepath.Join(tmp, "gvisorgen."+lp+".AbCdEf", "dl", "runsc"), 0o644, "x")
	h.write(filepath.Join(tmp, "gvisorgen.AbCdEf", "dl", "runsc"), 0o644, "x") // an older installer's: no pid
	h.write(filepath.Join(tmp, "other"), 0o644, "x")
	r := h.mustRun("install-runsc.sh", nil)
	for _, p := range removed {
		if h.exists(p) {
			t.Errorf("left: %s", p)
		}
	}
	for _, p := range []string{"/etc/containerd/.runsc.gvisorgen-tmp." + dead, "/run/gvisorgen/lock.stale." + dead, "/run/gvisorgen/.lock.new." + dead} {
		if h.exists(p) {
			t.Errorf("folder left: %s", p)
		}
	}
	for _, p := range kept {
		if !h.exists(p) {
			t.Errorf("removed, but not gvisorgen's leftover: %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "gvisorgen."+dead+".AbCdEf")); err == nil {
		t.Error("the killed run's scratch folder is left")
	}
	for _, n := range []string{"gvisorgen." + lp + ".AbCdEf", "gvisorgen.AbCdEf", "other"} {
		if _, err := os.Stat(filepath.Join(tmp, n)); err != nil {
			t.Errorf("removed from TMPDIR: %s", n)
		}
	}
	assertContains(t, "output", r.Output, "removed /usr/local/bin/.gvisorgen-probe."+dead+", left by an earlier run that did not finish")
	assertContains(t, "output", r.Output, "left /usr/local/bin/.gvisorgen-probe."+lp+" in place: process "+lp)
	assertContains(t, "output", r.Output, "left /etc/containerd/.mine.gvisorgen-tmp."+dead+" in place: it holds more than gvisorgen puts there")
	assertContains(t, "stamp", h.read("/usr/local/bin/.gvisorgen-runsc.stamp"), "version "+tagBin+"\n")
}
