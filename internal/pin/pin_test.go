package pin

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// artifacts is the release layout: one tarball from 20260721 on (#ArchiveSince),
// the two binaries before.
func artifacts(version string) []string {
	if version[:8] >= "20260721" {
		return []string{"gvisor.tar.bz2"}
	}
	return []string{"runsc", "containerd-shim-runsc-v1"}
}

func digestOf(s string) string {
	h := sha512.Sum512([]byte(s))
	return hex.EncodeToString(h[:])
}

// mirror is a release mirror over TLS: for every version, arch and artifact
// it serves a .sha512 in one of the spellings seen in the wild, and records
// the digest each must yield.
type mirror struct {
	srv  *httptest.Server
	want map[string]string // artifact URL -> expected digest
}

func newMirror(t *testing.T, plain *httptest.Server) *mirror {
	t.Helper()
	files := map[string]string{}
	want := map[string]string{}
	m := &mirror{want: want}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	})
	mux.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.TrimPrefix(r.URL.Path, "/moved"), http.StatusFound)
	})
	mux.HandleFunc("/to-http/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+strings.TrimPrefix(r.URL.Path, "/to-http"), http.StatusFound)
	})
	mux.HandleFunc("/slow/", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	m.srv = httptest.NewTLSServer(mux)
	t.Cleanup(m.srv.Close)

	i := 0
	for _, version := range []string{"20260601", "20260615.1", "20260721", "20260801.2"} {
		for _, arch := range []string{"x86_64", "aarch64"} {
			for _, a := range artifacts(version) {
				path := fmt.Sprintf("/%s/%s/%s", version, arch, a)
				d := digestOf(path)
				// Rotate through the spellings so each layout and arch
				// meets more than one.
				switch i % 4 {
				case 0:
					files[path+".sha512"] = d + "  " + a + "\n" // sha512sum text mode
				case 1:
					files[path+".sha512"] = d + "\n" // bare hex
				case 2:
					files[path+".sha512"] = strings.ToUpper(d) + " *" + a + "\r\n" // upper case, binary mode, CRLF
				case 3:
					files[path+".sha512"] = d // bare, no newline
				}
				i++
				want[m.srv.URL+path] = d
			}
		}
	}
	files["/bad/runsc.sha512"] = "not a digest\n"
	files["/short/runsc.sha512"] = digestOf("x")[:127] + "\n"
	files["/twolines/runsc.sha512"] = digestOf("x") + "  runsc\n" + digestOf("y") + "  runsc\n"
	files["/huge/runsc.sha512"] = digestOf("x") + "  " + strings.Repeat("r", 5000) + "\n"
	files["/20260601/x86_64/moved-target.sha512"] = digestOf("moved") + "\n"
	return m
}

func TestReleaseSHA512(t *testing.T) {
	var plainHits atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Add(1)
		io.WriteString(w, digestOf("plain")+"\n")
	}))
	t.Cleanup(plain.Close)
	m := newMirror(t, plain)
	ca := caFile(t, m.srv)
	src := newSource(t, ca)

	// Every published artifact of both layouts and both arches.
	for url, want := range m.want {
		t.Run("published"+strings.TrimPrefix(url, m.srv.URL), func(t *testing.T) {
			got, err := src.ReleaseSHA512(context.Background(), url)
			if err != nil {
				t.Fatalf("ReleaseSHA512(%s): %v", url, err)
			}
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	if len(m.want) != 12 {
		t.Fatalf("mirror holds %d artifacts, want 12 (2 old-layout versions x 2 arches x 2 + 2 new x 2 x 1)", len(m.want))
	}

	untrusted := otherCertServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, digestOf("untrusted")+"\n")
	}))
	closed := "https://" + closedPort(t)
	noCA := newSource(t, "")
	slow := newSource(t, ca)
	// long enough for a TLS handshake on a loaded machine (300 ms failed once at load 5.5 on 2 cores), far below the
	// slow handler's 10 s
	slow.timeout = 2 * time.Second

	for _, tc := range []struct {
		name string
		src  *Source
		url  string
		want string // digest, when no error
		kind string
		msg  []string
	}{
		{name: "redirect within https is followed", src: src, url: m.srv.URL + "/moved/20260601/x86_64/moved-target",
			want: digestOf("moved"), kind: "ok"},
		{name: "missing artifact", src: src, url: m.srv.URL + "/20260601/x86_64/gvisor.tar.bz2",
			kind: "answered", msg: []string{"/20260601/x86_64/gvisor.tar.bz2.sha512", "404"}},
		{name: "missing version", src: src, url: m.srv.URL + "/20990101/aarch64/runsc",
			kind: "answered", msg: []string{"20990101/aarch64/runsc.sha512", "404"}},
		{name: "malformed body", src: src, url: m.srv.URL + "/bad/runsc",
			kind: "answered", msg: []string{"/bad/runsc.sha512", "malformed", "not a digest"}},
		{name: "127 hex digits", src: src, url: m.srv.URL + "/short/runsc",
			kind: "answered", msg: []string{"malformed", "128 hex digits"}},
		{name: "two lines", src: src, url: m.srv.URL + "/twolines/runsc",
			kind: "answered", msg: []string{"malformed", "more than one line"}},
		{name: "body over the size limit", src: src, url: m.srv.URL + "/huge/runsc",
			kind: "answered", msg: []string{"larger than 4096 bytes"}},
		{name: "certificate not trusted (another cert)", src: src, url: untrusted.URL + "/20260601/x86_64/runsc",
			kind: "unreachable", msg: []string{untrusted.URL, "certificate", "unknown authority"}},
		{name: "certificate not trusted (no CA file)", src: noCA, url: m.srv.URL + "/20260601/x86_64/runsc",
			kind: "unreachable", msg: []string{m.srv.URL, "certificate"}},
		{name: "closed port", src: src, url: closed + "/20260601/x86_64/runsc",
			kind: "unreachable", msg: []string{closed, "connection refused"}},
		{name: "timeout", src: slow, url: m.srv.URL + "/slow/runsc",
			kind: "unreachable", msg: []string{"/slow/runsc.sha512", "timed out"}},
		{name: "http URL refused", src: src, url: plain.URL + "/20260601/x86_64/runsc",
			kind: "answered", msg: []string{plain.URL, "only https"}},
		{name: "redirect to http refused", src: src, url: m.srv.URL + "/to-http/20260601/x86_64/runsc",
			kind: "answered", msg: []string{"/to-http/", "only https", plain.URL}},
		{name: "not a URL", src: src, url: "https://[::1",
			kind: "answered", msg: []string{"not a URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.src.ReleaseSHA512(context.Background(), tc.url)
			t.Logf("err: %v", err) // the message a user would read
			checkErr(t, err, tc.kind, tc.msg...)
			if got != tc.want {
				t.Errorf("digest = %q, want %q", got, tc.want)
			}
		})
	}
	if n := plainHits.Load(); n != 0 {
		t.Errorf("the plain http server was asked %d times, want 0", n)
	}
}

func TestParseSHA512(t *testing.T) {
	d := digestOf("x")
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"text mode", d + "  runsc\n", true},
		{"binary mode", d + " *runsc\n", true},
		{"tab", d + "\trunsc", true},
		{"path as name", d + "  bazel-bin/runsc/runsc_/runsc\n", true},
		{"bare", d, true},
		{"bare newline", d + "\n", true},
		{"trailing blanks", d + "  \n\n", true},
		{"upper case", strings.ToUpper(d) + "\n", true},
		{"empty", "", false},
		{"blank", " \n", false},
		{"leading blank", " " + d, false},
		{"129 hex digits", d + "a", false},
		{"127 hex digits", d[:127], false},
		{"not hex", "g" + d[1:], false},
		{"name without blank", d + "runsc", false},
		{"star only", d + " *", false},
		{"two digests", d + "\n" + d + "\n", false},
		{"sha256 length", d[:64] + "  runsc", false},
		{"html", "<html>" + d + "</html>", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSHA512(tc.body)
			if tc.ok != (err == nil) {
				t.Fatalf("parseSHA512(%q) error = %v, want ok=%v", tc.body, err, tc.ok)
			}
			if tc.ok && got != d {
				t.Errorf("got %s, want %s", got, d)
			}
		})
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, msg string }{
		{"missing file", filepath.Join(dir, "absent.pem"), "absent.pem"},
		{"no certificate", notPEM, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("New(%s) error = %v, want one mentioning %q", tc.file, err, tc.msg)
			}
		})
	}
}

// registryServer is go-containerregistry's in-memory registry over TLS
// holding busybox:1.37.0-glibc as a multi-arch index and busybox:single as a
// lone image; it returns the server and both digests.
func registryServer(t *testing.T) (srv *httptest.Server, index, image v1.Hash) {
	t.Helper()
	srv = httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	push := []remote.Option{remote.WithTransport(srv.Client().Transport)}
	ref := func(s string) name.Reference {
		r, err := name.ParseReference(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref(host+"/busybox:1.37.0-glibc"), idx, push...); err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref(host+"/busybox:single"), img, push...); err != nil {
		t.Fatal(err)
	}
	if index, err = idx.Digest(); err != nil {
		t.Fatal(err)
	}
	if image, err = img.Digest(); err != nil {
		t.Fatal(err)
	}
	return srv, index, image
}

func TestImageDigest(t *testing.T) {
	srv, index, image := registryServer(t)
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := caFile(t, srv)
	src := newSource(t, ca)
	src.defaultRegistry = host // short names resolve here instead of docker.io
	noCA := newSource(t, "")
	noCA.defaultRegistry = host
	closed := closedPort(t)

	for _, tc := range []struct {
		name string
		src  *Source
		ref  string
		want string
		kind string
		msg  []string
	}{
		{name: "index tag, short name", src: src, ref: "busybox:1.37.0-glibc",
			want: host + "/busybox:1.37.0-glibc@" + index.String(), kind: "ok"},
		{name: "index tag, full name", src: src, ref: host + "/busybox:1.37.0-glibc",
			want: host + "/busybox:1.37.0-glibc@" + index.String(), kind: "ok"},
		{name: "single image tag", src: src, ref: host + "/busybox:single",
			want: host + "/busybox:single@" + image.String(), kind: "ok"},
		{name: "unknown tag", src: src, ref: "busybox:9.9.9",
			kind: "answered", msg: []string{"busybox:9.9.9", "MANIFEST_UNKNOWN"}},
		{name: "unknown repository", src: src, ref: host + "/nothing:1",
			kind: "answered", msg: []string{"nothing:1"}},
		{name: "already a digest", src: src, ref: "busybox@" + index.String(),
			kind: "answered", msg: []string{"already a digest"}},
		{name: "tag and digest", src: src, ref: "busybox:1.37.0-glibc@" + index.String(),
			kind: "answered", msg: []string{"already a digest"}},
		{name: "unparsable", src: src, ref: "Busy Box:!",
			kind: "answered", msg: []string{"Busy Box:!", "not an image reference"}},
		{name: "registry unreachable", src: src, ref: closed + "/busybox:1.37.0-glibc",
			kind: "unreachable", msg: []string{closed + "/busybox:1.37.0-glibc", "connection refused"}},
		{name: "registry certificate not trusted", src: noCA, ref: "busybox:1.37.0-glibc",
			kind: "unreachable", msg: []string{"busybox:1.37.0-glibc", "certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.src.ImageDigest(context.Background(), tc.ref)
			t.Logf("err: %v", err) // the message a user would read
			checkErr(t, err, tc.kind, tc.msg...)
			if got != tc.want {
				t.Errorf("ImageDigest(%s) = %q, want %q", tc.ref, got, tc.want)
			}
		})
	}
}

// TestQualify checks the spelling of pinned references for registries the
// tests cannot reach: Docker Hub short names come out as docker.io/library/….
func TestQualify(t *testing.T) {
	d := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	for _, tc := range []struct{ ref, want string }{
		{"busybox:1.37.0-glibc", "docker.io/library/busybox:1.37.0-glibc@" + d.String()},
		{"docker.io/library/busybox:1.37.0-glibc", "docker.io/library/busybox:1.37.0-glibc@" + d.String()},
		{"index.docker.io/someone/tool:2", "docker.io/someone/tool:2@" + d.String()},
		{"busybox", "docker.io/library/busybox:latest@" + d.String()},
		{"ghcr.io/org/installer:v1", "ghcr.io/org/installer:v1@" + d.String()},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			tag, err := name.NewTag(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := qualify(tag, d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	tag := name.MustParseReference("busybox:1").(name.Tag)
	_, err := qualify(tag, v1.Hash{Algorithm: "sha512", Hex: digestOf("x")})
	checkErr(t, err, "answered", "sha512", "want sha256")
}
