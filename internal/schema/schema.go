// Package schema encodes the values schema (#Values) as a JSON Schema with
// CUE's own encoder, for editors (yaml-language-server) and other tools that
// read values files: each field's doc comment becomes its description, each
// constraint JSON Schema can say becomes a keyword.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"

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
	expr, err := jsonschema.Generate(values, &jsonschema.GenerateConfig{NamesFunc: names})
	if err != nil {
		return nil, fmt.Errorf("encoding #Values as JSON Schema: %w", err)
	}
	b, err := inst.Context().BuildExpr(expr).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding #Values as JSON Schema: %w", err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	root["$comment"] = tree.HeaderText // so the file starts with tree.JSONHeader
	root["title"] = "gvisorgen values: a targets/<name>.yaml file or a -f file"
	tidy(root)
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
