package docs

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestValuesReferenceIsFresh: docs/values.md is what `make docs` writes, and
// it documents every key of the seed.
func TestValuesReferenceIsFresh(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Reference(&b, ev.Schema(), ev.Profiles(), ev.Instance()); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../docs/values.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, b.Bytes()) {
		t.Errorf("docs/values.md is stale: run `make docs`")
	}
	for _, key := range []string{"gvisor.enabled", "gvisor.version", "gvisor.installer.image.repository",
		"gvisor.installer.image.tag", "gvisor.installer.image.pullPolicy", "gvisor.nodeSelector",
		"gvisor.tolerations", "gvisor.scheduling"} {
		if !strings.Contains(b.String(), "| `"+key+"` |") {
			t.Errorf("values reference lacks the seed's key %s", key)
		}
	}
}
