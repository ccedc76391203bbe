package smoketest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// runGate runs `sh ci/smoke.sh --gate TARGET` with only env set (no GCP_* from the test's
// own environment), and returns its exit code, stdout and what it wrote to $GITHUB_OUTPUT.
func runGate(t *testing.T, target string, env map[string]string) (int, string, map[string]string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "github_output")
	full := map[string]string{"GITHUB_OUTPUT": out, "GITHUB_ACTIONS": "true"}
	for _, k := range []string{"GCP_PROJECT_ID", "GCP_SA_KEY", "HAVE_GCP_SA_KEY", "GCP_WORKLOAD_IDENTITY_PROVIDER",
		"GCP_SERVICE_ACCOUNT", "ACTIONS_ID_TOKEN_REQUEST_URL", "GKE_CLUSTER", "GKE_LOCATION",
		"AWS_ROLE_ARN", "AWS_REGION", "EKS_CLUSTER", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID",
		"AKS_RESOURCE_GROUP", "AKS_CLUSTER"} {
		full[k] = ""
	}
	for k, v := range env {
		full[k] = v
	}
	cmd := exec.Command("sh", filepath.Join(repoRoot(t), "ci", "smoke.sh"), "--gate", target)
	cmd.Env = environ(full)
	stdout, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{}
	b, _ := os.ReadFile(out)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			outputs[k] = v
		}
	}
	t.Logf("gate %s %v: exit %d, outputs %v\n%s", target, env, code, outputs, stdout)
	return code, string(stdout), outputs
}

// The gcp-standard-rwo leg is skipped, with a warning, whenever the project or every credential
// is missing; it runs with WIF (preferred) or the key; credentials without a cluster are an error.
func TestGateGKE(t *testing.T) {
	t.Parallel()
	cluster := map[string]string{"GKE_CLUSTER": "gvisor-ci", "GKE_LOCATION": "europe-west1"}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range cluster {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	wif := map[string]string{
		"GCP_WORKLOAD_IDENTITY_PROVIDER": "projects/1/locations/global/workloadIdentityPools/gh/providers/gh",
		"GCP_SERVICE_ACCOUNT":            "ci@p.iam.gserviceaccount.com",
	}
	cases := []struct {
		name     string
		env      map[string]string
		code     int
		enabled  string
		auth     string
		messages []string // in the output
	}{
		{"nothing set", with(nil), 0, "false", "",
			[]string{"::warning title=gcp-standard-rwo skipped::", "GCP_PROJECT_ID and GCP_SA_KEY"}},
		{"no key (as the workflow maps an absent secret)", with(map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "false"}), 0, "false", "",
			[]string{"::warning title=gcp-standard-rwo skipped::", "GCP_SA_KEY"}},
		{"no project", with(map[string]string{"HAVE_GCP_SA_KEY": "true"}), 0, "false", "",
			[]string{"::warning title=gcp-standard-rwo skipped::", "GCP_PROJECT_ID not set"}},
		{"key", with(map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "true"}), 0, "true", "key",
			[]string{"cluster gvisor-ci in europe-west1"}},
		{"key as a value (local runs)", with(map[string]string{"GCP_PROJECT_ID": "p", "GCP_SA_KEY": "{}"}), 0, "true", "key", nil},
		{"WIF preferred over the key", with(mergeMaps(wif, map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "true",
			"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example/x"})), 0, "true", "wif", nil},
		{"WIF without an OIDC token (a fork's PR) and no key", with(mergeMaps(wif, map[string]string{"GCP_PROJECT_ID": "p"})), 0, "false", "",
			[]string{"::warning title=gcp-standard-rwo skipped::"}},
		{"WIF without an OIDC token falls back to the key", with(mergeMaps(wif, map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "true"})), 0, "true", "key", nil},
		{"credentials but no cluster", map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "true", "GKE_LOCATION": "europe-west1"}, 1, "", "",
			[]string{"::error title=gcp-standard-rwo misconfigured::", "GKE_CLUSTER"}},
		{"credentials but no location", map[string]string{"GCP_PROJECT_ID": "p", "HAVE_GCP_SA_KEY": "true", "GKE_CLUSTER": "c"}, 1, "", "",
			[]string{"GKE_LOCATION"}},
	}
	for _, c := range cases {
		code, out, outputs := runGate(t, "gke", c.env)
		if code != c.code || outputs["enabled"] != c.enabled || outputs["auth"] != c.auth {
			t.Errorf("%s: exit %d enabled=%q auth=%q, want %d %q %q", c.name, code, outputs["enabled"], outputs["auth"], c.code, c.enabled, c.auth)
		}
		for _, m := range c.messages {
			if !strings.Contains(out, m) {
				t.Errorf("%s: output %q lacks %q", c.name, out, m)
			}
		}
		if c.enabled == "false" && !strings.Contains(out, "::warning") {
			t.Errorf("%s: skipped without a ::warning::", c.name)
		}
	}
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestGateKind(t *testing.T) {
	t.Parallel()
	if code, _, o := runGate(t, "kind", nil); code != 0 || o["enabled"] != "true" {
		t.Errorf("kind: exit %d enabled=%q, want 0 true", code, o["enabled"])
	}
	// A target without a leg is an error, not a silent run.
	if code, out, _ := runGate(t, "nosuch", nil); code == 0 || !strings.Contains(out, "no smoke leg for target nosuch") {
		t.Errorf("nosuch: exit %d output %q", code, out)
	}
}

// The eks and aks legs run on GitHub's OIDC token and their credential variables; without
// them they are skipped with a warning; credentials without the cluster's names are an error.
func TestGateEKSAndAKS(t *testing.T) {
	t.Parallel()
	oidc := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example"}
	for _, c := range []struct {
		target  string
		creds   map[string]string
		cluster map[string]string
	}{
		{"eks", map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::1:role/ci", "AWS_REGION": "eu-west-1"}, map[string]string{"EKS_CLUSTER": "gvisor-ci"}},
		{"aks", map[string]string{"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t", "AZURE_SUBSCRIPTION_ID": "s"}, map[string]string{"AKS_RESOURCE_GROUP": "rg", "AKS_CLUSTER": "gvisor-ci"}},
	} {
		none := map[string]string{}
		for k := range mergeMaps(c.creds, c.cluster) {
			none[k] = ""
		}
		if code, out, o := runGate(t, c.target, none); code != 0 || o["enabled"] != "false" || !strings.Contains(out, "::warning title="+c.target+" skipped::") {
			t.Errorf("%s without credentials: exit %d enabled=%q output %q", c.target, code, o["enabled"], out)
		}
		if code, _, o := runGate(t, c.target, mergeMaps(mergeMaps(none, c.creds), c.cluster)); code != 0 || o["enabled"] != "false" {
			t.Errorf("%s without an OIDC token (a fork): exit %d enabled=%q", c.target, code, o["enabled"])
		}
		if code, out, _ := runGate(t, c.target, mergeMaps(mergeMaps(none, c.creds), oidc)); code == 0 || !strings.Contains(out, "misconfigured") {
			t.Errorf("%s with credentials but no cluster: exit %d output %q", c.target, code, out)
		}
		if code, _, o := runGate(t, c.target, mergeMaps(mergeMaps(mergeMaps(none, c.creds), c.cluster), oidc)); code != 0 || o["enabled"] != "true" {
			t.Errorf("%s configured: exit %d enabled=%q", c.target, code, o["enabled"])
		}
	}
}

// Every profile (#ProfileFacts in the CUE module) has its smoke leg: a matrix entry whose
// target is the profile's example target, and a gate for it in ci/smoke.sh.
func TestEveryProfileHasASmokeLeg(t *testing.T) {
	t.Parallel()
	ev, err := eval.Load(eval.Options{Root: repoRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "workflows", "gvisor-smoke.yml"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+target: ([a-z0-9-]+)$`).FindAllStringSubmatch(string(wf), -1) {
		targets[m[1]] = true
	}
	smoke, err := os.ReadFile(filepath.Join(repoRoot(t), "ci", "smoke.sh"))
	if err != nil {
		t.Fatal(err)
	}
	names := ev.ProfileNames()
	if len(names) < 4 {
		t.Fatalf("profiles: %v", names)
	}
	for _, p := range names {
		if !targets[p] {
			t.Errorf("profile %s has no leg in gvisor-smoke.yml (matrix target: %s)", p, p)
		}
		if !regexp.MustCompile(`(?m)^\s+` + p + `\)`).Match(smoke) {
			t.Errorf("profile %s has no gate in ci/smoke.sh", p)
		}
	}
}

// step is one step of a workflow job, as text.
type step struct{ name, uses, run, cond, text string }

// steps splits the steps of the first job of a workflow (stdlib only: steps are the
// "      - " items under "    steps:"), keeping the fields this test reads.
func steps(t *testing.T, path string) []step {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	_, rest, ok := strings.Cut(string(b), "\n    steps:\n")
	if !ok {
		t.Fatalf("%s: no steps", path)
	}
	field := func(item, key string) string {
		m := regexp.MustCompile(`(?m)^        ` + key + `: (.*)$`).FindStringSubmatch(item)
		if m == nil {
			m = regexp.MustCompile(`(?m)^      - ` + key + `: (.*)$`).FindStringSubmatch(item)
		}
		if m == nil {
			return ""
		}
		return m[1]
	}
	var out []step
	for _, item := range strings.Split(rest, "\n      - ")[1:] {
		item = "      - " + item
		out = append(out, step{name: field(item, "name"), uses: field(item, "uses"), run: field(item, "run"),
			cond: field(item, "if"), text: item})
	}
	return out
}

// The smoke workflow's skip path: when the gate says enabled=false, nothing after it touches a
// cluster or a cloud: every later step is for the kind leg only or needs enabled == 'true'.
func TestSmokeWorkflowSkipPath(t *testing.T) {
	t.Parallel()
	ss := steps(t, filepath.Join(repoRoot(t), ".github", "workflows", "gvisor-smoke.yml"))
	if len(ss) < 10 {
		t.Fatalf("parsed %d steps from gvisor-smoke.yml, want the full job", len(ss))
	}
	gate := -1
	for i, s := range ss {
		if strings.Contains(s.run, "ci/smoke.sh --gate") {
			gate = i
			if !strings.Contains(s.text, "id: gate") {
				t.Errorf("the gate step has no id: gate")
			}
		}
	}
	if gate < 0 {
		t.Fatal("no step runs ci/smoke.sh --gate")
	}
	for i, s := range ss {
		if i <= gate {
			if s.cond != "" {
				t.Errorf("step %d (%s) before the gate is conditional", i, s.name+s.uses)
			}
			continue
		}
		kindOnly := strings.Contains(s.cond, "matrix.leg == 'kind'")
		gated := strings.Contains(s.cond, "steps.gate.outputs.enabled == 'true'")
		if !kindOnly && !gated {
			t.Errorf("step %q runs on a skipped gcp-standard-rwo leg: if: %q", s.name, s.cond)
		}
		if strings.Contains(s.uses, "google-github-actions/") &&
			(!gated || !strings.Contains(s.cond, "matrix.leg == 'gcp-standard-rwo'")) {
			t.Errorf("cloud step %q is not limited to an enabled gcp-standard-rwo leg: if: %q", s.name, s.cond)
		}
	}
	// Every action is pinned by a full commit SHA.
	for _, s := range ss {
		if s.uses != "" && !regexp.MustCompile(`@[0-9a-f]{40}( |$)`).MatchString(s.uses) {
			t.Errorf("action %q is not pinned by commit SHA", s.uses)
		}
	}
}

// Every action of every workflow is pinned by a full commit SHA with its tag in a comment.
func TestWorkflowActionsPinned(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), ".github", "workflows", "*.yml"))
	must(t, err)
	if len(files) < 3 {
		t.Fatalf("want drift.yml, pr-diff.yml and gvisor-smoke.yml, got %v", files)
	}
	uses := regexp.MustCompile(`(?m)^\s*(?:- )?uses: (\S+)(.*)$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		for _, m := range uses.FindAllStringSubmatch(string(b), -1) {
			if !regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`).MatchString(m[1]) || !strings.Contains(m[2], "# v") {
				t.Errorf("%s: %q is not pinned as owner/repo@<40-hex sha> # vX", filepath.Base(f), m[0])
			}
		}
	}
}
