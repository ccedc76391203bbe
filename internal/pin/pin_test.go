package pin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

var hex128 = strings.Repeat("ab", 64)

// caFile writes the httptest certificate (shared by every httptest TLS
// server) as a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReleaseSHA512(t *testing.T) {
	files := map[string]string{
		"/r/1/x86_64/runsc.sha512":                     hex128 + "  runsc\n",
		"/r/1/aarch64/containerd-shim-runsc-v1.sha512": hex128 + "\n",
		"/r/2/x86_64/gvisor.tar.bz2.sha512":            hex128 + " *gvisor.tar.bz2",
		"/r/bad/upper.sha512":                          strings.ToUpper(hex128) + "  upper\n",
		"/r/bad/short.sha512":                          "abcd  short\n",
		"/r/bad/two.sha512":                            hex128 + "  a\n" + hex128 + "  b\n",
		"/r/bad/huge.sha512":                           strings.Repeat("a", 5000),
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/r/redirect.sha512" {
			http.Redirect(w, r, "http://example.com/x.sha512", http.StatusFound)
			return
		}
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	s, err := New(caFile(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		url  string
		want string // the digest, or "answered"/"unreachable"
		msg  string
	}{
		{srv.URL + "/r/1/x86_64/runsc", hex128, ""},
		{srv.URL + "/r/1/aarch64/containerd-shim-runsc-v1", hex128, ""},
		{srv.URL + "/r/2/x86_64/gvisor.tar.bz2", hex128, ""},
		{srv.URL + "/r/missing", "answered", "HTTP 404"},
		{srv.URL + "/r/bad/upper", "answered", "malformed"},
		{srv.URL + "/r/bad/short", "answered", "malformed"},
		{srv.URL + "/r/bad/two", "answered", "malformed"},
		{srv.URL + "/r/bad/huge", "answered", "not a .sha512 file"},
		{srv.URL + "/r/redirect", "unreachable", "only https is followed"},
		{strings.Replace(srv.URL, "https://", "http://", 1) + "/r/1/x86_64/runsc", "answered", "only https"},
		{closed.URL + "/r/1/x86_64/runsc", "unreachable", "could not ask"},
	} {
		got, err := s.ReleaseSHA512(context.Background(), c.url)
		var ans *Answered
		var unr *Unreachable
		switch {
		case c.want == "answered" && !errors.As(err, &ans), c.want == "unreachable" && !errors.As(err, &unr):
			t.Errorf("%s: err = %v, want %s", c.url, err, c.want)
		case c.want != "answered" && c.want != "unreachable" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v", c.url, got, err)
		case err != nil && !strings.Contains(err.Error(), c.msg):
			t.Errorf("%s: %v, want it to say %q", c.url, err, c.msg)
		}
	}
	// Without the CA the same server's certificate is rejected.
	plain, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	_, err = plain.ReleaseSHA512(context.Background(), srv.URL+"/r/1/x86_64/runsc")
	var unr *Unreachable
	if !errors.As(err, &unr) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

func TestImageDigest(t *testing.T) {
	reg := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "https://")
	pool := x509.NewCertPool()
	pool.AddCert(reg.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	idx, err := random.Index(128, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	multi, _ := name.ParseReference(host + "/library/busybox:multi")
	single, _ := name.ParseReference(host + "/library/busybox:single")
	must(remote.WriteIndex(multi, idx, remote.WithTransport(tr)))
	must(remote.Write(single, img, remote.WithTransport(tr)))
	idxDigest, _ := idx.Digest()
	imgDigest, _ := img.Digest()

	s, err := New(caFile(t, reg))
	must(err)
	for _, c := range []struct{ ref, want string }{
		{host + "/library/busybox:multi", host + "/library/busybox:multi@" + idxDigest.String()},
		{host + "/library/busybox:single", host + "/library/busybox:single@" + imgDigest.String()},
	} {
		got, err := s.ImageDigest(context.Background(), c.ref)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
	_, err = s.ImageDigest(context.Background(), host+"/library/busybox:nosuch")
	var ans *Answered
	if !errors.As(err, &ans) {
		t.Errorf("unknown tag: %v, want Answered", err)
	}
	reg.Close()
	_, err = s.ImageDigest(context.Background(), host+"/library/busybox:multi")
	var unr *Unreachable
	if !errors.As(err, &unr) {
		t.Errorf("closed registry: %v, want Unreachable", err)
	}
}

// A short name is qualified the way people write it.
func TestQualified(t *testing.T) {
	tag, err := name.NewTag("busybox:1.37.0-glibc")
	if err != nil {
		t.Fatal(err)
	}
	if tag.RegistryStr() != name.DefaultRegistry || tag.RepositoryStr() != "library/busybox" {
		t.Fatalf("%s %s", tag.RegistryStr(), tag.RepositoryStr())
	}
}
