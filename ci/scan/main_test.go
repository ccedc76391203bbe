package main

import (
	"os"
	"strings"
	"testing"
)

// TestSecurityDocListsEveryAcceptedFinding: docs/security.md shows
// accepted.tsv row for row (tool, check, object, reason), and nothing else.
func TestSecurityDocListsEveryAcceptedFinding(t *testing.T) {
	acc, err := ReadAccepted("accepted.tsv")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	want := map[string]bool{}
	for _, a := range acc {
		row := "| " + a.Tool + " | `" + a.Check + "` | `" + a.Object + "` | " + a.Reason + " |"
		want[row] = true
		if !strings.Contains(readme, row+"\n") {
			t.Errorf("docs/security.md lacks the row\n%s", row)
		}
	}
	for _, l := range strings.Split(readme, "\n") {
		if (strings.HasPrefix(l, "| kube-score | `") || strings.HasPrefix(l, "| trivy | `")) && !want[l] {
			t.Errorf("docs/security.md lists a finding accepted.tsv does not:\n%s", l)
		}
	}
}

// TestReport: a justified finding passes; a new one and an unused row of a
// tool that ran fail; an unused row of a tool that did not run is not judged.
func TestReport(t *testing.T) {
	acc := []Accepted{
		{"kube-score", "a", "Pod/*", "why a"},
		{"kube-score", "b", "Pod/x", "why b"},
		{"trivy", "KSV001", "Pod/x", "why t"},
	}
	ok := []Finding{{"kube-score", "a", "Pod/y", "d"}, {"kube-score", "b", "Pod/x", "d"}}
	if got := report(ok, acc, map[string]bool{"kube-score": true}); got != 0 {
		t.Errorf("justified findings: exit %d", got)
	}
	if got := report(ok[:1], acc, map[string]bool{"kube-score": true}); got != 1 {
		t.Errorf("a stale row: exit %d, want 1", got)
	}
	if got := report(append(ok, Finding{"kube-score", "c", "Pod/x", "d"}), acc, map[string]bool{"kube-score": true}); got != 1 {
		t.Errorf("a new finding: exit %d, want 1", got)
	}
	if got := report(ok, acc, map[string]bool{"kube-score": true, "trivy": true}); got != 1 {
		t.Errorf("trivy ran without its finding: exit %d, want 1", got)
	}
}
