// Package rdiff compares the rendered output of two evaluations, per target
// and per resource, and prints it for a terminal or a pull-request comment.
package rdiff

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// Entry is one file that differs.
type Entry struct {
	Target string // "" for a fleet-wide file (delivery/applicationset-…)
	// File is the file name inside generated/<target>/ for rendered
	// manifests, else the path from the repository root.
	File   string
	Path   string // the path from the repository root
	Change string // "added", "removed" or "changed"
	Plus   int    // lines added
	Minus  int    // lines removed
	Diff   string // unified diff
}

// Side is one side of a diff: what it is, and the committed files that
// differ from what its own inputs evaluate to (a stale or hand-edited
// commit). Argo CD and Flux sync the committed files.
type Side struct {
	Label string
	Stale []string
}

// Diff is the comparison of two sides' committed trees.
type Diff struct {
	Base, Head Side
	Entries    []Entry
	// Targets are the targets the entries were filtered to (--target);
	// empty for all of them.
	Targets []string
}

// Differs reports whether anything differs or a side is stale.
func (d *Diff) Differs() bool {
	return len(d.Entries) > 0 || len(d.Base.Stale) > 0 || len(d.Head.Stale) > 0
}

// Compare returns the differences between two trees of output files (every
// folder generate writes), sorted by target and file: the rendered manifests
// (generated/), the delivery objects and the smoke test, and a target's
// overlay files when they change while its rendered manifests do not (a
// hand-edited overlay: Argo CD and Flux sync the overlay, not generated/).
// Headers are removed before comparing.
func Compare(base, head []tree.File) []Entry {
	b, h := byPath(base), byPath(head)
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
	rendered := map[string]bool{}
	for _, e := range out {
		if top, _, _, _ := layout.Output(e.Path); top == layout.GeneratedDir {
			rendered[e.Target] = true
		}
	}
	out = slices.DeleteFunc(out, func(e Entry) bool {
		top, _, _, _ := layout.Output(e.Path)
		return top == layout.OverlaysDir && rendered[e.Target]
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Target != out[j].Target {
			return out[i].Target < out[j].Target
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// byPath keeps the output files, headers removed.
func byPath(files []tree.File) map[string][]byte {
	m := map[string][]byte{}
	for _, f := range files {
		if _, _, _, ok := layout.Output(f.Path); ok {
			m[f.Path] = tree.StripHeader(f.Data)
		}
	}
	return m
}

func entry(p, change string, c tree.Change) Entry {
	top, target, rest, _ := layout.Output(p)
	e := Entry{Target: target, File: p, Path: p, Change: change, Diff: c.UnifiedDiff()}
	if top == layout.GeneratedDir {
		e.File = rest
	}
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

// fleet names the target column of fleet-wide files.
func targetName(t string) string {
	if t == "" {
		return "(fleet)"
	}
	return t
}

// staleNote says which sides are stale, or "".
func staleNote(d *Diff, markdown bool) string {
	var b strings.Builder
	for _, s := range []struct {
		name string
		side Side
	}{{"base", d.Base}, {"head", d.Head}} {
		if len(s.side.Stale) == 0 {
			continue
		}
		if markdown {
			fmt.Fprintf(&b, "> **Warning: %s (`%s`) is stale.** %d committed files differ from what its own inputs evaluate to; Argo CD and Flux sync the committed files, which is what this diff compares. Run `gvisorgen generate` and commit. Stale: %s\n\n",
				s.name, s.side.Label, len(s.side.Stale), codeList(s.side.Stale, 20))
		} else {
			fmt.Fprintf(&b, "warning: %s (%s) is stale: %d committed files differ from what its own inputs evaluate to; Argo CD and Flux sync the committed files, which is what this diff compares (run `gvisorgen generate` and commit):\n", s.name, s.side.Label, len(s.side.Stale))
			for _, p := range s.side.Stale {
				fmt.Fprintf(&b, "  stale %s\n", p)
			}
		}
	}
	return b.String()
}

func codeList(ps []string, max int) string {
	var parts []string
	for i, p := range ps {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(ps)-max))
			break
		}
		parts = append(parts, "`"+p+"`")
	}
	return strings.Join(parts, ", ")
}

// Text writes the differences as unified diffs, grouped by target. Without
// a difference it says so in one line, never nothing: an empty output could
// as well be a command that did not run.
func Text(w io.Writer, d *Diff) {
	fmt.Fprint(w, staleNote(d, false))
	if len(d.Entries) == 0 {
		var of string
		if len(d.Targets) > 0 {
			of = fmt.Sprintf(" (targets %s, and the fleet-wide files)", strings.Join(d.Targets, ", "))
		}
		if d.Differs() {
			fmt.Fprintf(w, "the committed files of %s and %s are the same%s\n", d.Base.Label, d.Head.Label, of)
		} else {
			fmt.Fprintf(w, "no difference between %s and %s%s: the rendered manifests, the delivery objects and the smoke test are the same\n", d.Base.Label, d.Head.Label, of)
		}
		return
	}
	last := "\x00"
	for _, e := range d.Entries {
		if e.Target != last {
			fmt.Fprintf(w, "# target %s\n", targetName(e.Target))
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
func Markdown(d *Diff, limit int) string {
	var b strings.Builder
	entries := d.Entries
	fmt.Fprintf(&b, "### gvisorgen: rendered manifests, `%s` → `%s`\n\n", d.Base.Label, d.Head.Label)
	b.WriteString(staleNote(d, true))
	if len(entries) == 0 {
		if d.Differs() {
			b.WriteString("The committed files of both sides are the same.\n")
		} else {
			b.WriteString("No difference in the rendered manifests, the delivery objects or the smoke test.\n")
		}
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
		row := fmt.Sprintf("| %s | `%s` | %s | +%d −%d |\n", targetName(e.Target), e.File, e.Change, e.Plus, e.Minus)
		if b.Len()+len(row) > limit-reserve {
			fmt.Fprintf(&b, "\n… %d more rows cut to stay under GitHub's comment limit; run `gvisorgen diff` locally for all of them.\n", len(entries)-i)
			return b.String()
		}
		b.WriteString(row)
	}
	b.WriteString("\n")
	for i, e := range entries {
		head := fmt.Sprintf("<details><summary>%s: <code>%s</code> (%s, +%d −%d)</summary>\n\n```diff\n", targetName(e.Target), e.File, e.Change, e.Plus, e.Minus)
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
