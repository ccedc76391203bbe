package eval

import (
	"fmt"
	"os"
	"path/filepath"
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
		if ent.IsDir() || strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		ext := filepath.Ext(ent.Name())
		if !valuesExt[ext] {
			continue
		}
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
