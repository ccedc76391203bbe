package smoketest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// scriptRepo makes a temporary git repository holding a copy of ci/<script> (the scripts work
// relative to their own folder), a bin/ folder for fakes and a state/ folder for what they record.
func scriptRepo(t *testing.T, script string) (dir, bin, state string) {
	t.Helper()
	dir = t.TempDir()
	bin, state = filepath.Join(dir, ".fake", "bin"), filepath.Join(dir, ".fake", "state")
	for _, d := range []string{filepath.Join(dir, "ci"), bin, state} {
		must(t, os.MkdirAll(d, 0o755))
	}
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "ci", script))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "ci", script), src, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".fake/\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "generated", "kind"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "generated", "kind", "runtimeclass-gvisor.yaml"), []byte("handler: runsc\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init")
	return dir, bin, state
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func run(t *testing.T, dir string, env map[string]string, name string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %v: exit %d\nstdout:\n%s\nstderr:\n%s", name, args, code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// fakeGvisorgen records its arguments and prints $FAKE_DIFF_OUT / $FAKE_DIFF_ERR with exit
// $FAKE_DIFF_RC; for `check` it prints $FAKE_CHECK_OUT with exit $FAKE_CHECK_RC.
const fakeGvisorgen = `#!/bin/sh
printf '%s\n' "$*" >>"$FAKE_STATE/gvisorgen.log"
case $1 in
diff)
	[ -z "${FAKE_DIFF_OUT:-}" ] || cat "$FAKE_DIFF_OUT"
	[ -z "${FAKE_DIFF_ERR:-}" ] || printf '%s\n' "$FAKE_DIFF_ERR" >&2
	exit "${FAKE_DIFF_RC:-0}" ;;
check)
	printf '%s\n' "${FAKE_CHECK_OUT:-fresh: 1 targets, 1 files}"
	exit "${FAKE_CHECK_RC:-0}" ;;
esac
exit 2
`

// fakeGh answers `gh api`: the comment list prints $FAKE_GH_IDS; PATCH and POST save the body
// (the -F body=@FILE argument) to state/<METHOD>.md and record the path; FAKE_GH_FAIL=1 fails.
const fakeGh = `#!/bin/sh
printf '%s\n' "$*" >>"$FAKE_STATE/gh.log"
[ "${FAKE_GH_FAIL:-0}" = 1 ] && { echo "HTTP 403: Resource not accessible by integration" >&2; exit 1; }
method=GET
body=
while [ $# -gt 0 ]; do
	case $1 in
	--method) method=$2; shift ;;
	body=@*) body=${1#body=@} ;;
	esac
	shift
done
if [ "$method" = GET ]; then
	[ -z "${FAKE_GH_IDS:-}" ] || printf '%s\n' $FAKE_GH_IDS
	exit 0
fi
cp "$body" "$FAKE_STATE/$method.md"
echo '{"id": 1}'
`

const sampleDiff = "### gvisorgen: rendered manifests, `origin/main (abc)` → `working tree`\n\n" +
	"1 resource differs in 1 target.\n\n| target | resource | change | lines |\n| --- | --- | --- | --- |\n" +
	"| kind | `daemonset-runsc-installer.yaml` | changed | +1 −1 |\n\n" +
	"<details><summary>kind: <code>daemonset-runsc-installer.yaml</code></summary>\n\n```diff\n-        value: \"20240212\"\n+        value: \"20250101\"\n```\n\n</details>\n"

type prDiffCase struct {
	args []string
	env  map[string]string
	diff string // the fake diff's stdout
}

type prDiffRun struct {
	code             int
	stdout, stderr   string
	patched, posted  string // bodies sent with PATCH / POST ("" when none)
	ghCalls, gvCalls string
}

func runPRDiff(t *testing.T, c prDiffCase) prDiffRun {
	t.Helper()
	dir, bin, state := scriptRepo(t, "pr-diff.sh")
	must(t, os.WriteFile(filepath.Join(bin, "gvisorgen"), []byte(fakeGvisorgen), 0o755))
	must(t, os.WriteFile(filepath.Join(bin, "gh"), []byte(fakeGh), 0o755))
	diffOut := filepath.Join(state, "diff.md")
	must(t, os.WriteFile(diffOut, []byte(c.diff), 0o644))
	env := map[string]string{
		"PATH":                bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GVISORGEN":           filepath.Join(bin, "gvisorgen"),
		"FAKE_STATE":          state,
		"FAKE_DIFF_OUT":       diffOut,
		"OUT":                 filepath.Join(state, "body.md"),
		"TMPDIR":              state,
		"GITHUB_ACTIONS":      "true",
		"GITHUB_BASE_REF":     "main",
		"GITHUB_REPOSITORY":   "gvisorgen/gvisorgen",
		"GITHUB_RUN_ID":       "77",
		"PR_NUMBER":           "5",
		"PR_HEAD_REPO":        "gvisorgen/gvisorgen",
		"PR_HEAD_SHA":         "0123456789abcdef0123",
		"COMMENT_AUTHOR":      "github-actions[bot]",
		"GITHUB_STEP_SUMMARY": filepath.Join(state, "summary.md"),
		"GH_TOKEN":            "fake",
	}
	for k, v := range c.env {
		env[k] = v
	}
	code, stdout, stderr := run(t, dir, env, "sh", append([]string{"ci/pr-diff.sh"}, c.args...)...)
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(state, name))
		return string(b)
	}
	return prDiffRun{code: code, stdout: stdout, stderr: stderr, patched: read("PATCH.md"), posted: read("POST.md"),
		ghCalls: read("gh.log"), gvCalls: read("gvisorgen.log")}
}

const marker = "<!-- gvisorgen-diff -->"

func TestPRDiffCreatesComment(t *testing.T) {
	t.Parallel()
	r := runPRDiff(t, prDiffCase{args: []string{"--post"}, env: map[string]string{"FAKE_DIFF_RC": "1"}, diff: sampleDiff})
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (a difference is not a failure of the job)", r.code)
	}
	if r.gvCalls != "diff --format markdown --base origin/main\n" {
		t.Errorf("gvisorgen called as %q, want diff --format markdown --base origin/main", r.gvCalls)
	}
	if !strings.HasPrefix(r.posted, marker+"\n") || !strings.Contains(r.posted, sampleDiff) {
		t.Errorf("posted body %q: want the marker first, then the diff", r.posted)
	}
	if !strings.Contains(r.posted, "0123456789ab") || !strings.Contains(r.posted, "/gvisorgen/gvisorgen/actions/runs/77") {
		t.Errorf("posted body lacks the head commit or the run link: %q", r.posted)
	}
	if r.patched != "" {
		t.Errorf("patched a comment that did not exist")
	}
	if !strings.Contains(r.ghCalls, "repos/gvisorgen/gvisorgen/issues/5/comments") ||
		!strings.Contains(r.ghCalls, `startswith("`+marker+`")`) || !strings.Contains(r.ghCalls, `"github-actions[bot]"`) {
		t.Errorf("the comment lookup does not filter on marker and author: %q", r.ghCalls)
	}
}

func TestPRDiffUpdatesExistingComment(t *testing.T) {
	t.Parallel()
	for _, rc := range []string{"0", "1"} {
		diff := sampleDiff
		if rc == "0" {
			diff = "### gvisorgen: rendered manifests\n\nNo difference in the rendered manifests.\n"
		}
		r := runPRDiff(t, prDiffCase{args: []string{"--post"}, env: map[string]string{"FAKE_DIFF_RC": rc, "FAKE_GH_IDS": "4242 4343"}, diff: diff})
		if r.code != 0 {
			t.Fatalf("rc %s: exit %d, want 0", rc, r.code)
		}
		if !strings.Contains(r.ghCalls, "--method PATCH repos/gvisorgen/gvisorgen/issues/comments/4242") {
			t.Errorf("rc %s: did not update comment 4242 in place: %q", rc, r.ghCalls)
		}
		if r.posted != "" {
			t.Errorf("rc %s: created a second comment", rc)
		}
		if !strings.HasPrefix(r.patched, marker) || !strings.Contains(r.patched, diff) {
			t.Errorf("rc %s: patched body %q", rc, r.patched)
		}
	}
}

func TestPRDiffNoDifferenceNoComment(t *testing.T) {
	t.Parallel()
	r := runPRDiff(t, prDiffCase{args: []string{"--post"}, diff: "No difference in the rendered manifests.\n"})
	if r.code != 0 || r.posted != "" || r.patched != "" {
		t.Errorf("exit %d, posted %q, patched %q: want 0 and nothing posted", r.code, r.posted, r.patched)
	}
}

func TestPRDiffErrorFailsAndIsPosted(t *testing.T) {
	t.Parallel()
	msg := `gvisorgen: head: cue/values.cue:12:3: gvisor.version: conflicting values "x" and =~"^[0-9]{8}"`
	r := runPRDiff(t, prDiffCase{args: []string{"--post"}, env: map[string]string{"FAKE_DIFF_RC": "2", "FAKE_DIFF_ERR": msg}})
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	if !strings.HasPrefix(r.posted, marker) || !strings.Contains(r.posted, "failed (exit 2)") || !strings.Contains(r.posted, msg) {
		t.Errorf("posted body %q: want the failure and gvisorgen's message", r.posted)
	}
	if !strings.Contains(r.stdout, "::error title=pr-diff::") {
		t.Errorf("no ::error:: annotation")
	}
}

func TestPRDiffPostFailure(t *testing.T) {
	t.Parallel()
	// A fork's read-only token: a warning, the job stays green, the body is in the summary.
	r := runPRDiff(t, prDiffCase{args: []string{"--post"}, diff: sampleDiff,
		env: map[string]string{"FAKE_DIFF_RC": "1", "FAKE_GH_FAIL": "1", "PR_HEAD_REPO": "someone/gvisorgen"}})
	if r.code != 0 || !strings.Contains(r.stdout, "::warning title=pr-diff::") {
		t.Errorf("fork: exit %d, stdout %q: want 0 and a warning", r.code, r.stdout)
	}
	// The same repository: posting must work, so a failure fails the job.
	r = runPRDiff(t, prDiffCase{args: []string{"--post"}, diff: sampleDiff,
		env: map[string]string{"FAKE_DIFF_RC": "1", "FAKE_GH_FAIL": "1"}})
	if r.code != 2 || !strings.Contains(r.stdout, "::error title=pr-diff::could not post") {
		t.Errorf("same repo: exit %d, stdout %q: want 2 and an error", r.code, r.stdout)
	}
}

func TestPRDiffLocal(t *testing.T) {
	t.Parallel()
	// No --post: prints the body, exits like gvisorgen diff, takes BASE as an argument.
	r := runPRDiff(t, prDiffCase{args: []string{"v1.0"}, env: map[string]string{"FAKE_DIFF_RC": "1", "GITHUB_BASE_REF": ""}, diff: sampleDiff})
	if r.code != 1 || !strings.HasPrefix(r.stdout, marker) || !strings.Contains(r.stdout, sampleDiff) {
		t.Errorf("exit %d stdout %q: want 1 and the body", r.code, r.stdout)
	}
	if r.gvCalls != "diff --format markdown --base v1.0\n" || r.ghCalls != "" {
		t.Errorf("gvisorgen %q, gh %q: want diff --base v1.0 and no gh", r.gvCalls, r.ghCalls)
	}
	// No base at all: gvisorgen's own default (the merge base with main).
	r = runPRDiff(t, prDiffCase{env: map[string]string{"GITHUB_BASE_REF": ""}, diff: "No difference.\n"})
	if r.code != 0 || r.gvCalls != "diff --format markdown\n" {
		t.Errorf("exit %d, gvisorgen %q: want 0 and no --base", r.code, r.gvCalls)
	}
}

func TestPRDiffStaysUnderCommentLimit(t *testing.T) {
	t.Parallel()
	// gvisorgen fills its output up to the limit; marker and footer must not push it over.
	head := strings.SplitN(sampleDiff, "<details>", 2)[0]
	filler := "<details><summary>kind</summary>\n\n```diff\n" + strings.Repeat("+ line -\n", 8000) + "```\n\n</details>\n"
	diff := head + filler
	diff = diff[:65536-10] + "\n"
	if n := utf8.RuneCountInString(diff); n > 65536 {
		t.Fatalf("fixture is %d characters", n)
	}
	r := runPRDiff(t, prDiffCase{args: []string{"--post"}, env: map[string]string{"FAKE_DIFF_RC": "1"}, diff: diff})
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if n := utf8.RuneCountInString(r.posted); n > 65536 || n == 0 {
		t.Errorf("posted body is %d characters, want 1..65536", n)
	}
	if !strings.Contains(r.posted, "| kind | `daemonset-runsc-installer.yaml`") || !strings.Contains(r.posted, "were cut to fit") {
		t.Errorf("the cut body should keep the summary table and say what was cut: %.300q", r.posted)
	}
}

// ----- drift.sh

// fakeMake: `build` does nothing; `generate` applies $FAKE_GENERATE (a shell snippet run in the
// repository) to simulate what the generator writes.
const fakeMake = `#!/bin/sh
printf '%s\n' "$*" >>"$FAKE_STATE/make.log"
for a in "$@"; do
	case $a in generate) sh -c "${FAKE_GENERATE:-:}" ;; esac
done
`

func runDrift(t *testing.T, env map[string]string, prepare func(dir string)) (int, string, string, string) {
	t.Helper()
	dir, bin, state := scriptRepo(t, "drift.sh")
	must(t, os.WriteFile(filepath.Join(bin, "gvisorgen"), []byte(fakeGvisorgen), 0o755))
	must(t, os.WriteFile(filepath.Join(bin, "make"), []byte(fakeMake), 0o755))
	if prepare != nil {
		prepare(dir)
	}
	full := map[string]string{
		"MAKE":                filepath.Join(bin, "make"),
		"GVISORGEN":           filepath.Join(bin, "gvisorgen"),
		"FAKE_STATE":          state,
		"TMPDIR":              state,
		"GITHUB_ACTIONS":      "true",
		"GITHUB_STEP_SUMMARY": filepath.Join(state, "summary.md"),
	}
	for k, v := range env {
		full[k] = v
	}
	code, stdout, stderr := run(t, dir, full, "sh", "ci/drift.sh")
	summary, _ := os.ReadFile(filepath.Join(state, "summary.md"))
	return code, stdout, stderr, string(summary)
}

func TestDriftFresh(t *testing.T) {
	t.Parallel()
	code, stdout, _, _ := runDrift(t, nil, nil)
	if code != 0 || !strings.Contains(stdout, "exactly what 'make generate' writes") {
		t.Errorf("exit %d: want 0 and a fresh message", code)
	}
}

func TestDriftStale(t *testing.T) {
	t.Parallel()
	report := "stale: generated/kind/runtimeclass-gvisor.yaml\n--- a/generated/kind/runtimeclass-gvisor.yaml\n+++ b/generated/kind/runtimeclass-gvisor.yaml\n-handler: runsc\n+handler: runsc2"
	code, stdout, _, summary := runDrift(t, map[string]string{
		"FAKE_CHECK_RC": "1", "FAKE_CHECK_OUT": report,
		"FAKE_GENERATE": "echo 'handler: runsc2' > generated/kind/runtimeclass-gvisor.yaml; echo x > generated/kind/extra.yaml",
	}, nil)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{report, " M generated/kind/runtimeclass-gvisor.yaml", "?? generated/kind/extra.yaml",
		"::error title=drift::", "Run 'make generate' and commit"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.Contains(summary, "stale: generated/kind/runtimeclass-gvisor.yaml") {
		t.Errorf("job summary lacks the check report: %q", summary)
	}
	// Even when check (wrongly) says fresh, a changed tree after generate is drift.
	code, _, _, _ = runDrift(t, map[string]string{"FAKE_GENERATE": "echo new > generated/kind/new.yaml"}, nil)
	if code != 1 {
		t.Errorf("a file written by generate: exit %d, want 1", code)
	}
}

func TestDriftCheckError(t *testing.T) {
	t.Parallel()
	code, _, stderr, _ := runDrift(t, map[string]string{"FAKE_CHECK_RC": "2", "FAKE_CHECK_OUT": "cue/values.cue:3:1: expected '}'"}, nil)
	if code != 2 || !strings.Contains(stderr, "cue/values.cue:3:1") {
		t.Errorf("exit %d stderr %q: want 2 and check's message", code, stderr)
	}
}

func TestDriftLocalUncommittedChanges(t *testing.T) {
	t.Parallel()
	dirty := func(dir string) {
		must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("wip\n"), 0o644))
	}
	// Uncommitted work of one's own that generate does not touch is not drift.
	code, stdout, _, _ := runDrift(t, nil, dirty)
	if code != 0 || !strings.Contains(stdout, "uncommitted changes") {
		t.Errorf("exit %d: want 0 with a note about uncommitted changes", code)
	}
	// What generate changes on top of it is.
	code, _, _, _ = runDrift(t, map[string]string{"FAKE_GENERATE": "echo y > generated/kind/y.yaml"}, dirty)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
