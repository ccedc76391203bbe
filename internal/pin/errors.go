package pin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Answered is a failure where the source answered, or the request was
// definitely wrong, so asking again will not help: a non-2xx status, a
// malformed .sha512, an unknown tag, an unparsable or already pinned
// reference, a URL or redirect that is not https.
type Answered struct {
	Source string // the URL or image reference asked
	Reason string // what is wrong
	Err    error  // the underlying error, if any
}

func (e *Answered) Error() string { return e.Source + ": " + e.Reason }
func (e *Answered) Unwrap() error { return e.Err }

// Unreachable is a failure to ask the source at all: connection refused, DNS,
// timeout, or a TLS certificate the client rejects.
type Unreachable struct {
	Source string // the URL or image reference asked
	Reason string // why it could not be asked
	Err    error  // the underlying error
}

func (e *Unreachable) Error() string { return e.Source + ": unreachable: " + e.Reason }
func (e *Unreachable) Unwrap() error { return e.Err }

// classify turns an error from the HTTP or registry client into an Answered
// or an Unreachable about source. The order matters: go-containerregistry
// pings a localhost registry over https and http at once and reports both
// failures together, and the http half is always our refusal; so a
// certificate or network failure, which explains the https half, is looked
// for before the refusal.
func classify(source string, err error) error {
	var (
		already  *Answered
		unreach  *Unreachable
		regErr   *transport.Error
		certErr  *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		netErr   net.Error
		opErr    *net.OpError
		dnsErr   *net.DNSError
		insecure *insecureError
		urlErr   *url.Error
	)
	switch {
	case errors.As(err, &already) || errors.As(err, &unreach):
		return err
	case errors.As(err, &regErr):
		return &Answered{Source: source, Reason: "registry answered: " + regErr.Error(), Err: err}
	case errors.As(err, &certErr):
		return certificate(source, certErr.Err, err)
	case errors.As(err, &unknown):
		return certificate(source, unknown, err)
	case errors.As(err, &hostErr):
		return certificate(source, hostErr, err)
	case errors.As(err, &invalid):
		return certificate(source, invalid, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return &Unreachable{Source: source, Reason: "timed out: " + err.Error(), Err: err}
	case errors.Is(err, context.Canceled):
		return &Unreachable{Source: source, Reason: "canceled", Err: err}
	case errors.As(err, &dnsErr):
		return &Unreachable{Source: source, Reason: dnsErr.Error(), Err: err}
	case errors.As(err, &opErr):
		return &Unreachable{Source: source, Reason: opErr.Error(), Err: err}
	case errors.As(err, &insecure):
		return &Answered{Source: source, Reason: insecure.Error(), Err: err}
	case errors.As(err, &urlErr):
		// Whatever else broke the exchange (EOF, a TLS handshake failure
		// that is not about the certificate) happened before an answer.
		return &Unreachable{Source: source, Reason: urlErr.Err.Error(), Err: err}
	default:
		return &Answered{Source: source, Reason: err.Error(), Err: err}
	}
}

// certificate names the rejected certificate and why, so the user knows a
// CA bundle (or a correct host name) is what is missing.
func certificate(source string, reason, err error) error {
	return &Unreachable{
		Source: source,
		Reason: fmt.Sprintf("TLS certificate rejected: %v (pass the CA bundle that signs it, if the source is trusted)", reason),
		Err:    err,
	}
}
