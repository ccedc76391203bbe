package gen

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHeavyTestsExist: every test the Makefile's HEAVY_TESTS names (make test
// skips them, make test-heavy runs them in the packages HEAVY_PKGS names)
// is a test of one of those, so that a rename cannot drop one from both.
func TestHeavyTestsExist(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HEAVY_TESTS := ([A-Za-z0-9_|]+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no HEAVY_TESTS := A|B line in the Makefile")
	}
	pk := regexp.MustCompile(`(?m)^HEAVY_PKGS := (.+)$`).FindSubmatch(mk)
	if pk == nil {
		t.Fatal("no HEAVY_PKGS := ./a ./b line in the Makefile")
	}
	var src strings.Builder
	var files []string
	for _, p := range strings.Fields(string(pk[1])) {
		more, _ := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(p), "*_test.go"))
		if len(more) == 0 {
			t.Errorf("HEAVY_PKGS names %s, which has no tests", p)
		}
		files = append(files, more...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, name := range strings.Split(string(m[1]), "|") {
		if !regexp.MustCompile(`\nfunc ` + name + `\((t \*testing\.T|f \*testing\.F)\) \{`).MatchString(src.String()) {
			t.Errorf("HEAVY_TESTS names %s, which is no test of the packages HEAVY_PKGS names", name)
		}
	}
}
