// Package pin resolves the digests that gvisorgen pins, from their real
// source: the .sha512 published beside each gVisor release artifact, and the
// manifest digest an OCI registry serves for an image tag.
//
// Every digest comes over TLS verified against the system roots plus an
// optional CA bundle. Plain http is never used, not even as a fallback for
// registries on localhost or private addresses: a pin fetched over an
// unauthenticated channel would pin whatever an attacker on the path chose.
//
// Failures are one of two kinds, told apart with errors.As:
//
//   - *Answered: the source answered, or the request itself is definitely
//     wrong, so asking again will not help (HTTP 404 or another non-2xx
//     status, a malformed .sha512, an unknown tag, a reference that is
//     already a digest or does not parse, and an http:// URL or a redirect
//     to http, which are refused before anything is sent over plain http).
//   - *Unreachable: the source could not be asked (connection refused, DNS,
//     timeout, a TLS certificate rejected); the same request may work later
//     or with another CA bundle.
//
// New reports its own configuration errors (an unreadable CA file) as plain
// errors, since no source is involved.
package pin

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"
)

const (
	// defaultTimeout bounds each call as a whole (connect, TLS, headers,
	// body; for images also the registry ping and token exchange).
	defaultTimeout = 30 * time.Second
	// userAgent lets mirror and registry operators see who is asking.
	userAgent = "gvisorgen-pin"
)

// Source resolves digests over TLS verified against the system roots plus an
// optional CA bundle.
type Source struct {
	// transport refuses anything but https; it is shared by the release
	// client and the registry client so both trust the same roots.
	transport http.RoundTripper
	client    *http.Client
	timeout   time.Duration
	// sha512Limit caps a .sha512 body: a real one is under 200 bytes, so a
	// large body is a wrong URL (an HTML page, the artifact itself).
	sha512Limit int64
	// defaultRegistry, when not "", replaces docker.io for short names;
	// tests point it at their local registry.
	defaultRegistry string
}

// New returns a Source that trusts the system roots and, when caFile is not
// "", the PEM certificates in it too.
func New(caFile string) (*Source, error) {
	roots, err := Roots(caFile)
	if err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	t := newTransport(roots)
	return &Source{
		transport:   t,
		client:      &http.Client{Transport: t, Timeout: defaultTimeout},
		timeout:     defaultTimeout,
		sha512Limit: 4 << 10,
	}, nil
}

// Roots are the system's certificate roots plus, when caFile is not "", the
// PEM certificates in it (a mirror's or a registry's private CA).
func Roots(caFile string) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("loading the system certificate roots: %w", err)
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading CA bundle: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", caFile)
		}
	}
	return roots, nil
}
