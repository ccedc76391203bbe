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
