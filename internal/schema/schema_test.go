package schema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/schema"
)

const repoRoot = "../.."

// committed compiles the committed schemas/values.schema.json (make check
// holds it to what generate writes) with an independent validator; def
// compiles one of its $defs ("" for the root).
func committed(t *testing.T) (raw []byte, def func(name string) *jsonschema.Schema) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, layout.ValuesSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := compiler(t, raw)
	return raw, func(name string) *jsonschema.Schema {
		t.Helper()
		loc := "values.schema.json"
		if name != "" {
			loc += "#/$defs/" + name
		}
		s, err := c.Compile(loc)
		if err != nil {
			t.Fatalf("compiling %s: %v", loc, err)
		}
		return s
	}
}

// corpus is the shared corpus of strings and values files.
func corpus(t *testing.T) *txtar.Archive {
	t.Helper()
	ar, err := txtar.ParseFile("testdata/corpus.txtar")
	if err != nil {
		t.Fatal(err)
	}
	return ar
}

// corpusStrings reads strings/<def>: one JSON string per line.
func corpusStrings(t *testing.T, f txtar.File) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
		var s string
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("%s: %q: %v", f.Name, l, err)
		}
		out = append(out, s)
	}
	return out
}

// valid validates a values file's bytes (YAML or JSON) with the schema. An
// empty document is an empty values file, as gvisorgen reads it.
func valid(s *jsonschema.Schema, data []byte) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	if string(bytes.TrimSpace(j)) == "null" {
		j = []byte("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestDefinitionsAgree: for every definition of the corpus (strings/<Def>),
// the JSON Schema's $defs/<Def> gives CUE's #<Def> verdict on every string:
// the patterns CUE wrote for Go's RE2 say the same in the schema, and
// maxLength counts what strings.MaxRunes counts.
func TestDefinitionsAgree(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	_, def := committed(t)
	n := 0
	for _, f := range corpus(t).Files {
		name, ok := strings.CutPrefix(f.Name, "strings/")
		if !ok {
			continue
		}
		cueDef := ev.Instance().LookupPath(cue.ParsePath("#" + name))
		if !cueDef.Exists() {
			t.Fatalf("corpus %s: the module has no #%s", f.Name, name)
		}
		js := def(name)
		for _, s := range corpusStrings(t, f) {
			n++
			cueOK := cueDef.Unify(ev.Context().Encode(s)).Validate(cue.Concrete(true)) == nil
			jsOK := js.Validate(s) == nil
			if cueOK != jsOK {
				t.Errorf("#%s %q: CUE says %v, the JSON Schema says %v", name, clip(s), cueOK, jsOK)
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d strings judged: the corpus lost its strings", n)
	}
}

// TestPatternsMeanTheSameInECMA: every regular expression of the schema
// matches the same corpus strings in ECMA-262 — node's RegExp, with the u
// flag as editors' JSON language services compile them, and without — as in
// Go's RE2, which TestDefinitionsAgree holds to CUE. make test provides node
// (ci/nodejs.sh); without NODE the test is skipped.
func TestPatternsMeanTheSameInECMA(t *testing.T) {
	node := os.Getenv("NODE")
	if node == "" {
		t.Skip("NODE is not set: make test sets it (ci/nodejs.sh installs node when missing)")
	}
	raw, _ := committed(t)
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var patterns []string
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if p, ok := v.(string); ok && k == "pattern" {
					patterns = append(patterns, p)
				}
				if k == "patternProperties" {
					for p := range v.(map[string]any) {
						patterns = append(patterns, p)
					}
				}
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	slices.Sort(patterns)
	patterns = slices.Compact(patterns)
	var strs []string
	for _, f := range corpus(t).Files {
		if strings.HasPrefix(f.Name, "strings/") {
			strs = append(strs, corpusStrings(t, f)...)
		}
	}
	got := runNode(t, node, patterns, strs)
	for i, p := range patterns {
		re := regexp.MustCompile(p)
		for j, s := range strs {
			want := re.MatchString(s)
			for mode, m := range got[i][j] {
				if m != want {
					t.Errorf("pattern %q on %q: Go says %v, ECMA-262 (%s) says %v", p, clip(s), want, []string{"u flag", "no flag"}[mode], m)
				}
			}
		}
	}
	if len(patterns) < 20 {
		t.Errorf("only %d patterns in the schema", len(patterns))
	}
}

// runNode returns, per pattern and string, node's verdict with the u flag
// and without.
func runNode(t *testing.T, node string, patterns, strs []string) [][][2]bool {
	t.Helper()
	in, err := json.Marshal(map[string]any{"patterns": patterns, "strings": strs})
	if err != nil {
		t.Fatal(err)
	}
	const script = `let d = "";
process.stdin.on("data", c => d += c).on("end", () => {
  const {patterns, strings} = JSON.parse(d);
  const out = patterns.map(p => { const u = new RegExp(p, "u"), n = new RegExp(p); return strings.map(s => [u.test(s), n.test(s)]); });
  process.stdout.write(JSON.stringify(out));
});`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", node, err, stderr.String())
	}
	var got [][][2]bool
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestValuesFilesValidate: every values file this repository holds or
// documents validates against the schema of its module — the repository's
// targets/ and the docs' YAML examples that carry the modeline against the
// committed schema, the test fleet's targets (internal/gen/testdata/fleet,
// its own rings) against the schema generate writes for that fleet — and
// every YAML one starts with the modeline (layout.SchemaModeline), as a
// targets/ file should.
func TestValuesFilesValidate(t *testing.T) {
	_, def := committed(t)
	repo := def("")
	check := func(s *jsonschema.Schema, glob string) int {
		t.Helper()
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range files {
			ext := filepath.Ext(f)
			if ext != ".yaml" && ext != ".yml" && ext != ".json" {
				continue // a .cue target: CUE checks it
			}
			n++
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if ext != ".json" {
				if first, _, _ := strings.Cut(string(data), "\n"); first != layout.SchemaModeline {
					t.Errorf("%s: first line %q, want the modeline %q", f, first, layout.SchemaModeline)
				}
			}
			if err := valid(s, data); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		return n
	}
	check(repo, filepath.Join(repoRoot, layout.TargetsDir, "*"))

	fleet := t.TempDir()
	if err := os.CopyFS(filepath.Join(fleet, layout.CUEDir), os.DirFS(filepath.Join(repoRoot, layout.CUEDir))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(fleet, os.DirFS(filepath.Join(repoRoot, "internal/gen/testdata/fleet"))); err != nil {
		t.Fatal(err)
	}
	ev, err := eval.Load(eval.Options{Root: fleet})
	if err != nil {
		t.Fatal(err)
	}
	r, err := schema.Values(ev)
	if err != nil {
		t.Fatal(err)
	}
	if n := check(compile(t, r.JSON), filepath.Join(fleet, layout.TargetsDir, "*")); n < 5 {
		t.Errorf("only %d values files in the test fleet", n)
	}

	block := regexp.MustCompile("(?s)```yaml\n(" + regexp.QuoteMeta(layout.SchemaModeline) + "\n.*?)```")
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := 0
	for _, f := range append(docs, filepath.Join(repoRoot, "README.md")) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatch(data, -1) {
			examples++
			if err := valid(repo, m[1]); err != nil {
				t.Errorf("%s: the example\n%s\ndoes not validate: %v", f, m[1], err)
			}
		}
	}
	if examples < 3 {
		t.Errorf("%d documented values examples carry the modeline, want at least 3 (docs/targets.md)", examples)
	}
}

// compiler holds a schema's JSON as the resource values.schema.json.
func compiler(t *testing.T, raw []byte) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("values.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// compile compiles a schema's root.
func compile(t *testing.T, raw []byte) *jsonschema.Schema {
	t.Helper()
	s, err := compiler(t, raw).Compile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDropped: the rules of #Values (and the definitions it uses) that the
// schema leaves to evaluation are exactly these; a new cross-field rule shows
// up here, to be named in docs/values.md's editor section.
func TestDropped(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	r, err := schema.Values(ev)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range r.Dropped {
		_, rule, _ := strings.Cut(d, ": ") // file:line: rule
		got = append(got, rule)
	}
	want := []string{
		`!=stateDir`,
		`!=path.Dir(containerdConfig)`,
		`=~"^\(regexp.QuoteMeta(path.Dir(containerdConfig)))/([^/]+/)?[^/]+$"`,
		`!=path.Dir(containerdConfig)`,
		`for a in architectures`,
		`if source == "oci" && fleet.oci.repository == _|_`,
		`if operator != _|_ if operator == "Exists"`,
		`if key == _|_`,
		`if tolerationSeconds != _|_`,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dropped rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
