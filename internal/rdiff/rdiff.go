// Package rdiff compares the rendered output of two evaluations, per target
// and per resource, and prints it for a terminal or a pull-request comment.
package rdiff

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// Entry is one resource that differs.
type Entry struct {
	Target string
	File   string // file name inside generated/<target>/
	Change string // "added", "removed" or "changed"
	Plus   int    // lines added
	Minus  int    // lines removed
	Diff   string // unified diff
}

// Compare returns the differences of the rendered files (generated/) between
// base and head, sorted by target and file.
func Compare(base, head []tree.File) []Entry {
	b, h := rendered(base), rendered(head)
	var out []Entry
	for p, old := range b {
		if nw, ok := h[p]; !ok {
			out = append(out, entry(p, "removed", tree.Change{Action: tree.Delete, Path: p, Old: old}))
		} else if string(nw) != string(old) {
			out = append(out, entry(p, "changed", tree.Change{Action: tree.Update, Path: p, Old: old, New: nw}))
		}
	}
	for p, nw := range h {
		if _, ok := b[p]; !ok {
			out = append(out, entry(p, "added", tree.Change{Action: tree.Create, Path: p, New: nw}))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Target != out[j].Target {
			return out[i].Target < out[j].Target
		}
		return out[i].File < out[j].File
	})
	return out
}

// rendered keeps generated/<target>/<file>, headers removed.
func rendered(files []tree.File) map[string][]byte {
	m := map[string][]byte{}
	for _, f := range files {
		if strings.HasPrefix(f.Path, layout.GeneratedDir+"/") {
			m[f.Path] = tree.StripHeader(f.Data)
		}
	}
	return m
}

func entry(p, change string, c tree.Change) Entry {
	rel := strings.TrimPrefix(p, layout.GeneratedDir+"/")
	target, file := path.Split(rel)
	e := Entry{Target: strings.TrimSuffix(target, "/"), File: file, Change: change, Diff: tree.UnifiedDiff(c)}
	for _, l := range strings.Split(e.Diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			e.Plus++
		case strings.HasPrefix(l, "-"):
			e.Minus++
		}
	}
	return e
}

// Text writes the differences as unified diffs, grouped by target.
func Text(w io.Writer, entries []Entry) {
	last := ""
	for _, e := range entries {
		if e.Target != last {
			fmt.Fprintf(w, "# target %s\n", e.Target)
			last = e.Target
		}
		fmt.Fprint(w, e.Diff)
	}
}

// MaxComment is GitHub's limit for a comment body, in characters.
const MaxComment = 65536

// Markdown renders a pull-request comment: a summary table first, then one
// collapsible diff per resource while they fit in limit characters; a diff
// that does not fit is cut, with a note that says what was cut.
func Markdown(entries []Entry, base, head string, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### gvisorgen: rendered manifests, `%s` → `%s`\n\n", base, head)
	if len(entries) == 0 {
		b.WriteString("No difference in the rendered manifests.\n")
		return b.String()
	}
	targets := map[string]bool{}
	for _, e := range entries {
		targets[e.Target] = true
	}
	fmt.Fprintf(&b, "%d resources differ in %d targets.\n\n", len(entries), len(targets))
	b.WriteString("| target | resource | change | lines |\n| --- | --- | --- | --- |\n")
	// Reserve room for the closing note and for what a CI script adds around the
	// body (a marker, a footer), so the comment never exceeds the limit.
	const reserve = 1024
	for i, e := range entries {
		row := fmt.Sprintf("| %s | `%s` | %s | +%d −%d |\n", e.Target, e.File, e.Change, e.Plus, e.Minus)
		if b.Len()+len(row) > limit-reserve {
			fmt.Fprintf(&b, "\n… %d more rows cut to stay under GitHub's comment limit; run `gvisorgen diff` locally for all of them.\n", len(entries)-i)
			return b.String()
		}
		b.WriteString(row)
	}
	b.WriteString("\n")
	for i, e := range entries {
		head := fmt.Sprintf("<details><summary>%s: <code>%s</code> (%s, +%d −%d)</summary>\n\n```diff\n", e.Target, e.File, e.Change, e.Plus, e.Minus)
		tail := "```\n\n</details>\n\n"
		room := limit - reserve - b.Len() - len(head) - len(tail)
		if room < 200 {
			fmt.Fprintf(&b, "… %d more diffs cut to stay under GitHub's comment limit (%s and on); run `gvisorgen diff` locally for them.\n", len(entries)-i, e.File)
			return b.String()
		}
		diff := e.Diff
		var note string
		if len(diff) > room {
			cut := strings.LastIndex(diff[:room], "\n") + 1
			note = fmt.Sprintf("… cut: %d more lines of this diff not shown (comment limit)\n", strings.Count(diff[cut:], "\n"))
			diff = diff[:cut]
		}
		b.WriteString(head)
		b.WriteString(strings.ReplaceAll(diff, "```", "` ` `"))
		b.WriteString(tail)
		if note != "" {
			b.WriteString(note + "\n")
		}
	}
	return b.String()
}
