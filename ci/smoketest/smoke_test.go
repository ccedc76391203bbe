// Package smoketest tests the CI scripts in ci/ (smoke.sh, pr-diff.sh, drift.sh) with fake
// kubectl, gh and gvisorgen commands put first on PATH: sh scripts written by the tests that
// record their calls and print canned output chosen by environment variables.
package smoketest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository's top folder: go test runs in the package's folder, ci/smoketest (the source file's
// own path is no help: builds are -trimpath, see the Makefile).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// fakeKubectl records every call, one line of arguments each, in $FAKE_LOG, and answers:
//
//	get namespace          exists when FAKE_NS_EXISTS=1
//	get pod ... phase      the next word of FAKE_POD_PHASES (the last one repeats)
//	get pod ... runtimeClassName  FAKE_RUNTIMECLASS (default gvisor; none prints nothing)
//	get pod ... nodeName, get pvc ... phase (FAKE_PVC_PHASE, default Bound) / storageClassName
//	logs                   the file FAKE_LOGS
//	apply, delete, describe, get events: a line of text
const fakeKubectl = `#!/bin/sh
printf '%s\n' "$*" >>"$FAKE_LOG"
case "$*" in
get\ namespace\ *)
	if [ "${FAKE_NS_EXISTS:-0}" = 1 ]; then echo "namespace/$3"; exit 0; fi
	echo "Error from server (NotFound): namespaces \"$3\" not found" >&2; exit 1 ;;
apply\ -f\ *) echo "applied $3" ;;
delete\ namespace\ *) echo "namespace \"$3\" deleted" ;;
*"get pod"*"{.status.phase}"*)
	n=$(cat "$FAKE_STATE/polls" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$FAKE_STATE/polls"
	set -- $FAKE_POD_PHASES; i=1; phase=
	for p in "$@"; do phase=$p; [ "$i" -ge "$n" ] && break; i=$((i + 1)); done
	printf '%s' "$phase" ;;
*"get pod"*"{.spec.runtimeClassName}"*) [ "${FAKE_RUNTIMECLASS:-gvisor}" = none ] || printf '%s' "${FAKE_RUNTIMECLASS:-gvisor}" ;;
*"get pod"*"{.spec.nodeName}"*) printf 'kind-control-plane' ;;
*"get pvc"*"{.status.phase}"*) printf '%s' "${FAKE_PVC_PHASE-Bound}" ;;
*"get pvc"*"{.spec.storageClassName}"*) printf 'gvisor-workspace' ;;
*" logs "*) cat "$FAKE_LOGS" ;;
*" describe "*) echo "fake describe: $*" ;;
*" get events "*) echo "fake events: $*" ;;
*) echo "fake kubectl: unexpected call: $*" >&2; exit 3 ;;
esac
`

// The dmesg outputs the smoke pod can print.
const (
	gvisorDmesg = `[    0.000000] Starting gVisor...
[    0.512345] Mounting deweydecimalfs...
[    0.876543] Digging up root...
[    1.234567] Ready!
`
	// dmesg of a privileged pod (or one with CAP_SYSLOG) on the node's real kernel.
	hostKernelDmesg = `[    0.000000] Linux version 6.8.0-1017-azure (buildd@lcy02-amd64-026) (x86_64-linux-gnu-gcc-13) #20-Ubuntu SMP
[    0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.8.0-1017-azure root=PARTUUID=0b1c console=ttyS0
[    0.000000] KERNEL supported cpus:
`
	// util-linux dmesg of an unprivileged pod on the real kernel (kernel.dmesg_restrict=1).
	readBufferFailed = "dmesg: read kernel buffer failed: Operation not permitted\n"
	// busybox dmesg, same situation.
	klogctlFailed = "dmesg: klogctl: Operation not permitted\n"
)

// The fixture smoke folder: what `make generate` writes to smoke/<target>/.
var fixture = map[string]string{
	"namespace-gvisor-smoke.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: gvisor-smoke
`,
	"pod-gvisor-smoke.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: gvisor-smoke
  namespace: gvisor-smoke
spec:
  runtimeClassName: gvisor
  restartPolicy: Never
  containers:
  - name: smoke
    image: busybox:1.37.0-glibc
    command: [sh, -c, 'echo ok > /workspace/smoke && dmesg']
    volumeMounts:
    - {name: workspace, mountPath: /workspace}
  volumes:
  - name: workspace
    persistentVolumeClaim: {claimName: gvisor-smoke}
`,
	"persistentvolumeclaim-gvisor-smoke.yaml": `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: gvisor-smoke
  namespace: gvisor-smoke
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gvisor-workspace
  resources: {requests: {storage: 1Gi}}
`,
}

type smokeCase struct {
	smokeDir string // a real smoke folder (SMOKE_DIR) instead of the fixture
	withPVC  bool
	env      map[string]string // FAKE_*, SMOKE_*, KEEP, ...
	logs     string
}

type smokeRun struct {
	code           int
	stdout, stderr string
	calls          []string // kubectl calls, in order
	dir            string
}

// runSmoke lays out a work dir with smoke/kind/ and a fake kubectl, and runs
// `sh ci/smoke.sh kind` in it (SMOKE_DIR unset, so the default smoke/<target> is used).
func runSmoke(t *testing.T, c smokeCase, signal func(*exec.Cmd, string)) smokeRun {
	t.Helper()
	dir := t.TempDir()
	smokeDir := filepath.Join(dir, "smoke", "kind")
	must(t, os.MkdirAll(smokeDir, 0o755))
	for name, body := range fixture {
		if c.smokeDir != "" {
			break
		}
		if !c.withPVC && strings.HasPrefix(name, "persistentvolumeclaim-") {
			continue
		}
		must(t, os.WriteFile(filepath.Join(smokeDir, name), []byte(body), 0o644))
	}
	bin := filepath.Join(dir, "bin")
	state := filepath.Join(dir, "state")
	must(t, os.MkdirAll(bin, 0o755))
	must(t, os.MkdirAll(state, 0o755))
	must(t, os.WriteFile(filepath.Join(bin, "kubectl"), []byte(fakeKubectl), 0o755))
	logs := filepath.Join(dir, "pod.log")
	must(t, os.WriteFile(logs, []byte(c.logs), 0o644))
	log := filepath.Join(dir, "kubectl.log")

	env := map[string]string{
		"PATH":                bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"FAKE_LOG":            log,
		"FAKE_STATE":          state,
		"FAKE_LOGS":           logs,
		"FAKE_POD_PHASES":     "Succeeded",
		"SMOKE_POLL_INTERVAL": "0",
		"GITHUB_ACTIONS":      "",
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary.md"),
		"KEEP":                "",
		"SMOKE_DIR":           "",
		"KUBECTL":             "",
	}
	if c.smokeDir != "" {
		env["SMOKE_DIR"] = c.smokeDir
	}
	for k, v := range c.env {
		env[k] = v
	}
	cmd := exec.Command("sh", filepath.Join(repoRoot(t), "ci", "smoke.sh"), "kind")
	cmd.Dir = dir
	cmd.Env = environ(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	if signal != nil {
		signal(cmd, log)
	}
	err := cmd.Wait()
	r := smokeRun{stdout: stdout.String(), stderr: stderr.String(), dir: dir}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	default:
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err == nil {
		r.calls = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s\nkubectl calls:\n%s", r.code, r.stdout, r.stderr, strings.Join(r.calls, "\n"))
	return r
}

// environ is the test process's environment with env applied ("" removes a variable).
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// index of the first call containing all parts, or -1.
func (r smokeRun) index(parts ...string) int {
	for i, c := range r.calls {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(c, p)
		}
		if ok {
			return i
		}
	}
	return -1
}

func (r smokeRun) has(parts ...string) bool { return r.index(parts...) >= 0 }

// cleanedUp: the last kubectl call deletes the smoke namespace.
func (r smokeRun) cleanedUp() bool {
	return len(r.calls) > 0 && strings.HasPrefix(r.calls[len(r.calls)-1], "delete namespace gvisor-smoke")
}

func (r smokeRun) dumped() bool {
	return r.has("describe pod gvisor-smoke") && r.has("get events") && r.has("logs pod/gvisor-smoke --all-containers")
}

func TestSmokePassGVisorDmesg(t *testing.T) {
	t.Parallel()
	for _, withPVC := range []bool{false, true} {
		r := runSmoke(t, smokeCase{withPVC: withPVC, logs: gvisorDmesg,
			env: map[string]string{"FAKE_POD_PHASES": "Pending Pending Running Succeeded"}}, nil)
		if r.code != 0 {
			t.Fatalf("pvc=%v: exit %d, want 0", withPVC, r.code)
		}
		if !strings.Contains(r.stdout, "PASS: smoke kind") {
			t.Errorf("pvc=%v: no PASS line", withPVC)
		}
		// The namespace is applied first, then the PVC, then the pod.
		ns := r.index("apply -f", "namespace-gvisor-smoke.yaml")
		pod := r.index("apply -f", "pod-gvisor-smoke.yaml")
		if ns < 0 || pod < 0 || ns > pod {
			t.Errorf("pvc=%v: want the namespace applied before the pod: %q", withPVC, r.calls)
		}
		pvc := r.index("apply -f", "persistentvolumeclaim-gvisor-smoke.yaml")
		if withPVC && (pvc < ns || pvc > pod) {
			t.Errorf("want the PVC applied between namespace and pod: %q", r.calls)
		}
		if r.has("get pvc gvisor-smoke") != withPVC {
			t.Errorf("pvc=%v: PVC phase checked: %v", withPVC, r.has("get pvc gvisor-smoke"))
		}
		// It polled until Succeeded (4 polls), and did not dump.
		if got := countCalls(r, "{.status.phase}", "get pod"); got != 4 {
			t.Errorf("pvc=%v: %d pod polls, want 4", withPVC, got)
		}
		if r.has("describe") {
			t.Errorf("pvc=%v: a passing run dumped the pod", withPVC)
		}
		if !r.cleanedUp() {
			t.Errorf("pvc=%v: the namespace was not deleted at the end", withPVC)
		}
		if r.has("delete namespace gvisor-smoke --ignore-not-found --wait=true") {
			t.Errorf("pvc=%v: deleted a namespace that did not exist before", withPVC)
		}
		sum, _ := os.ReadFile(filepath.Join(r.dir, "summary.md"))
		if !strings.Contains(string(sum), "PASS") {
			t.Errorf("pvc=%v: job summary %q has no PASS", withPVC, sum)
		}
	}
}

func countCalls(r smokeRun, parts ...string) int {
	n := 0
	for _, c := range r.calls {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(c, p)
		}
		if ok {
			n++
		}
	}
	return n
}

func TestSmokeFailsOnHostKernel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, logs, phase string
	}{
		{"real kernel log", hostKernelDmesg, "Succeeded"},
		{"read kernel buffer failed", readBufferFailed, "Failed"},
		{"busybox klogctl refused", klogctlFailed, "Failed"},
		// A real kernel banner wins even when something printed gVisor's line too.
		{"kernel banner beside a gVisor line", gvisorDmesg + hostKernelDmesg, "Succeeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runSmoke(t, smokeCase{logs: c.logs, env: map[string]string{
				"FAKE_POD_PHASES": c.phase, "FAKE_RUNTIMECLASS": "none"}}, nil)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1", r.code)
			}
			if !strings.Contains(r.stderr, "ran on the host kernel, not in gVisor") {
				t.Errorf("stderr does not say the pod ran on the host kernel")
			}
			if !strings.Contains(r.stderr, "runtimeClassName '<none>'") {
				t.Errorf("stderr does not show the pod's (missing) runtimeClassName")
			}
			if strings.Contains(r.stdout, "PASS") {
				t.Errorf("a host-kernel run printed PASS")
			}
			if !r.dumped() {
				t.Errorf("no failure dump (describe, events, logs)")
			}
			if !r.cleanedUp() {
				t.Errorf("the namespace was not deleted at the end")
			}
		})
	}
}

func TestSmokeFailsWithoutGVisorMarker(t *testing.T) {
	t.Parallel()
	r := runSmoke(t, smokeCase{logs: "hello\n"}, nil)
	if r.code != 1 || !strings.Contains(r.stderr, "do not show gVisor's dmesg") {
		t.Fatalf("exit %d, stderr %q: want 1 and a message that gVisor's dmesg is missing", r.code, r.stderr)
	}
	if !r.cleanedUp() {
		t.Errorf("the namespace was not deleted at the end")
	}
}

func TestSmokeFailsWhenGVisorPodFailed(t *testing.T) {
	t.Parallel()
	// gVisor ran, but the pod's other work (writing to the PVC) failed.
	r := runSmoke(t, smokeCase{withPVC: true, logs: gvisorDmesg + "sh: can't create /workspace/smoke: Permission denied\n",
		env: map[string]string{"FAKE_POD_PHASES": "Failed"}}, nil)
	if r.code != 1 || !strings.Contains(r.stderr, "ran in gVisor but ended Failed") {
		t.Fatalf("exit %d, stderr %q: want 1 and 'ran in gVisor but ended Failed'", r.code, r.stderr)
	}
}

func TestSmokeFailsWhenPodNeverFinishes(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := runSmoke(t, smokeCase{logs: "", env: map[string]string{
		"FAKE_POD_PHASES":     "Pending",
		"SMOKE_POD_TIMEOUT":   "2",
		"SMOKE_POLL_INTERVAL": "1",
	}}, nil)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	if !strings.Contains(r.stderr, "did not finish within 2s (phase 'Pending')") {
		t.Errorf("stderr does not report the timeout and the phase")
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the 2s timeout took %v", time.Since(start))
	}
	if countCalls(r, "get pod", "{.status.phase}") < 2 {
		t.Errorf("did not poll the pod repeatedly")
	}
	if !r.dumped() {
		t.Errorf("no failure dump (describe, events, logs)")
	}
	if !r.cleanedUp() {
		t.Errorf("the namespace was not deleted at the end")
	}
}

func TestSmokeFailsWhenPVCNotBound(t *testing.T) {
	t.Parallel()
	r := runSmoke(t, smokeCase{withPVC: true, logs: gvisorDmesg, env: map[string]string{
		"FAKE_PVC_PHASE":    "Pending",
		"SMOKE_PVC_TIMEOUT": "1",
	}}, nil)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	if !strings.Contains(r.stderr, "pvc gvisor-smoke/gvisor-smoke is 'Pending', not Bound") ||
		!strings.Contains(r.stderr, "StorageClass 'gvisor-workspace'") {
		t.Errorf("stderr does not name the PVC's phase and StorageClass")
	}
	if !r.has("describe pvc gvisor-smoke") {
		t.Errorf("the dump does not describe the PVC")
	}
	if !r.cleanedUp() {
		t.Errorf("the namespace was not deleted at the end")
	}
}

func TestSmokeKeepLeavesNamespace(t *testing.T) {
	t.Parallel()
	r := runSmoke(t, smokeCase{logs: gvisorDmesg, env: map[string]string{"KEEP": "1"}}, nil)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	if countCalls(r, "delete namespace") != 0 {
		t.Errorf("KEEP=1 deleted the namespace: %q", r.calls)
	}
	if !strings.Contains(r.stdout, "KEEP=1: namespace gvisor-smoke is left in place") {
		t.Errorf("KEEP=1 does not say the namespace was kept")
	}
}

func TestSmokeDeletesLeftoverNamespaceFirst(t *testing.T) {
	t.Parallel()
	r := runSmoke(t, smokeCase{logs: gvisorDmesg, env: map[string]string{"FAKE_NS_EXISTS": "1"}}, nil)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	del := r.index("delete namespace gvisor-smoke --ignore-not-found --wait=true")
	apply := r.index("apply -f")
	if del < 0 || del > apply {
		t.Errorf("want the leftover namespace deleted (and waited for) before applying: %q", r.calls)
	}
}

func TestSmokeCleansUpWhenInterrupted(t *testing.T) {
	t.Parallel()
	r := runSmoke(t, smokeCase{logs: "", env: map[string]string{
		"FAKE_POD_PHASES":     "Pending",
		"SMOKE_POD_TIMEOUT":   "600",
		"SMOKE_POLL_INTERVAL": "1",
	}}, func(cmd *exec.Cmd, log string) {
		// Once the script polls the pod, stop it as a cancelled CI job would.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(log); strings.Contains(string(b), "{.status.phase}") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		must(t, cmd.Process.Signal(syscall.SIGTERM))
	})
	if r.code != 143 {
		t.Errorf("exit %d, want 143 (SIGTERM)", r.code)
	}
	if !r.cleanedUp() {
		t.Errorf("the namespace was not deleted after SIGTERM: %q", r.calls)
	}
}

func TestSmokeUsageErrors(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no target", nil, nil, "usage: ci/smoke.sh TARGET"},
		{"missing folder", []string{"kind"}, map[string]string{"SMOKE_DIR": "/nonexistent/smoke"}, "no folder /nonexistent/smoke"},
		{"empty folder", []string{"kind"}, map[string]string{"SMOKE_DIR": t.TempDir()}, "must hold a namespace-*.yaml and a pod-*.yaml"},
		{"bad timeout", []string{"kind"}, map[string]string{"SMOKE_POD_TIMEOUT": "5m"}, "whole seconds"},
	}
	for _, c := range cases {
		cmd := exec.Command("sh", append([]string{filepath.Join(root, "ci", "smoke.sh")}, c.args...)...)
		cmd.Dir = t.TempDir()
		// No kubectl at all: setup errors must come before any cluster access.
		env := map[string]string{"PATH": "/usr/bin:/bin", "KUBECTL": "/nonexistent/kubectl"}
		for k, v := range c.env {
			env[k] = v
		}
		cmd.Env = environ(env)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: err %v, want exit 2", c.name, err)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s: output %q does not contain %q", c.name, out, c.want)
		}
	}
}

// The committed smoke manifests (smoke/<target>/, written by make generate) fit the script:
// a namespace applied first, the pod, and for gke the PVC whose binding is checked.
func TestSmokeGeneratedManifests(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"kind", "gke"} {
		dir := filepath.Join(repoRoot(t), "smoke", target)
		if _, err := os.Stat(filepath.Join(dir, "pod-gvisor-smoke.yaml")); err != nil {
			t.Fatalf("%s: %v (smoke manifests are generated by make generate)", target, err)
		}
		r := runSmoke(t, smokeCase{smokeDir: dir, logs: gvisorDmesg}, nil)
		if r.code != 0 {
			t.Errorf("%s: exit %d, want 0", target, r.code)
		}
		if r.index("apply -f", "namespace-gvisor-smoke.yaml") != 1 {
			t.Errorf("%s: the namespace is not applied first: %q", target, r.calls)
		}
		if target == "gke" && !r.has("get pvc gvisor-smoke") {
			t.Errorf("gke: the PVC on the gke StorageClass was not checked")
		}
	}
}
