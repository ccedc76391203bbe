package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// FuzzValuesFile feeds arbitrary bytes to generate as a -f values file: the
// answer is exit 0, or exit 1 with at least one message at a line of that
// file and the tree exactly as it was; never a panic, never exit 2 (a bad
// value is the user's "no", not a failure of the tool). `go test` runs the
// seeds; `go test -fuzz FuzzValuesFile ./cmd/gvisorgen` explores.
func FuzzValuesFile(f *testing.F) {
	// The seeds are the values files of the shared corpus, which
	// internal/schema also judges with the JSON Schema and with vet.
	ar, err := txtar.ParseFile("../../internal/schema/testdata/corpus.txtar")
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for _, file := range ar.Files {
		if strings.HasPrefix(file.Name, "values/") {
			f.Add(file.Data)
			seeds++
		}
	}
	if seeds < 20 {
		f.Fatalf("only %d values files in the corpus", seeds)
	}
	repo := f.TempDir()
	cueDir, err := filepath.Abs("../../cue")
	if err != nil {
		f.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(repo, "cue"), os.DirFS(cueDir)); err != nil {
		f.Fatal(err)
	}
	f.Setenv("XDG_CACHE_HOME", f.TempDir())
	gen := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append(args, "--root", repo, "--target", "kind"), strings.NewReader(""), &stdout, &stderr)
		return code, stderr.String()
	}
	if code, out := gen("generate"); code != 0 {
		f.Fatalf("generate: exit %d: %s", code, out)
	}
	atLine := regexp.MustCompile(`values\.yaml:\d+`)
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		before, err := treeState(repo)
		if err != nil {
			t.Fatal(err)
		}
		code, out := gen("generate", "-f", file)
		switch code {
		case 0:
			// Valid values: put the tree back for the next input.
			if code, out := gen("generate"); code != 0 {
				t.Fatalf("generate without the values: exit %d: %s", code, out)
			}
		case 1:
			if !atLine.MatchString(out) {
				t.Errorf("exit 1 without a line of the values file:\n%s\ninput: %q", out, data)
			}
			after, err := treeState(repo)
			if err != nil {
				t.Fatal(err)
			}
			if d := stateDiff(before, after); d != "" {
				t.Errorf("exit 1 changed the tree:\n%s\ninput: %q", d, data)
			}
		default:
			t.Errorf("exit %d, want 0 or 1:\n%s\ninput: %q", code, out, data)
		}
	})
}
