package eval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
	yamlv3 "go.yaml.in/yaml/v3"
)

// checkYAML reads a YAML values file with the YAML parser before CUE does,
// and says at its line what CUE would say badly or not at all: a duplicated
// key (CUE's reader unifies it), a tab, a control character, a number too
// large for any field, a document that is not a mapping. "" when it is fine.
func checkYAML(file string, src []byte) string {
	if l, c, r, ok := controlChar(src); ok {
		return fmt.Sprintf("%s:%d:%d: %s: YAML cannot carry it; remove it", file, l, c, charName(r))
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(src, &doc); err != nil {
		return yamlError(file, err, src)
	}
	// Decoding into a node keeps a duplicated key; decoding into values
	// refuses it.
	if err := yamlv3.Unmarshal(src, new(any)); err != nil {
		return yamlError(file, err, src)
	}
	if len(doc.Content) == 0 {
		return ""
	}
	top := doc.Content[0]
	if top.Kind != yamlv3.MappingNode && !(top.Kind == yamlv3.ScalarNode && top.Tag == "!!null") {
		what := map[yamlv3.Kind]string{yamlv3.SequenceNode: "a list", yamlv3.ScalarNode: "a single value", yamlv3.AliasNode: "an alias"}[top.Kind]
		return fmt.Sprintf("%s:%d:%d: values must be a mapping of fields (key: value), not %s", file, top.Line, top.Column, what)
	}
	var msg string
	var walk func(n *yamlv3.Node)
	walk = func(n *yamlv3.Node) {
		if msg != "" {
			return
		}
		if n.Kind == yamlv3.ScalarNode && n.Style == 0 && wholeNumber.MatchString(n.Value) {
			if i, ok := new(big.Int).SetString(strings.ReplaceAll(n.Value, "_", ""), 10); ok && !i.IsInt64() {
				msg = fmt.Sprintf("%s:%d:%d: invalid value %s: too large for a whole number (no field takes more than 9223372036854775807); quote it if it is text", file, n.Line, n.Column, n.Value)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(top)
	return msg
}

var wholeNumber = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// controlChar finds the first character YAML and Kubernetes objects cannot
// carry: C0 controls other than tab and line breaks, DEL, C1 controls.
func controlChar(src []byte) (line, col int, r rune, ok bool) {
	line, col = 1, 1
	for _, r := range string(src) {
		if bad(r) {
			return line, col, r, true
		}
		if r == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return 0, 0, 0, false
}

func bad(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == utf8.RuneError
}

func charName(r rune) string {
	switch r {
	case 0x7f:
		return "the control character U+007F (DEL)"
	case utf8.RuneError:
		return "a byte that is not UTF-8"
	}
	return fmt.Sprintf("the control character U+%04X", r)
}

// yamlError turns the YAML parser's "line N: msg" lines into "file:N: msg",
// naming a tab where the line holds one (the parser says "found character
// that cannot start any token").
func yamlError(file string, err error, src []byte) string {
	lines := bytes.Split(src, []byte("\n"))
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		m := yamlLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var n int
		fmt.Sscan(m[1], &n)
		if n >= 1 && n <= len(lines) {
			if i := bytes.IndexByte(lines[n-1], '\t'); i >= 0 {
				out = append(out, fmt.Sprintf("%s:%d:%d: a tab: YAML indents with spaces, never tabs (the parser says: %s)", file, n, i+1, m[2]))
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s:%s: %s", file, m[1], m[2]))
	}
	if len(out) == 0 {
		// Some parser errors carry no line: the first prefix of the file
		// that fails the same way ends at it.
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		for n := 1; n <= len(lines); n++ {
			perr := yamlv3.Unmarshal(bytes.Join(lines[:n], []byte("\n")), new(any))
			if perr != nil && strings.TrimPrefix(perr.Error(), "yaml: ") == msg {
				return fmt.Sprintf("%s:%d: %s", file, n, msg)
			}
		}
		return fmt.Sprintf("%s: %s", file, msg)
	}
	return strings.Join(out, "\n")
}

// controlStrings reports every string of a value that holds a control
// character (from JSON escapes, CUE or --set): the YAML writer could not
// write it, and no Kubernetes field wants it.
func controlStrings(v cue.Value) []diag {
	var out []diag
	var walk func(v cue.Value, path []string, depth int)
	walk = func(v cue.Value, path []string, depth int) {
		if depth > 32 {
			return
		}
		switch v.IncompleteKind() {
		case cue.StringKind:
			s, err := v.String()
			if err != nil {
				return
			}
			for _, r := range s {
				if bad(r) {
					out = append(out, diag{path: strings.Join(path, "."), msg: fmt.Sprintf("invalid value %q: it holds %s, which no field takes; remove it", s, charName(r)), user: []token.Pos{v.Pos()}})
					return
				}
			}
		case cue.StructKind:
			it, err := v.Fields()
			if err != nil {
				return
			}
			for it.Next() {
				walk(it.Value(), append(path[:len(path):len(path)], labelOf(it.Selector())), depth+1)
			}
		case cue.ListKind:
			it, err := v.List()
			if err != nil {
				return
			}
			for i := 0; it.Next(); i++ {
				walk(it.Value(), append(path[:len(path):len(path)], fmt.Sprint(i)), depth+1)
			}
		}
	}
	walk(v, nil, 0)
	return out
}

// CheckManifestYAML checks a file of YAML documents (vet --manifests) the
// way values files are checked: "" when every document parses.
func CheckManifestYAML(file string, src []byte) string {
	if l, c, r, ok := controlChar(src); ok {
		return fmt.Sprintf("%s:%d:%d: %s: YAML cannot carry it; remove it", file, l, c, charName(r))
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(src))
	for {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			return yamlError(file, err, src)
		}
	}
}
