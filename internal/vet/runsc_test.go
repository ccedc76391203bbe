package vet

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

func TestRunscFlagMatches(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        string // "" none, "refuse", "warn"
	}{
		{"allow-flag-override", "true", "refuse"},
		{"allow-flag-override", "false", ""},
		{"TESTONLY-unsafe-nonroot", "true", "refuse"},
		{"network", "host", "refuse"},
		{"network", "none", ""},
		{"network", "sandbox", ""},
		{"host-uds", "all", "refuse"},
		{"host-uds", "none", ""},
		{"host-fifo", "open", "refuse"},
		{"character-device-policy", "passthrough", "refuse"},
		{"character-device-policy", "emulated-only", ""},
		{"net-raw", "true", "warn"},
		{"net-raw", "false", ""},
		{"overlay2", "none", "warn"},
		{"overlay2", "root:self", ""},
		{"platform", "systrap", ""},
	} {
		got := ""
		for _, f := range RunscFlags {
			if f.matches(c.name, c.value) {
				got = map[bool]string{true: "refuse", false: "warn"}[f.Refuse]
			}
		}
		if got != c.want {
			t.Errorf("%s=%s: got %q, want %q", c.name, c.value, got, c.want)
		}
	}
}

// TestRunscFindings: a refused flag is policy runsc-isolation (waivable), a
// weakening one a warning naming the target, a harmless one nothing.
func TestRunscFindings(t *testing.T) {
	tg := eval.Target{Name: "x", Values: []byte(`{"gvisor":{"enabled":true,"runsc":{"config":{"host-uds":"create","net-raw":true,"platform":"systrap"}}}}`)}
	errs, warns := runscFindings(tg)
	if len(errs) != 1 || errs[0].policy != "runsc-isolation" || !strings.Contains(errs[0].msg, "host-uds = create") {
		t.Errorf("errors: %+v", errs)
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0].Message, "target x: gvisor.runsc.config net-raw = true weakens the sandbox") {
		t.Errorf("warnings: %+v", warns)
	}
	r := Targets([]eval.Target{{Name: "x", Values: []byte(`{"policy":{"waive":{"runsc-isolation":"debugging cluster"}},"gvisor":{"enabled":true,"runsc":{"config":{"host-uds":"all"}}}}`)}}, Facts{})
	if len(r.Errors) != 0 {
		t.Errorf("waived runsc-isolation still refused: %q", r.Errors)
	}
}

// TestRunscFlagsInSecurityDoc: docs/security.md's table lists exactly RunscFlags, each
// with its weakening value and whether vet refuses or warns.
func TestRunscFlagsInSecurityDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9-]+\\*?)` \\| `([^`]*)` \\| (refused|warning) \\|")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		got[m[1]] = m[2] + " " + m[3]
	}
	want := map[string]string{}
	for _, f := range RunscFlags {
		n := f.Name
		if f.Prefix {
			n += "*"
		}
		want[n] = f.Weak + " " + map[bool]string{true: "refused", false: "warning"}[f.Refuse]
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("docs/security.md runsc flag table: %s is %q, want %q", n, got[n], w)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("docs/security.md runsc flag table lists %s, which RunscFlags does not", n)
		}
	}
}
