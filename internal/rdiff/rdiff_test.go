package rdiff

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/tree"
)

func files(n int, version string) []tree.File {
	var out []tree.File
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("kind: DaemonSet\nversion: %q\n%s", version, strings.Repeat("line\n", 200))
		out = append(out, tree.File{Path: fmt.Sprintf("generated/t%03d/daemonset-x.yaml", i), Data: tree.WithHeader([]byte(body))})
		out = append(out, tree.File{Path: fmt.Sprintf("overlays/t%03d/daemonset-x.yaml", i), Data: []byte("ignored " + version)})
	}
	return out
}

func TestCompare(t *testing.T) {
	base := files(2, "a")
	head := append(files(1, "b"), tree.File{Path: "generated/new/runtimeclass-gvisor.yaml", Data: []byte("kind: RuntimeClass\n")})
	got := Compare(base, head)
	var s []string
	for _, e := range got {
		s = append(s, fmt.Sprintf("%s/%s %s +%d-%d", e.Target, e.File, e.Change, e.Plus, e.Minus))
	}
	want := "new/runtimeclass-gvisor.yaml added +1-0,t000/daemonset-x.yaml changed +1-1,t001/daemonset-x.yaml removed +0-202"
	if strings.Join(s, ",") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(s, ","), want)
	}
}

// TestMarkdownLimit: whatever the size of the change, the comment stays under
// the limit, the summary comes first, and what was cut is said.
func TestMarkdownLimit(t *testing.T) {
	for _, n := range []int{1, 50, 400, 3000} {
		entries := Compare(files(n, "a"), files(n, "b"))
		for _, limit := range []int{MaxComment, 8000} {
			md := Markdown(&Diff{Base: Side{Label: "main"}, Head: Side{Label: "head"}, Entries: entries}, limit)
			if len(md) > limit-200 {
				t.Errorf("n=%d limit=%d: %d characters", n, limit, len(md))
			}
			if !strings.Contains(md, "| target | resource | change | lines |") {
				t.Errorf("n=%d: no summary table", n)
			}
			full := len(Markdown(&Diff{Base: Side{Label: "main"}, Head: Side{Label: "head"}, Entries: entries}, 1<<30))
			if full > limit && !strings.Contains(md, "cut") {
				t.Errorf("n=%d limit=%d: %d characters cut to %d without a note", n, limit, full, len(md))
			}
		}
	}
	if md := Markdown(&Diff{Base: Side{Label: "main"}, Head: Side{Label: "head"}}, MaxComment); !strings.Contains(md, "No difference") {
		t.Errorf("empty diff: %q", md)
	}
}

// TestTextNeverEmpty: the text format says "no difference" in one line
// rather than print nothing (which reads like a command that did not run),
// names the targets it was filtered to, and says that a stale side's
// committed files are the same when only the stale note differs.
func TestTextNeverEmpty(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Diff
		want []string
	}{
		{"same", Diff{Base: Side{Label: "HEAD (0123456789ab)"}, Head: Side{Label: "working tree"}},
			[]string{"no difference between HEAD (0123456789ab) and working tree: the rendered manifests, the delivery objects and the smoke test are the same\n"}},
		{"filtered", Diff{Base: Side{Label: "main"}, Head: Side{Label: "working tree"}, Targets: []string{"gke"}},
			[]string{"no difference between main and working tree (targets gke, and the fleet-wide files): "}},
		{"stale side", Diff{Base: Side{Label: "main"}, Head: Side{Label: "working tree", Stale: []string{"generated/kind/x.yaml"}}},
			[]string{"warning: head (working tree) is stale", "  stale generated/kind/x.yaml\n", "the committed files of main and working tree are the same\n"}},
	} {
		var b strings.Builder
		Text(&b, &tc.d)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output %q lacks %q", tc.name, b.String(), w)
			}
		}
		if n := strings.Count(b.String(), "\n"); tc.name != "stale side" && n != 1 {
			t.Errorf("%s: %d lines, want one: %q", tc.name, n, b.String())
		}
	}
	// A difference is printed as diffs, with no such line.
	var b strings.Builder
	Text(&b, &Diff{Entries: Compare(files(1, "a"), files(1, "b"))})
	if strings.Contains(b.String(), "no difference") || !strings.Contains(b.String(), "# target t000\n") {
		t.Errorf("a difference: %q", b.String())
	}
}
