// Package schema encodes the values schema (#Values) as a JSON Schema with
// CUE's own encoder, for editors (yaml-language-server) and other tools that
// read values files: each field's doc comment becomes its description, each
// constraint JSON Schema can say becomes a keyword.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// Result is the encoded schema and what it leaves to evaluation.
type Result struct {
	// JSON is the schema, indented, ending in a newline.
	JSON []byte
	// Dropped are the rules of #Values that compare a field with another
	// (file:line: the rule): only evaluation of a whole target holds them.
	Dropped []string
}

// Module is the CUE module as built, and loaded again with each file's
// syntax edited (eval.Evaluator).
type Module interface {
	Instance() cue.Value
	Variant(edit func([]*ast.File)) (cue.Value, error)
}

// Values encodes the module's #Values as the schema of one values file.
func Values(m Module) (*Result, error) {
	ed := &editor{inst: m.Instance()}
	inst, err := m.Variant(ed.edit)
	if err != nil {
		return nil, err
	}
	values := inst.LookupPath(cue.ParsePath("#Values"))
	if !values.Exists() {
		return nil, fmt.Errorf("#Values for editors: %v", inst.Err())
	}
	if err := values.Validate(); err != nil {
		return nil, fmt.Errorf("#Values for editors: %w", err)
	}
	root, err := generateJSON(values)
	if err != nil {
		return nil, fmt.Errorf("encoding #Values as JSON Schema: %w", err)
	}
	root["$comment"] = tree.HeaderText // so the file starts with tree.JSONHeader
	root["title"] = "gvisorgen values: a targets/<name>.yaml file or a -f file"
	tidy(root)
	if err := addPropertyNames(root, ed.names, inst); err != nil {
		return nil, err
	}
	if err := ecmaPatterns(root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return &Result{JSON: out.Bytes(), Dropped: ed.dropped}, nil
}

// generateJSON runs CUE's encoder on v.
func generateJSON(v cue.Value) (map[string]any, error) {
	expr, err := jsonschema.Generate(v, &jsonschema.GenerateConfig{NamesFunc: names})
	if err != nil {
		return nil, err
	}
	b, err := v.Context().BuildExpr(expr).MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}

// names names a definition by its path (#DNSLabel → DNSLabel,
// #SandboxOverhead.cpu → SandboxOverhead.cpu). A reference the encoder
// cannot place (#ProfileFacts[profile]: a derived field) gets a name too;
// its definition allows anything, and tidy removes it.
func names(refs []*jsonschema.CUERef) {
	for i, r := range refs {
		if r.Path.Err() != nil || len(r.Path.Selectors()) == 0 {
			r.Name = fmt.Sprintf("dynamic-%d", i)
			continue
		}
		r.Name = ""
		for j, s := range r.Path.Selectors() {
			if j > 0 {
				r.Name += "."
			}
			r.Name += trimHash(s.String())
		}
	}
}

func trimHash(s string) string {
	if len(s) > 0 && s[0] == '#' {
		return s[1:]
	}
	return s
}

// property finds the schema of a struct's field name: in its properties,
// or in those of a member of its allOf (a struct declared in more than one
// file of the module, as a test's extra file does).
func property(node map[string]any, name string) (map[string]any, bool) {
	props, _ := node["properties"].(map[string]any)
	if p, ok := props[name].(map[string]any); ok {
		return p, true
	}
	all, _ := node["allOf"].([]any)
	for _, m := range all {
		if mm, ok := m.(map[string]any); ok {
			if p, ok := property(mm, name); ok {
				return p, true
			}
		}
	}
	return nil, false
}

// addPropertyNames puts back the key constraints editor turned into
// [string]: each struct gets propertyNames, a reference to its definition.
func addPropertyNames(root map[string]any, names []propertyNames, inst cue.Value) error {
	defs, _ := root["$defs"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
		root["$defs"] = defs
	}
	for _, pn := range names {
		node, ok := root, true
		if pn.path[0] != "#Values" {
			node, ok = defs[trimHash(pn.path[0])].(map[string]any)
		}
		for _, name := range pn.path[1:] {
			if !ok {
				break
			}
			node, ok = property(node, name)
		}
		if !ok {
			return fmt.Errorf("the key constraint [#%s] of %s: no such object in the encoded schema", pn.def, strings.Join(pn.path, "."))
		}
		node["propertyNames"] = map[string]any{"$ref": "#/$defs/" + pn.def}
		if _, ok := defs[pn.def]; ok {
			continue
		}
		// The definition is used only as a key: encode it on its own.
		d, err := generateJSON(inst.LookupPath(cue.ParsePath("#" + pn.def)))
		if err != nil {
			return fmt.Errorf("encoding #%s: %w", pn.def, err)
		}
		delete(d, "$schema")
		defs[pn.def] = d
	}
	return nil
}
