//go:build nodetest

package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Host is one fake node: a host tree (HOST_ROOT) whose /etc/containerd, /usr/local/bin, /run and /home are
// bind-mounted over the machine's own in a private mount namespace by the HOST_EXEC wrapper, a fake systemctl that
// (re)starts a real containerd with a private root, and the chosen containerd version as the host's `containerd`.
type Host struct {
	t        *testing.T
	Dir      string // test scratch
	Root     string // HOST_ROOT
	Exec     string // HOST_EXEC
	ExecNet  string // HOST_EXEC_NET
	Ctrd     string // the host's containerd binary
	CtrdName string // "16", "17", "22", "23" or "24"
	Unit     string // the unit the fake systemctl runs containerd as ("containerd"; k3s-agent on a k3s node)
	Sock     string // containerd's socket
	Env      map[string]string
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func newHost(t *testing.T, ver string) *Host {
	t.Helper()
	h := &Host{t: t, Dir: t.TempDir(), CtrdName: ver, Unit: "containerd", Sock: "/run/containerd/containerd.sock"}
	h.Ctrd = map[string]string{"16": ctrd16, "17": ctrd17, "22": ctrd22, "23": ctrd23, "24": ctrd24}[ver]
	if h.Ctrd == "" {
		t.Fatalf("unknown containerd %q", ver)
	}
	h.Root = filepath.Join(h.Dir, "host")
	for _, d := range []string{"etc/containerd/conf.d", "usr/local/bin", "run/gvisorgen", "run/containerd", "home/kubernetes/bin", "../fakebin", "../knobs", "../root"} {
		if err := os.MkdirAll(filepath.Join(h.Root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fb := filepath.Join(h.Dir, "fakebin")
	h.link(h.Ctrd, fb+"/containerd")
	h.link(ctrBin, fb+"/ctr")
	h.write(fb+"/systemctl", 0o755, strings.ReplaceAll(fakeSystemctl, "@DIR@", h.Dir))
	h.Exec = h.hostExec("hostexec")
	h.ExecNet = h.hostExec("hostexec-net")
	h.Env = map[string]string{
		"GVISORGEN_SCRIPTS":        scriptsDir,
		"HOST_ROOT":                h.Root,
		"HOST_EXEC":                h.Exec,
		"HOST_EXEC_NET":            h.ExecNet,
		"GVISOR_VERSION":           tagBin,
		"GVISOR_BASE_URL":          httpdURL + "/release",
		"GVISOR_LAYOUT":            "auto",
		"GVISOR_MODE":              "install",
		"INSTALL_DIR":              "/usr/local/bin",
		"INSTALL_DIR_ON_PATH":      "true",
		"CONTAINERD_CONFIG":        "/etc/containerd/config.toml",
		"RUNSC_CONFIG":             "/etc/containerd/runsc.toml",
		"RUNSC_CONFIG_TOML":        "network = \"none\"",
		"STATE_DIR":                "/run/gvisorgen",
		"DOWNLOAD_TIMEOUT_SECONDS": "10",
		"DOWNLOAD_RETRIES":         "2",
		"RESTART_TIMEOUT_SECONDS":  "20",
		"LOCK_TIMEOUT_SECONDS":     "20",
	}
	t.Cleanup(h.stopContainerd)
	trackDir(h.Dir)
	return h
}

// hostExec links the tests' HOST_EXEC (ci/node/hostexec, built once by TestMain) into the host's folder under name,
// which selects what it does: "hostexec" (a private mount namespace in which the fake host's dirs hide the machine's,
// with the fake systemctl and the chosen containerd first on PATH, and a new, empty network namespace: as nsenter -t 1
// -m leaves the pod's network; curl refused), "hostexec-net" (the machine's network, curl only), any other name (as
// hostexec, without the refusal). Each logs the commands it ran to hostexec.log, prefixed by its name.
func (h *Host) hostExec(name string) string {
	p := filepath.Join(h.Dir, name)
	h.link(hostExecBin, p)
	return p
}

// link makes newname a symbolic link to oldname (replacing what was there): a command of the fake host without a
// script in between, and without writing an executable, which a concurrent fork could keep open (ETXTBSY).
func (h *Host) link(oldname, newname string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(newname), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Remove(newname); err != nil && !os.IsNotExist(err) {
		h.t.Fatal(err)
	}
	if err := os.Symlink(oldname, newname); err != nil {
		h.t.Fatal(err)
	}
}

// A systemctl for the fake host: start/restart/stop/is-active containerd, with a private root; a knob file makes the
// next N restarts fail (as a unit that does not come up).
const fakeSystemctl = `#!/bin/sh
set -eu
D=@DIR@
echo "systemctl $*" >>"$D/systemctl.log"
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ]; }
stop() {
	if [ -f "$D/containerd.pid" ] && alive "$(cat "$D/containerd.pid")"; then
		kill "$(cat "$D/containerd.pid")"
		i=0
		while alive "$(cat "$D/containerd.pid")"; do
			i=$((i+1)); [ $i -lt 100 ] || kill -9 "$(cat "$D/containerd.pid")"; sleep 0.1
		done
	fi
	rm -f "$D/containerd.pid"
}
# The unit, its config file and socket: containerd's own by default; knobs make it a distribution's (k3s: unit k3s-agent,
# config /var/lib/rancher/k3s/agent/etc/containerd/config.toml, socket /run/k3s/containerd/containerd.sock), which
# renders the config anew from knob "render" at every start, as k3s does from its template.
UNIT=$(cat "$D/knobs/unit" 2>/dev/null || echo containerd)
CFGF=$(cat "$D/knobs/config-file" 2>/dev/null || echo /etc/containerd/config.toml)
SOCK=$(cat "$D/knobs/sock" 2>/dev/null || echo /run/containerd/containerd.sock)
cmd=$1
shift
[ "${1:-}" != --quiet ] || shift
case "$cmd ${1:-}" in
"restart $UNIT"|"start $UNIT")
	stop
	n=$(cat "$D/knobs/fail-restarts" 2>/dev/null || echo 0)
	if [ "$n" -gt 0 ]; then
		echo $((n-1)) >"$D/knobs/fail-restarts"
		echo "Job for containerd.service failed because the control process exited with error code." >&2
		exit 1
	fi
	rm -f "$SOCK"
	if [ -f "$D/knobs/render" ]; then cp "$D/knobs/render" "$CFGF"; fi
	cfg=""; [ ! -f "$CFGF" ] || cfg="--config $CFGF"
	# knob "config": the unit runs containerd with another file (as a unit's --config would)
	if [ -s "$D/knobs/config" ]; then cfg="--config $(cat "$D/knobs/config")"; fi
	setsid containerd $cfg --root "$D/root" --state "${SOCK%/*}" >>"$D/containerd.log" 2>&1 </dev/null &
	echo $! >"$D/containerd.pid"
	# up when its socket answers: ctr (a Go program, ~0.1 s of CPU) only once the socket exists. Bounded by the
	# number of tries (~60 s when quiet, more under load), so that the script's RESTART_TIMEOUT_SECONDS decides, as
	# systemd's TimeoutStartSec (90 s) leaves it to on a node.
	i=0
	until [ -S "$SOCK" ] && ctr --address "$SOCK" version >/dev/null 2>&1; do
		i=$((i+1))
		if ! alive "$(cat "$D/containerd.pid")"; then echo "containerd failed to start: it exited (containerd.log)" >&2; exit 1; fi
		if [ $i -gt 1200 ]; then echo "containerd failed to start: no answer on its socket after 1200 tries" >&2; exit 1; fi
		sleep 0.05
	done ;;
"stop $UNIT") stop ;;
"is-active $UNIT") if [ -f "$D/containerd.pid" ] && alive "$(cat "$D/containerd.pid")"; then echo active; else echo inactive; exit 3; fi ;;
"is-active "*) echo inactive; exit 3 ;;
*) echo "fake systemctl: unsupported: $*" >&2; exit 1 ;;
esac
`

func (h *Host) write(path string, mode os.FileMode, content string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := writeFile(path, []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
}

// writeFile is os.WriteFile with no fork in between: tests run in parallel, and a child forked while an executable's
// write descriptor is open holds it until it execs, so that running the file fails with "text file busy" (ETXTBSY).
// os/exec forks under syscall.ForkLock's write lock; holding the read lock keeps forks out while the file is open.
// A symbolic link at path (the hosts' containerd and ctr are links to the real binaries) is replaced, never written
// through.
func writeFile(path string, b []byte, mode os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return os.WriteFile(path, b, mode)
}

// P is a host path inside the fake host.
func (h *Host) P(hostPath string) string { return filepath.Join(h.Root, hostPath) }

func (h *Host) read(hostPath string) string {
	b, err := os.ReadFile(h.P(hostPath))
	if err != nil {
		h.t.Fatalf("read %s: %v", hostPath, err)
	}
	return string(b)
}

func (h *Host) exists(hostPath string) bool {
	_, err := os.Lstat(h.P(hostPath))
	return err == nil
}

func (h *Host) setConfig(content string) { h.write(h.P("/etc/containerd/config.toml"), 0o644, content) }
func (h *Host) config() string           { return h.read("/etc/containerd/config.toml") }

// Result of one script run.
type Result struct {
	Code   int
	Output string
	Took   time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d after %s:\n%s", r.Code, r.Took.Round(time.Millisecond), r.Output)
}

// run runs cue/installer/<script> under busybox sh with only busybox applets on PATH. prefix wraps the command
// (e.g. a read-only mount namespace); env overrides h.Env ("" value = unset).
func (h *Host) runWith(prefix []string, script string, env map[string]string) Result {
	h.t.Helper()
	return h.runShellWith(prefix, filepath.Join(bbDir, "sh"), script, env)
}

func (h *Host) runShell(shell, script string, env map[string]string) Result {
	h.t.Helper()
	return h.runShellWith(nil, shell, script, env)
}

// scriptEnv is the environment of a script run on this host: busybox's PATH, the host's env, then env (which wins).
func (h *Host) scriptEnv(env map[string]string) []string {
	e := map[string]string{"PATH": bbDir, "HOME": "/root", "TMPDIR": filepath.Join(h.Dir, "tmp")}
	_ = os.MkdirAll(e["TMPDIR"], 0o755)
	for k, v := range h.Env {
		e[k] = v
	}
	for k, v := range env {
		e[k] = v
	}
	// Unless a case says otherwise (even "": no pins), every artifact of the tag is pinned: plain http from busybox
	// httpd is refused for unpinned artifacts (see trust_test.go for the rule itself).
	if _, ok := e["GVISOR_SHA512_PINS"]; !ok {
		e["GVISOR_SHA512_PINS"] = autoPins(e["GVISOR_VERSION"])
	}
	var list []string
	for _, k := range sortedKeys(e) {
		if e[k] != "" || k == "HOST_ROOT" {
			list = append(list, k+"="+e[k])
		}
	}
	return list
}

func (h *Host) runShellWith(prefix []string, shell, script string, env map[string]string) Result {
	h.t.Helper()
	envList := h.scriptEnv(env)
	args := append(append([]string{}, prefix...), shell, filepath.Join(scriptsDir, script))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = envList
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	r := Result{Output: out.String(), Took: time.Since(t0)}
	if err != nil {
		r.Code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			r.Code = ee.ExitCode()
		}
	}
	h.t.Logf("%s: %s", script, r)
	return r
}

func (h *Host) run(script string, env map[string]string) Result { return h.runWith(nil, script, env) }

func (h *Host) mustRun(script string, env map[string]string) Result {
	h.t.Helper()
	r := h.run(script, env)
	if r.Code != 0 {
		h.t.Fatalf("%s failed: %s", script, r)
	}
	return r
}

// mustRunRestarts runs a script that must succeed and restart containerd exactly want times.
func (h *Host) mustRunRestarts(script string, env map[string]string, want int) Result {
	h.t.Helper()
	r0 := h.restarts()
	r := h.mustRun(script, env)
	if got := h.restarts() - r0; got != want {
		h.t.Fatalf("%s: want %d containerd restarts, got %d", script, want, got)
	}
	return r
}

// mustFail asserts a non-zero exit whose output matches re.
func (h *Host) mustFail(script string, env map[string]string, re string) Result {
	h.t.Helper()
	r := h.run(script, env)
	if r.Code == 0 {
		h.t.Fatalf("%s succeeded, want failure matching %q: %s", script, re, r)
	}
	if !regexp.MustCompile(re).MatchString(r.Output) {
		h.t.Fatalf("%s output does not match %q: %s", script, re, r)
	}
	return r
}

// hostCmd runs a command on the fake host (through the HOST_EXEC wrapper).
func (h *Host) hostCmd(args ...string) (string, error) {
	cmd := exec.Command(h.Exec, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h *Host) startContainerd() {
	h.t.Helper()
	if out, err := h.hostCmd("systemctl", "start", h.Unit); err != nil {
		h.t.Fatalf("start containerd: %v\n%s\n%s", err, out, h.containerdLog())
	}
	h.waitCRI()
}

func (h *Host) containerdLog() string {
	b, _ := os.ReadFile(filepath.Join(h.Dir, "containerd.log"))
	lines := strings.Split(string(b), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func (h *Host) criOK() bool {
	out, err := h.hostCmd("ctr", "--address", h.Sock, "plugins", "ls")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "io.containerd.grpc.v1" && f[1] == "cri" {
			return f[len(f)-1] == "ok"
		}
	}
	return false
}

func (h *Host) waitCRI() {
	h.t.Helper()
	for i := 0; i < 100; i++ {
		if h.criOK() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Fatalf("containerd CRI not ok:\n%s", h.containerdLog())
}

func (h *Host) stopContainerd() {
	b, err := os.ReadFile(filepath.Join(h.Dir, "containerd.pid"))
	if err != nil {
		return
	}
	var pid int
	fmt.Sscanf(string(b), "%d", &pid)
	if pid <= 0 {
		return
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	_ = p.Signal(os.Kill)
	for i := 0; i < 50 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.Remove(filepath.Join(h.Dir, "containerd.pid"))
}

func (h *Host) restarts() int {
	b, _ := os.ReadFile(filepath.Join(h.Dir, "systemctl.log"))
	return strings.Count(string(b), "systemctl restart "+h.Unit)
}

func (h *Host) knob(name, value string) { h.write(filepath.Join(h.Dir, "knobs", name), 0o644, value) }
