package gen

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHeavyTestsExist: every test the Makefile's HEAVY_TESTS names (make test
// skips them, make test-heavy runs them in this package and cmd/gvisorgen)
// is a test of one of the two, so that a rename cannot drop one from both.
func TestHeavyTestsExist(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HEAVY_TESTS := ([A-Za-z0-9_|]+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no HEAVY_TESTS := A|B line in the Makefile")
	}
	var src strings.Builder
	files, _ := filepath.Glob("*_test.go")
	more, _ := filepath.Glob(filepath.Join(repoRoot, "cmd", "gvisorgen", "*_test.go"))
	files = append(files, more...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, name := range strings.Split(string(m[1]), "|") {
		if !regexp.MustCompile(`\nfunc ` + name + `\((t \*testing\.T|f \*testing\.F)\) \{`).MatchString(src.String()) {
			t.Errorf("HEAVY_TESTS names %s, which is no test of internal/gen or cmd/gvisorgen", name)
		}
	}
}
