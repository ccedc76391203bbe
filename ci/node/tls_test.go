//go:build nodetest

// busybox 1.35's TLS client (wget, used for pinned artifacts) sends no signature_algorithms, which means SHA-1 in
// TLS 1.2; Go refuses that unless tlssha1=1. Only the servers of this test process are affected.
//go:debug tlssha1=1

package node

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"time"
)

// TLS fixture: a test CA the installer can be told to trust (GVISOR_CA_BUNDLE), and three HTTPS servers on 127.0.0.1
// that serve the same release tree as busybox httpd (plus the fault paths under /fault/ on the good one):
//
//	tlsGoodURL      certificate from the test CA for IP 127.0.0.1: verifies when the test CA is trusted
//	tlsWrongNameURL certificate from the test CA for another host name only
//	tlsEvilURL      self-signed certificate for another host name (what busybox wget accepts without a word)
var (
	testCAPEM       string
	tlsGoodURL      string
	tlsWrongNameURL string
	tlsEvilURL      string
)

type keyCert struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
	der  []byte
}

// RSA keys: busybox wget's TLS client (used for pinned artifacts over https) speaks ECDHE-RSA.
func newCert(tmpl *x509.Certificate, parent *keyCert) *keyCert {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	must(err)
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	must(err)
	c, err := x509.ParseCertificate(der)
	must(err)
	return &keyCert{key: key, cert: c, der: der}
}

func (k *keyCert) tls() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{k.der}, PrivateKey: k.key}
}

func leaf(cn string, dns []string, ips []net.IP) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    dns,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

// startTLSServers starts the three servers; the returned func stops them.
func startTLSServers() func() {
	ca := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "gvisorgen node-test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil)
	testCAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}))
	good := newCert(leaf("127.0.0.1", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}), ca)
	wrongName := newCert(leaf("mirror.other.test", []string{"mirror.other.test"}, nil), ca)
	evil := newCert(leaf("gvisor-mirror.example", []string{"gvisor-mirror.example"}, nil), nil)

	mux := http.NewServeMux()
	mux.Handle("/fault/", http.StripPrefix("/fault", http.HandlerFunc(fault)))
	mux.Handle("/", http.FileServer(http.Dir(filepath.Join(work, "serve"))))
	var servers []*httptest.Server
	start := func(c *keyCert) string {
		s := httptest.NewUnstartedServer(mux)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{c.tls()}}
		s.StartTLS()
		servers = append(servers, s)
		return s.URL
	}
	tlsGoodURL = start(good)
	tlsWrongNameURL = start(wrongName)
	tlsEvilURL = start(evil)
	return func() {
		for _, s := range servers {
			s.Close()
		}
	}
}
