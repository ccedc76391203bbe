package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// targets returns the declared targets: inline ones from the CUE module's
// `targets` and one per file of the targets folder. A name declared twice is
// an error naming both places.
func (e *Evaluator) targets() ([]source, error) {
	var out []source
	seen := map[string]source{}
	var errs errors.Error
	add := func(s source, pos token.Pos) {
		if prev, ok := seen[s.name]; ok {
			errs = errors.Append(errs, errors.Newf(pos, "target %q is declared twice: at %s and at %s", s.name, prev.pos, s.pos))
			return
		}
		if ReservedNames[s.name] {
			errs = errors.Append(errs, errors.Newf(pos, "target name %q is reserved", s.name))
			return
		}
		if !validName(s.name) {
			errs = errors.Append(errs, errors.Newf(pos, "target name %q: must be a DNS label (lower-case letters, digits and '-', at most 63 characters)", s.name))
			return
		}
		seen[s.name] = s
		out = append(out, s)
	}

	inline := e.inst.LookupPath(cue.ParsePath("targets"))
	if inline.Exists() {
		it, err := inline.Fields()
		if err != nil {
			return nil, e.cueError(err)
		}
		for it.Next() {
			name := it.Selector().Unquoted()
			pos := it.Value().Pos()
			if pos.IsValid() {
				e.userFiles[pos.Filename()] = true
			}
			add(source{name: name, pos: e.rel(pos), val: it.Value()}, pos)
		}
	}

	dir := filepath.Join(e.opts.Root, e.opts.TargetsDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading targets folder: %w", err)
	}
	for _, ent := range entries {
		if !IsTargetFile(ent.Name(), ent.IsDir()) {
			if msg := NotRead(ent.Name(), ent.IsDir()); msg != "" {
				errs = errors.Append(errs, errors.Newf(token.NoPos, "%s: %s", e.rel(filepath.Join(dir, ent.Name())), msg))
			}
			continue
		}
		ext := filepath.Ext(ent.Name())
		file := filepath.Join(dir, ent.Name())

		v, err := e.readValues(file)
		if err != nil {
			if ce, ok := err.(*Error); ok {
				errs = errors.Append(errs, errors.Newf(token.NoPos, "%s", ce.Msg))
				continue
			}
			return nil, err
		}
		name := strings.TrimSuffix(ent.Name(), ext)
		pos := token.NoPos
		add(source{name: name, pos: e.rel(file), val: v}, pos)
	}
	if errs != nil {
		return nil, e.cueError(errs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

var valuesExt = map[string]bool{".cue": true, ".yaml": true, ".yml": true, ".json": true}

// IsTargetFile says whether an entry of the targets folder declares a
// target: a file, not hidden, ending in .cue, .yaml, .yml or .json.
func IsTargetFile(name string, dir bool) bool {
	return !dir && !strings.HasPrefix(name, ".") && valuesExt[filepath.Ext(name)]
}

// NotRead says why an entry of the targets folder that is not a target file
// looks like one, and what to do, or "" when skipping it is right. Refused:
// a folder (targets are the files directly in targets/; a nested
// targets/prod/edge.yaml would be a cluster silently left out), and a name
// that ends in a values extension of another case (edge.YAML, edge.Json:
// the intent is plain, but the rule is the lower-case extension, as on a
// case-sensitive file system two spellings could declare one target twice).
// Skipped without a word, on purpose: a hidden name (.gitkeep, an editor's
// .edge.yaml.swp, a folder kept aside as .archive/), and any other name —
// an editor or merge backup (edge.yaml~, edge.yaml.orig, edge.yaml.bak,
// whose extension is no longer a values one), a README.md — since none of
// them is a values file by its extension, the documented rule.
func NotRead(name string, dir bool) string {
	switch {
	case strings.HasPrefix(name, "."):
		return ""
	case dir:
		return "a folder, not read: targets are the files directly in the targets folder (<name>.cue, .yaml, .yml or .json); move its files up, or hide the folder (a name starting with '.') to keep it aside"
	}
	ext := filepath.Ext(name)
	if !valuesExt[ext] && valuesExt[strings.ToLower(ext)] {
		return fmt.Sprintf("not read: a target file ends in .cue, .yaml, .yml or .json, in lower case; rename it to %s", strings.TrimSuffix(name, ext)+strings.ToLower(ext))
	}
	return ""
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// rel renders a position or a path relative to the working directory.
func (e *Evaluator) rel(p any) string {
	switch p := p.(type) {
	case token.Pos:
		if !p.IsValid() {
			return "-"
		}
		return fmt.Sprintf("%s:%d:%d", e.rel(p.Filename()), p.Line(), p.Column())
	case string:
		if r, err := filepath.Rel(e.cwd, p); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
		return p
	}
	return fmt.Sprint(p)
}

// ExampleMark starts the reason of every waiver the module's shipped example
// targets carry (cue/targets.cue: "example target: run `gvisorgen pin` …").
const ExampleMark = "example target"

// shippedExample says whether a target is one of the module's shipped
// examples in its shipped form, the only targets whose warnings a run may fold
// (a warning about a target the user added or changed is never folded away).
// The rule, read from the target's own declaration (not its evaluated values):
//   - the target is named after its profile (the module ships one example per
//     profile: kind, gke, eks, aks), so a target the user adds, under any
//     other name, is never one;
//   - its declaration sets nothing but its profile and waivers whose reason
//     starts with ExampleMark, so any value the user sets on it (a version, a
//     node selector, a waiver of their own) makes it theirs.
//
// The caller adds: no -f or --set in the run (they change every target), and
// gen adds: no patches in the target's overlay.
//
// Why this rule: the examples' own warnings are findings too (kind, whose
// profile does not require pins, warns about its unpinned release and
// images), so "fold only waivers" would still bury a fresh clone's first
// screen; and the file a target is declared in cannot tell, since the user may
// declare their clusters inline in cue/targets.cue beside the examples. What
// is folded is thus exactly what the module ships, untouched. Changes to the
// module's defaults (cue/values.cue, cue/profiles.cue, cue/pins.cue) leave the
// examples examples: their warnings are still about the examples.
func shippedExample(t source, profile string) bool {
	if t.name != profile {
		return false
	}
	it, err := t.val.Fields(cue.Optional(true))
	if err != nil {
		return false
	}
	for it.Next() {
		switch it.Selector().Unquoted() {
		case "profile":
		case "policy":
			if !exampleWaivers(it.Value()) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// exampleWaivers says whether a declaration's policy holds only waivers
// marked as an example's.
func exampleWaivers(policy cue.Value) bool {
	it, err := policy.Fields(cue.Optional(true))
	if err != nil {
		return false
	}
	for it.Next() {
		if it.Selector().Unquoted() != "waive" {
			return false
		}
		ws, err := it.Value().Fields(cue.Optional(true))
		if err != nil {
			return false
		}
		for ws.Next() {
			reason, err := ws.Value().String()
			if err != nil || !strings.HasPrefix(reason, ExampleMark) {
				return false
			}
		}
	}
	return true
}

// UnknownTargetError is a --target that names no declared target. Every
// command that takes --target refuses it with this error (the CLI decides
// its exit code: a command line that cannot be run), rather than doing
// nothing for it.
type UnknownTargetError struct {
	Names    []string // the --target values that name no target
	Declared []string // every declared target, sorted
}

func (e *UnknownTargetError) Error() string {
	flags := make([]string, len(e.Names))
	for i, n := range e.Names {
		flags[i] = "--target " + n
	}
	declared := strings.Join(e.Declared, ", ")
	if declared == "" {
		declared = "none"
	}
	return fmt.Sprintf("%s: no such target (declared: %s)", strings.Join(flags, ", "), declared)
}

// CheckTargets returns an *UnknownTargetError naming every one of only that
// declared does not hold, or nil.
func CheckTargets(only, declared []string) error {
	var unknown []string
	for _, n := range only {
		if !slices.Contains(declared, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return &UnknownTargetError{Names: unknown, Declared: declared}
}
