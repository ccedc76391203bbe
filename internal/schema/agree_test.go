package schema_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"
)

// differ are the corpus's values files on which the JSON Schema and vet
// disagree, each with why. Every one is a file the schema accepts and vet
// refuses: what one values file cannot show (the rest of the target, the
// policies, where the file came from). The schema never refuses what vet
// accepts. An entry that no longer differs fails the test, so the list
// cannot rot.
var differ = map[string]string{
	"classes-dup-handler":           "cross-field: two classes never share a handler (#ClassesUnique)",
	"classes-default-name":          "cross-field: a class is not named as the default RuntimeClass, gvisor (#ClassesUnique)",
	"classes-dotted-name":           "cross-field: the default handler runsc-<name> of a dotted name is no handler (#ClassHandler): such a class sets its handler",
	"classes-weak-flag":             "policy: runsc-isolation refuses network host in every class's flags",
	"profile-gke":                   "policy: the gke profile requires pinned artifacts and images (#ProfileFacts), which the kind target's file does not pin",
	"waive-from-f":                  "policy: waivers count only from committed inputs (cue/, targets/), never from -f or --set",
	"toleration-no-key":             "cross-field: a toleration without a key must say operator: Exists (#Toleration)",
	"toleration-exists-value":       "cross-field: operator Exists takes no value (#Toleration)",
	"toleration-seconds-noschedule": "cross-field: only effect NoExecute takes tolerationSeconds (#Toleration)",
	"install-dir-is-state-dir":      "cross-field: installDir must differ from stateDir (here the default /run/gvisorgen)",
	"runsc-config-outside":          "cross-field: runscConfig must sit in containerdConfig's folder",
	"mirror-http-unpinned":          "policy: an unpinned artifact over http:// is refused (vet's unpinned-release rule)",
	"delivery-oci-no-url":           "cross-field: source oci needs delivery.oci.url unless fleet.oci.repository is set",
	"require-pins-false":            "derived: policy.requirePins is the profile's fact, not a setting",
	"argocd-destination":            "cross-file: the Argo CD project (delivery/appproject-gvisor.yaml) allows the in-cluster destination only",
	"delivery-oci":                  "cross-file: the Argo CD project's sourceRepos allow fleet.oci.repository/*, not another registry",
}

// TestValuesAgreeWithVet judges every values file of the shared corpus
// (testdata/corpus.txtar, values/) with the JSON Schema and with vet (as
// `gvisorgen vet --target kind -f FILE` does): what the schema accepts, vet
// accepts, but for the files in differ; what vet accepts, the schema accepts
// (an editor never marks a good file). make test-heavy runs it: one
// evaluation per file.
func TestValuesAgreeWithVet(t *testing.T) {
	_, def := committed(t)
	root := def("")
	dir := t.TempDir()
	var mu sync.Mutex
	seen := map[string]bool{}
	n := 0
	t.Run("corpus", func(t *testing.T) {
		for _, f := range corpus(t).Files {
			name, ok := strings.CutPrefix(f.Name, "values/")
			if !ok {
				continue
			}
			name = strings.TrimSuffix(name, ".yaml")
			n++
			file := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(file, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				jsErr := valid(root, f.Data)
				_, vetErr := gen.Build(eval.Options{Root: repoRoot, ValuesFiles: []string{file}, Only: []string{"kind"}})
				why, listed := differ[name]
				mu.Lock()
				seen[name] = true
				mu.Unlock()
				switch {
				case (jsErr == nil) == (vetErr == nil) && listed:
					t.Errorf("listed as differing (%s), but both say %s", why, verdict(jsErr))
				case jsErr == nil && vetErr != nil && !listed:
					t.Errorf("the JSON Schema accepts it, vet refuses it:\n%s\n%v", f.Data, vetErr)
				case jsErr != nil && vetErr == nil:
					t.Errorf("vet accepts it, the JSON Schema refuses it (an editor would mark a good file):\n%s\n%v", f.Data, jsErr)
				}
			})
		}
	})
	var stale []string
	for name := range differ {
		if !seen[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("differ names files the corpus does not hold: %s", strings.Join(stale, ", "))
	}
	if n < 50 {
		t.Errorf("only %d values files in the corpus", n)
	}
}

func verdict(err error) string {
	if err == nil {
		return "valid"
	}
	return "invalid"
}
