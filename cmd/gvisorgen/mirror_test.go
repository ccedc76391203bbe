package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/rogpeppe/go-internal/testscript"
)

// mirror start: serves $WORK/mirror over https (a gVisor release mirror whose
// files the script writes) and an in-memory OCI registry over https, both
// with httptest's certificate, and sets MIRROR (the base URL), REGISTRY
// (host:port), CA (a PEM file trusting both), IMAGE_DIGEST (the digest of
// the multi-arch index pushed as $REGISTRY/library/busybox:1.37.0-glibc) and
// KUBECTL_DIGEST (the same for $REGISTRY/kubectl:v1.37.2, the readiness
// gate's image).
// mirror untrusted: MIRROR_UNTRUSTED, a second mirror with a certificate of
// its own that CA does not trust.
func mirror(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mirror start|untrusted")
	}
	switch args[0] {
	case "start":
		files := httptest.NewTLSServer(http.FileServer(http.Dir(ts.MkAbs("mirror"))))
		ts.Defer(files.Close)
		reg := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		ts.Defer(reg.Close)
		cert := files.Certificate() // httptest's servers share one certificate
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
		ts.Check(os.WriteFile(ts.MkAbs("ca.pem"), pemBytes, 0o644))
		host := strings.TrimPrefix(reg.URL, "https://")
		ts.Setenv("MIRROR", files.URL)
		ts.Setenv("REGISTRY", host)
		ts.Setenv("CA", ts.MkAbs("ca.pem"))
		pool := x509.NewCertPool()
		pool.AddCert(cert)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		idx, err := random.Index(256, 1, 2)
		ts.Check(err)
		ref, err := name.ParseReference(host + "/library/busybox:1.37.0-glibc")
		ts.Check(err)
		ts.Check(remote.WriteIndex(ref, idx, remote.WithTransport(tr)))
		d, err := idx.Digest()
		ts.Check(err)
		ts.Setenv("IMAGE_DIGEST", d.String())
		// The readiness gate's kubectl image, under its default tag.
		kidx, err := random.Index(256, 1, 2)
		ts.Check(err)
		kref, err := name.ParseReference(host + "/kubectl:v1.37.2")
		ts.Check(err)
		ts.Check(remote.WriteIndex(kref, kidx, remote.WithTransport(tr)))
		kd, err := kidx.Digest()
		ts.Check(err)
		ts.Setenv("KUBECTL_DIGEST", kd.String())
	case "untrusted":
		srv := httptest.NewUnstartedServer(http.FileServer(http.Dir(ts.MkAbs("mirror"))))
		// httptest's servers share one certificate: this one gets its own,
		// self-signed for another host name.
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(ts, "mirror.example.com")}}
		srv.StartTLS()
		ts.Defer(srv.Close)
		ts.Setenv("MIRROR_UNTRUSTED", srv.URL)
	default:
		ts.Fatalf("usage: mirror start|untrusted")
	}
}

// selfSigned makes a certificate for host, signed by itself.
func selfSigned(ts *testscript.TestScript, host string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ts.Check(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	ts.Check(err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
