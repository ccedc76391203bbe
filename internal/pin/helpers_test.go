package pin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// caFile writes the test server's certificate as a PEM CA bundle, the way a
// user would hand a private mirror's CA to gvisorgen.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newSource(t *testing.T, ca string) *Source {
	t.Helper()
	s, err := New(ca)
	if err != nil {
		t.Fatalf("New(%q): %v", ca, err)
	}
	return s
}

// otherCertServer is a TLS server on 127.0.0.1 with a freshly made
// self-signed certificate: not httptest's shared one, so trusting that one
// does not make this one trusted.
func otherCertServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "not trusted"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA:         true,

		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// closedPort is a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// kind names the error class a caller would see through errors.As.
func kind(err error) string {
	var a *Answered
	var u *Unreachable
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &a):
		return "answered"
	case errors.As(err, &u):
		return "unreachable"
	default:
		return "unclassified"
	}
}

// checkErr asserts the class of err and that its message holds each of want.
func checkErr(t *testing.T, err error, wantKind string, want ...string) {
	t.Helper()
	if got := kind(err); got != wantKind {
		t.Fatalf("error kind = %s, want %s (err: %v)", got, wantKind, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
