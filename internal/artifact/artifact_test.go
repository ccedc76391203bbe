package artifact

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/elliptic"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// testRegistry is go-containerregistry's registry over TLS (httptest's CA,
// trusted by the options returned), the way a real registry is reached.
func testRegistry(t *testing.T) (host string, opts []remote.Option) {
	t.Helper()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(discard())))
	srv.Config.ErrorLog = discard() // go-containerregistry tries http first for 127.0.0.1
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), []remote.Option{remote.WithTransport(srv.Client().Transport)}
}

func tree(t *testing.T, files map[string]string, mode os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, time.Now(), time.Now().Add(-time.Duration(len(body))*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var files = map[string]string{
	"runtimeclass-gvisor.yaml":     "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: gvisor\nhandler: runsc\n",
	"namespace-gvisor-system.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gvisor-system\n",
}

var meta = Meta{
	Source:   "https://example.com/platform/gvisor.git",
	Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
	Created:  time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
}

func signer(t *testing.T) *Signer {
	t.Helper()
	key, err := os.ReadFile("testdata/cosign.key")
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(key, []byte("test-only"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// otherSigner is a fresh key in the same format (sigstore's, which cosign
// generate-key-pair writes).
func otherSigner(t *testing.T) *Signer {
	t.Helper()
	priv, _, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("pw")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLayout: what Flux's OCIRepository reads — the media types and
// annotations of `flux push artifact`, a gzipped tarball of the tree with
// no trace of the machine it was packed on.
func TestLayout(t *testing.T) {
	host, opts := testRegistry(t)
	p, err := Push(context.Background(), Options{Dir: tree(t, files, 0o664), Ref: "oci://" + host + "/gvisor/kind:v1", Meta: meta, Remote: opts})
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(p.Digest, opts...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.cncf.flux.config.v1+json" {
		t.Errorf("manifest %s, config %s", m.MediaType, m.Config.MediaType)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.created":  "2026-12-01T10:00:00Z",
		"org.opencontainers.image.source":   meta.Source,
		"org.opencontainers.image.revision": meta.Revision,
	} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("annotation %s = %q, want %q", k, got, want)
		}
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.cncf.flux.content.v1.tar+gzip" {
		t.Fatalf("layers %+v", m.Layers)
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Mode != 0o644 || !h.ModTime.IsZero() && h.ModTime.Unix() != 0 || h.Uid != 0 || h.Uname != "" {
			t.Errorf("%s: mode %o mtime %v uid %d %q: not reproducible", h.Name, h.Mode, h.ModTime, h.Uid, h.Uname)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if len(got) != len(files) {
		t.Errorf("tar holds %v", got)
	}
	for k, v := range files {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// TestSameInputsSameDigest: the digest depends on the files and the commit
// alone, not on the checkout's modes, times or path, nor on the registry.
func TestSameInputsSameDigest(t *testing.T) {
	host, opts := testRegistry(t)
	host2, opts2 := testRegistry(t)
	push := func(dir, ref string, m Meta, o []remote.Option) string {
		t.Helper()
		p, err := Push(context.Background(), Options{Dir: dir, Ref: ref, Meta: m, Remote: o})
		if err != nil {
			t.Fatal(err)
		}
		return p.Digest.DigestStr()
	}
	a := push(tree(t, files, 0o644), host+"/a:1", meta, opts)
	b := push(tree(t, files, 0o600), host2+"/other/name:2", meta, opts2)
	if a != b {
		t.Errorf("same files and commit: %s then %s", a, b)
	}
	later := meta
	later.Created = meta.Created.Add(time.Second)
	if c := push(tree(t, files, 0o644), host+"/a:1", later, opts); c == a {
		t.Error("another commit time gave the same digest")
	}
	changed := map[string]string{"runtimeclass-gvisor.yaml": files["runtimeclass-gvisor.yaml"] + "# x\n"}
	if c := push(tree(t, changed, 0o644), host+"/a:1", meta, opts); c == a {
		t.Error("other files gave the same digest")
	}
}

func TestSigned(t *testing.T) {
	host, opts := testRegistry(t)
	ctx := context.Background()
	s := signer(t)
	dir := tree(t, files, 0o644)
	p, err := Push(ctx, Options{Dir: dir, Ref: host + "/gvisor/kind:v1", Meta: meta, Signer: s, Remote: opts})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Signed || p.Signature.TagStr() != strings.Replace(p.Digest.DigestStr(), ":", "-", 1)+".sig" {
		t.Fatalf("signed %v at %s", p.Signed, p.Signature)
	}
	pub, err := os.ReadFile("testdata/cosign.pub")
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, p.Digest, v, opts...); err != nil {
		t.Fatalf("cosign.pub does not verify: %v", err)
	}
	if err := Verify(ctx, p.Digest, otherSigner(t).Verifier(), opts...); err == nil || !strings.Contains(err.Error(), "signed by another key") {
		t.Errorf("another key: %v", err)
	}

	// Pushing the same tree again signs nothing new.
	again, err := Push(ctx, Options{Dir: dir, Ref: host + "/gvisor/kind:v1", Meta: meta, Signer: s, Remote: opts})
	if err != nil || again.Signed || again.Digest != p.Digest {
		t.Fatalf("re-push: %+v, %v", again, err)
	}
	// A second key adds its signature beside the first.
	o := otherSigner(t)
	if _, err := Push(ctx, Options{Dir: dir, Ref: host + "/gvisor/kind:v1", Meta: meta, Signer: o, Remote: opts}); err != nil {
		t.Fatal(err)
	}
	sigs, err := remote.Image(p.Signature, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := sigs.Manifest(); len(m.Layers) != 2 {
		t.Errorf("%d signatures, want 2", len(m.Layers))
	}
	for _, k := range []*Signer{s, o} {
		if err := Verify(ctx, p.Digest, k.Verifier(), opts...); err != nil {
			t.Error(err)
		}
	}

	// The tag moved to an unsigned artifact: its digest has no signature.
	moved, err := Push(ctx, Options{Dir: tree(t, map[string]string{"a.yaml": "a: 1\n"}, 0o644), Ref: host + "/gvisor/kind:v1", Meta: meta, Remote: opts})
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, moved.Digest, v, opts...); err == nil || !strings.Contains(err.Error(), "is not signed") {
		t.Errorf("unsigned: %v", err)
	}
}

func TestKeys(t *testing.T) {
	key, err := os.ReadFile("testdata/cosign.key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(key, []byte("wrong")); err == nil || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := LoadSigner([]byte("not a key"), nil); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Errorf("not a key: %v", err)
	}
	pub, err := signer(t).PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/cosign.pub")
	if string(pub) != string(want) {
		t.Errorf("public key:\n%s\nwant (cosign.pub):\n%s", pub, want)
	}
}

func TestRegistryErrors(t *testing.T) {
	ctx := context.Background()
	dir := tree(t, files, 0o644)
	denied := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`)
	}))
	defer denied.Close()
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		name string
		ref  string
		opts []remote.Option
		want string
	}{
		{"denied", strings.TrimPrefix(denied.URL, "https://") + "/a:1", []remote.Option{remote.WithTransport(denied.Client().Transport)}, "DENIED"},
		{"unreachable", strings.TrimPrefix(closed.URL, "https://") + "/a:1", []remote.Option{remote.WithTransport(closed.Client().Transport)}, "connection refused"},
		{"untrusted certificate", strings.TrimPrefix(denied.URL, "https://") + "/a:1", nil, "certificate"},
		{"digest instead of tag", "example.com/a@sha256:" + strings.Repeat("0", 64), nil, "want oci://registry/repository:tag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Push(ctx, Options{Dir: dir, Ref: c.ref, Meta: meta, Remote: c.opts})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestTreeRefused(t *testing.T) {
	host, opts := testRegistry(t)
	dir := tree(t, files, 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{dir, "not a regular file or folder"},
		{filepath.Join(t.TempDir(), "gone"), "does not exist"},
		{t.TempDir(), "holds no file"},
	} {
		_, err := Push(context.Background(), Options{Dir: c.dir, Ref: host + "/a:1", Meta: meta, Remote: opts})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.dir, err, c.want)
		}
	}
	ref, err := name.ParseReference(host + "/a:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(ref, opts...); err == nil {
		t.Error("a refused tree was pushed")
	}
}

func discard() *log.Logger { return log.New(io.Discard, "", 0) }
