// Package pin resolves digests from their real source, over TLS verified
// against the system roots (plus an optional CA bundle): the sha512 a gVisor
// release publishes beside an artifact, and the digest a registry serves for
// an image tag. It only reads; the caller decides what to pin.
package pin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Answered is an answer that is wrong: the source was asked and said
// something else than a digest (404, a malformed .sha512, an unknown tag),
// or the question was refused before asking (plain http).
type Answered struct {
	Source string // the URL or the image reference
	Err    error
}

func (e *Answered) Error() string { return fmt.Sprintf("%s: %v", e.Source, e.Err) }
func (e *Answered) Unwrap() error { return e.Err }

// Unreachable is a source that could not be asked: no connection, a
// timeout, or a certificate the client rejects.
type Unreachable struct {
	Source string
	Err    error
}

func (e *Unreachable) Error() string { return fmt.Sprintf("%s: could not ask: %v", e.Source, e.Err) }
func (e *Unreachable) Unwrap() error { return e.Err }

// Source asks over verified TLS.
type Source struct {
	client    *http.Client
	transport http.RoundTripper
}

// timeout bounds every request; maxDigestFile bounds a .sha512 body.
const (
	timeout       = 30 * time.Second
	maxDigestFile = 4 << 10
)

// New returns a Source trusting the system roots and, when caFile is not
// "", the PEM certificates in it too (a mirror or registry with a private
// CA).
func New(caFile string) (*Source, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr.Proxy = http.ProxyFromEnvironment
	client := &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A pin must come over verified TLS all the way.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: only https is followed", req.URL)
			}
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return &Source{client: client, transport: httpsOnly{tr}}, nil
}

// httpsOnly refuses every request that is not https: the registry client
// falls back to plain http for loopback and private addresses, which a pin
// must never come over.
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("%s: only https is asked: a pin must come over verified TLS", req.URL.Redacted())
	}
	return h.next.RoundTrip(req)
}

var digestLine = regexp.MustCompile(`^([0-9a-f]{128})(\s+\*?\S+)?\s*$`)

// ReleaseSHA512 fetches url+".sha512" and returns the digest it holds: 128
// lower-case hex digits, alone or followed by a file name (sha512sum's
// format). Upper-case hex is refused, as the installer's check would.
func (s *Source) ReleaseSHA512(ctx context.Context, url string) (string, error) {
	u := url + ".sha512"
	if !strings.HasPrefix(u, "https://") {
		return "", &Answered{Source: u, Err: errors.New("only https is asked: a pin must come over verified TLS")}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", &Answered{Source: u, Err: err}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", unreachable(u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &Answered{Source: u, Err: fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDigestFile+1))
	if err != nil {
		return "", &Unreachable{Source: u, Err: err}
	}
	if len(body) > maxDigestFile {
		return "", &Answered{Source: u, Err: fmt.Errorf("more than %d bytes: not a .sha512 file", maxDigestFile)}
	}
	m := digestLine.FindStringSubmatch(strings.TrimRight(string(body), "\n"))
	if m == nil || strings.Count(strings.TrimRight(string(body), "\n"), "\n") > 0 {
		return "", &Answered{Source: u, Err: fmt.Errorf("malformed .sha512: want one line of 128 lower-case hex digits, optionally followed by the file name; got %q", clip(string(body)))}
	}
	return m[1], nil
}

// ImageDigest resolves an image tag to the digest its registry serves (for
// a multi-arch image, the index's) and returns the fully qualified
// reference, "docker.io/library/busybox:1.37.0-glibc@sha256:…".
func (s *Source) ImageDigest(ctx context.Context, ref string) (string, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		if t, err2 := name.NewTag(ref); err2 == nil {
			tag, err = t, nil
		}
	}
	if err != nil {
		return "", &Answered{Source: ref, Err: fmt.Errorf("not an image tag: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	desc, err := remote.Head(tag, remote.WithContext(ctx), remote.WithTransport(s.transport))
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode != 0 {
			return "", &Answered{Source: tag.Name(), Err: err}
		}
		return "", unreachable(tag.Name(), err)
	}
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io" // how people write it; the same registry
	}
	return fmt.Sprintf("%s/%s:%s@%s", reg, tag.RepositoryStr(), tag.TagStr(), desc.Digest), nil
}

// unreachable classifies a failed request; a rejected certificate says so.
func unreachable(src string, err error) error {
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	if errors.As(err, &cert) || errors.As(err, &unknown) || errors.As(err, &host) {
		return &Unreachable{Source: src, Err: fmt.Errorf("certificate rejected: %w", err)}
	}
	return &Unreachable{Source: src, Err: err}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
