//go:build apiserver

package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"

	yaml "go.yaml.in/yaml/v3"
)

// The Argo CD and Flux CRDs come from these modules' zips (only when delivery/
// exists), at the versions ci/schemas.sh generates the CUE schema from, so the
// server and vet judge delivery objects by the same CRDs.
var crdModules = []struct{ schemasVar, dir string }{
	{"ARGOCD", "manifests/crds"},
	{"FLUX_SOURCE", "config/crd/bases"},
	{"FLUX_KUSTOMIZE", "config/crd/bases"},
}

// crdModule reads NAME=module@version from ci/schemas.sh.
func crdModule(t testing.TB, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "ci", "schemas.sh"))
	if err != nil {
		t.Fatalf("CRD versions: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+"="); ok && strings.Contains(v, "@") {
			return strings.Trim(v, `"'`)
		}
	}
	t.Fatalf("ci/schemas.sh sets no %s=module@version: the CRD versions are read from there", name)
	return ""
}

// object is the identity of one document of a manifest file.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct { // CRDs only
		Group    string                  `yaml:"group"`
		Names    struct{ Plural string } `yaml:"names"`
		Versions []struct {
			Name   string `yaml:"name"`
			Served bool   `yaml:"served"`
		} `yaml:"versions"`
	} `yaml:"spec"`
}

func (o object) String() string {
	s := o.Kind + "/" + o.Metadata.Name
	if o.Metadata.Namespace != "" {
		s = o.Metadata.Namespace + "/" + s
	}
	return s
}

// readObjects reads every non-empty YAML document of a file.
func readObjects(t testing.TB, path string) []object {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []object
	dec := yaml.NewDecoder(f)
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

// manifestFiles lists the YAML files under dir, recursively, sorted.
func manifestFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// targets lists the folders of generated/.
func targets(t testing.TB, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "generated"))
	if err != nil {
		t.Fatalf("read generated/: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatal("generated/ has no target folders")
	}
	return out
}

// TestAPIServer starts one etcd + kube-apiserver and runs every suite against
// it: the generated objects, the delivery objects, the mutation suite, the
// smoke test, the readiness gate and the checked classes' Events.
func TestAPIServer(t *testing.T) {
	root := repoRoot(t)
	c := startCluster(t)
	t.Run("generated", func(t *testing.T) { testGenerated(t, c, root) })
	t.Run("delivery", func(t *testing.T) { testDelivery(t, c, root) })
	t.Run("mutations", func(t *testing.T) { testMutations(t, c, root) })
	t.Run("smoke", func(t *testing.T) { testSmoke(t, c, root) })
	// Last: it creates Node objects and applies the gate's policy for real.
	t.Run("gate", func(t *testing.T) { testGate(t, c, root) })
	// After the gate: a target with checked classes, and the Events its installer reports.
	t.Run("class-events", func(t *testing.T) { testClassEvents(t, c, root) })
}

// testSmoke dry-runs every target's smoke test (smoke/<target>/: the pod and
// its PVC), what the CI smoke legs apply. Admission looks up the pod's
// RuntimeClass and the namespace's default ServiceAccount, so both are
// created for real first (no controller-manager runs here).
func testSmoke(t *testing.T, c *cluster, root string) {
	ctx := context.Background()
	dryRunTargets(t, c, root, "smoke", func(target string) {
		if out, err := c.apply(ctx, filepath.Join(root, "generated", target, rc)); err != nil {
			t.Fatalf("create the RuntimeClass of %s: %v\n%s", target, err, out)
		}
		if code, _, err := c.get("/api/v1/namespaces/gvisor-smoke/serviceaccounts/default"); err != nil || code != http.StatusOK {
			if out, err := c.kubectl(ctx, "-n", "gvisor-smoke", "create", "serviceaccount", "default"); err != nil {
				t.Fatalf("create the smoke namespace's default ServiceAccount: %v\n%s", err, out)
			}
		}
	})
}

// ensureNamespaces creates, for real, the Namespace objects among files (a
// dry-run namespace is not stored, so namespaced dry runs would fail without
// it), then any namespace the objects name that no file defines.
func ensureNamespaces(t *testing.T, c *cluster, files []string) {
	t.Helper()
	ctx := context.Background()
	defined := map[string]bool{}
	referenced := map[string]bool{}
	for _, f := range files {
		for _, o := range readObjects(t, f) {
			if o.Kind == "Namespace" && o.APIVersion == "v1" {
				if out, err := c.apply(ctx, f); err != nil {
					t.Fatalf("%s: create namespace %s: %v\n%s", f, o.Metadata.Name, err, out)
				}
				defined[o.Metadata.Name] = true
			} else if o.Metadata.Namespace != "" {
				referenced[o.Metadata.Namespace] = true
			}
		}
	}
	for ns := range referenced {
		if defined[ns] {
			continue
		}
		if code, _, err := c.get("/api/v1/namespaces/" + ns); err == nil && code == http.StatusOK {
			continue
		}
		t.Logf("namespace %s is used but not defined by these files: creating it", ns)
		if out, err := c.kubectl(ctx, "create", "namespace", ns); err != nil {
			t.Fatalf("create namespace %s: %v\n%s", ns, err, out)
		}
	}
}

// dryRunAll dry-runs every file and fails with the server's own message.
func dryRunAll(t *testing.T, c *cluster, root string, files []string) {
	t.Helper()
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		out, err := c.dryRun(context.Background(), f)
		if err != nil {
			t.Errorf("%s: rejected by kube-apiserver:\n%s", rel, strings.TrimSpace(out))
			continue
		}
		if strings.Contains(out, "Warning:") {
			t.Logf("%s: accepted with warnings:\n%s", rel, strings.TrimSpace(out))
		} else {
			t.Logf("%s: accepted: %s", rel, strings.TrimSpace(out))
		}
	}
}

func testGenerated(t *testing.T, c *cluster, root string) {
	dryRunTargets(t, c, root, "generated", nil)
}

// dryRunTargets dry-runs top/<target>/ of every target, after creating its
// namespaces and whatever prepare creates for real.
func dryRunTargets(t *testing.T, c *cluster, root, top string, prepare func(target string)) {
	n := 0
	for _, target := range targets(t, root) {
		files := manifestFiles(t, filepath.Join(root, top, target))
		if len(files) == 0 {
			t.Errorf("%s/%s has no YAML files", top, target)
			continue
		}
		ensureNamespaces(t, c, files)
		if prepare != nil {
			prepare(target)
		}
		dryRunAll(t, c, root, files)
		n += len(files)
	}
	t.Logf("%s: %d files dry-run applied", top, n)
}

func testDelivery(t *testing.T, c *cluster, root string) {
	dir := filepath.Join(root, "delivery")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		t.Log("delivery/ does not exist yet: no Argo CD / Flux CRDs installed, no delivery objects applied")
		return
	}
	var files []string
	for _, f := range manifestFiles(t, dir) {
		objs := readObjects(t, f)
		// kustomization.yaml files are kustomize's input, not API objects.
		if len(objs) > 0 && strings.HasPrefix(objs[0].APIVersion, "kustomize.config.k8s.io/") {
			continue
		}
		if len(objs) > 0 {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatal("delivery/ exists but holds no API objects")
	}
	installCRDs(t, c, root)
	ensureNamespaces(t, c, files)
	dryRunAll(t, c, root, files)
	// The committed examples deliver from git: the OCI objects are rendered
	// for kind with every OCI setting and dry-run applied too.
	oci := ociDelivery(t, root)
	ensureNamespaces(t, c, oci)
	dryRunAll(t, c, filepath.Dir(filepath.Dir(oci[0])), oci)
	t.Logf("delivery: %d committed files and %d OCI delivery files dry-run applied", len(files), len(oci))
}

// ociValues is a kind target delivered from a signed OCI artifact, with every
// optional OCI field set.
const ociValues = `delivery:
  source: oci
  argocd: {project: platform}
  oci:
    url: oci://registry.example.com/platform/gvisor/kind
    tag: stable
    provider: aws
    pullSecret: registry-pull
    caSecret: registry-ca
    publicKey: |
      -----BEGIN PUBLIC KEY-----
      MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEp8igpKspNvm4uDXe++Sz1J3167Os
      4UIXO4Da+z5qLHX0uUxaWL/ynD3+Y3/aJly0ITgJNtG+EjXLF2q+LASF6w==
      -----END PUBLIC KEY-----
`

// ociDelivery renders the kind target with ociValues in process and writes
// its delivery files to a temporary folder.
func ociDelivery(t *testing.T, root string) []string {
	t.Helper()
	out, err := gen.Build(eval.Options{Root: root, Only: []string{"kind"}, ValuesFiles: []string{"-"}, Stdin: []byte(ociValues)})
	if err != nil {
		t.Fatalf("rendering the OCI delivery: %v", err)
	}
	dir := filepath.Join(tempDir(t), "delivery")
	var files []string
	kinds := map[string]bool{}
	for _, f := range out.Files {
		if !strings.HasPrefix(f.Path, "delivery/kind/") {
			continue
		}
		p := filepath.Join(dir, filepath.Base(f.Path))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		for _, o := range readObjects(t, p) {
			kinds[o.Kind] = true
		}
	}
	for _, k := range []string{"OCIRepository", "Secret", "Kustomization", "Application"} {
		if !kinds[k] {
			t.Fatalf("the OCI delivery has no %s: %v", k, kinds)
		}
	}
	return files
}

// installCRDs takes the Argo CD and Flux CRDs from their Go module zips,
// applies them for real and polls discovery until every served version of
// every CRD is there (polling discovery is steadier than `kubectl wait
// --for condition=Established`).
func installCRDs(t *testing.T, c *cluster, root string) {
	t.Helper()
	ctx := context.Background()
	type gv struct{ path, plural string }
	var want []gv
	for _, cm := range crdModules {
		m := struct{ module, dir string }{crdModule(t, root, cm.schemasVar), cm.dir}
		cmd := exec.Command("go", "mod", "download", "-json", m.module)
		cmd.Dir = t.TempDir() // outside any module: nothing is added to a go.mod
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go mod download %s: %v\n%s", m.module, err, out)
		}
		var info struct{ Dir, Error string }
		if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
			t.Fatalf("go mod download %s: %v %s\n%s", m.module, err, info.Error, out)
		}
		files := manifestFiles(t, filepath.Join(info.Dir, m.dir))
		n := 0
		for _, f := range files {
			objs := readObjects(t, f)
			if len(objs) != 1 || objs[0].Kind != "CustomResourceDefinition" {
				continue
			}
			if out, err := c.apply(ctx, f); err != nil {
				t.Fatalf("install CRD %s from %s: %v\n%s", filepath.Base(f), m.module, err, out)
			}
			for _, v := range objs[0].Spec.Versions {
				if v.Served {
					want = append(want, gv{"/apis/" + objs[0].Spec.Group + "/" + v.Name, objs[0].Spec.Names.Plural})
				}
			}
			n++
		}
		if n == 0 {
			t.Fatalf("no CRDs found in %s/%s", m.module, m.dir)
		}
		t.Logf("installed %d CRDs from %s", n, m.module)
	}
	deadline := time.Now().Add(time.Minute)
	for _, w := range want {
		for {
			code, body, err := c.get(w.path)
			if err == nil && code == http.StatusOK {
				var list struct{ Resources []struct{ Name string } }
				if json.Unmarshal([]byte(body), &list) == nil && hasResource(list.Resources, w.plural) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("discovery never showed %s in %s (last: %d %v)", w.plural, w.path, code, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("discovery shows all %d CRD versions", len(want))
	crdsInstalled = true
}

// crdsInstalled: installCRDs succeeded on the suite's cluster.
var crdsInstalled bool

func hasResource(rs []struct{ Name string }, plural string) bool {
	for _, r := range rs {
		if r.Name == plural {
			return true
		}
	}
	return false
}
