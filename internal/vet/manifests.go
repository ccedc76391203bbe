package vet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	cueyaml "cuelang.org/go/encoding/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// Manifests validates rendered objects — a file, every YAML or JSON file of a
// folder, or stdin ("-") — with the module's typed object schema (#Objects)
// and then strictly against the Kubernetes Go types (for the kinds that have
// Go types here), then with the cross-field rules and gvisorgen's policies
// (Check). kustomize's own files (kustomize.config.k8s.io Kustomization and
// Component) are skipped; Flux's Kustomization is validated. The error is
// non-nil only when the input cannot be read.
func Manifests(ev *eval.Evaluator, path string, stdin io.Reader) (Report, error) {
	var r Report
	files, err := manifestFiles(path)
	if err != nil {
		return r, err
	}
	schema := ev.Instance().LookupPath(cue.ParsePath("#Objects"))
	facts, err := FactsOf(ev)
	if err != nil {
		return r, err
	}
	for _, f := range files {
		var src []byte
		name := f
		if f == "-" {
			name = "<stdin>"
			if src, err = io.ReadAll(stdin); err != nil {
				return r, fmt.Errorf("reading stdin: %w", err)
			}
		} else if src, err = os.ReadFile(f); err != nil {
			return r, fmt.Errorf("reading manifests: %w", err)
		}
		abs := name
		if f != "-" {
			abs, _ = filepath.Abs(f)
		}
		if msg := eval.CheckManifestYAML(name, src); msg != "" {
			r.Syntax = append(r.Syntax, msg)
			continue
		}
		dec := cueyaml.NewDecoder(abs, bytes.NewReader(src))
		for i := 0; ; i++ {
			x, err := dec.Extract()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Errors = append(r.Errors, ev.FormatError(err))
				break
			}
			v := ev.Context().BuildExpr(x)
			if err := v.Err(); err != nil {
				r.Errors = append(r.Errors, ev.FormatError(err))
				continue
			}
			if v.IncompleteKind() == cue.NullKind {
				continue // an empty document
			}
			apiVersion, _ := v.LookupPath(cue.ParsePath("apiVersion")).String()
			kind, _ := v.LookupPath(cue.ParsePath("kind")).String()
			objName, _ := v.LookupPath(cue.ParsePath("metadata.name")).String()
			where := fmt.Sprintf("%s: document %d (%s %s)", name, i+1, kind, objName)
			if isKustomizeFile(apiVersion, kind, f) {
				continue
			}
			r.Objects++
			namespace, _ := v.LookupPath(cue.ParsePath("metadata.namespace")).String()
			r.Found = append(r.Found, RefOf(apiVersion, kind, namespace, objName))
			def := schema.LookupPath(cue.MakePath(cue.Str(apiVersion + "/" + kind)))
			if !def.Exists() {
				r.Errors = append(r.Errors, fmt.Sprintf("%s: apiVersion %q kind %q: not a type gvisorgen knows (%s)", where, apiVersion, kind, strings.Join(knownTypes(schema), ", ")))
				continue
			}
			// Every finding of the document is reported: the schema's, then the
			// rules across fields, which read the document as it is.
			var found []string
			u := def.Unify(v)
			schemaOK := true
			if err := u.Validate(cue.Concrete(true)); err != nil {
				found = append(found, ev.FormatError(withDocPositions(err, v, abs)))
				schemaOK = false
			}
			b, err := v.MarshalJSON()
			if err != nil {
				r.Errors = append(r.Errors, where+": "+err.Error())
				continue
			}
			if _, ok := types[apiVersion+"/"+kind]; ok && schemaOK {
				// The Go types repeat the schema's findings in their own words.
				if err := Object(apiVersion, kind, b); err != nil {
					found = append(found, err.Error())
				}
			}
			if probs := Check(facts, apiVersion, kind, b); len(probs) > 0 {
				found = append(found, formatProblems(probs, v))
			}
			if len(found) > 0 {
				r.Errors = append(r.Errors, where+":\n"+strings.Join(found, "\n"))
			}
		}
	}
	return r, nil
}

// isKustomizeFile says whether a document is kustomize's own
// kustomization (or component) file rather than an object: apiVersion
// kustomize.config.k8s.io/..., or no apiVersion and kind at all in a file named
// kustomization.yaml.
func isKustomizeFile(apiVersion, kind, file string) bool {
	switch {
	case kind == "Kustomization" || kind == "Component":
		return apiVersion == "" || strings.HasPrefix(apiVersion, "kustomize.config.k8s.io/")
	case apiVersion == "" && kind == "":
		switch filepath.Base(file) {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
			return true
		}
	}
	return false
}

// formatProblems prints problems like CUE errors: the field path, the message
// and the position of the field (or of its closest existing parent) in the
// manifest.
func formatProblems(probs []Problem, doc cue.Value) string {
	var b strings.Builder
	for i, pr := range probs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(pr.String())
		for n := len(pr.Path); n >= 0; n-- {
			fv := doc.LookupPath(cuePath(pr.Path[:n]))
			if !fv.Exists() {
				continue
			}
			if pos := fv.Pos(); pos.IsValid() {
				b.WriteString("\n    " + relPos(pos.String()))
			}
			break
		}
	}
	return b.String()
}

// withDocPositions adds, to every error that points only into the schema (an
// error() of a pattern constraint, say), the position of the field in the
// manifest.
func withDocPositions(err error, doc cue.Value, file string) error {
	list := cueerrors.Errors(err)
	// Paths some error already places in the manifest (a disjunction's
	// errors share one).
	placed := map[string]bool{}
	for _, e := range list {
		for _, p := range cueerrors.Positions(e) {
			if p.Filename() == file {
				placed[strings.Join(e.Path(), ".")] = true
			}
		}
	}
	var out cueerrors.Error
	for _, e := range list {
		if !placed[strings.Join(e.Path(), ".")] {
			if pos := docPos(doc, e.Path()); pos.IsValid() {
				e = &posError{err: e, pos: pos}
			}
		}
		out = cueerrors.Append(out, e)
	}
	return out
}

// docPos is the position of the field at an error's path (without its
// #Objects."apiVersion/kind" prefix), or of its closest existing parent.
func docPos(doc cue.Value, path []string) token.Pos {
	if len(path) >= 2 && path[0] == "#Objects" {
		path = path[2:]
	}
	var steps []any
	for _, s := range path {
		if n, err := strconv.Atoi(s); err == nil {
			steps = append(steps, n)
		} else if u, err := strconv.Unquote(s); err == nil {
			steps = append(steps, u)
		} else {
			steps = append(steps, s)
		}
	}
	for n := len(steps); n > 0; n-- {
		if fv := doc.LookupPath(cuePath(steps[:n])); fv.Exists() {
			return fv.Pos()
		}
	}
	return token.NoPos
}

// posError is a CUE error with one more position: the manifest's.
type posError struct {
	err cueerrors.Error
	pos token.Pos
}

func (e *posError) Position() token.Pos  { return e.err.Position() }
func (e *posError) Path() []string       { return e.err.Path() }
func (e *posError) Error() string        { return e.err.Error() }
func (e *posError) Msg() (string, []any) { return e.err.Msg() }
func (e *posError) InputPositions() []token.Pos {
	return append([]token.Pos{e.pos}, e.err.InputPositions()...)
}

// relPos makes a position's file relative to the working directory when it
// is below it.
func relPos(pos string) string {
	wd, err := os.Getwd()
	if err != nil {
		return pos
	}
	if rel, ok := strings.CutPrefix(pos, wd+string(filepath.Separator)); ok {
		return rel
	}
	return pos
}

func knownTypes(schema cue.Value) []string {
	var out []string
	it, err := schema.Fields()
	if err != nil {
		return nil
	}
	for it.Next() {
		out = append(out, it.Selector().Unquoted())
	}
	sort.Strings(out)
	return out
}

func manifestFiles(path string) ([]string, error) {
	if path == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var out []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	sort.Strings(out)
	return out, nil
}
