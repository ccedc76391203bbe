package pin

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"time"
)

// newTransport is an https-only transport trusting roots. Its own timeouts
// bound the stages a context deadline alone would leave to the defaults.
func newTransport(roots *x509.CertPool) http.RoundTripper {
	return httpsOnly{next: &http.Transport{
		// Honour HTTPS_PROXY and friends: pinning runs on developer
		// machines and CI, which often sit behind a proxy.
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   defaultTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: defaultTimeout,
		ExpectContinueTimeout: time.Second,
	}}
}

// httpsOnly refuses every request that is not https. Checking in the
// transport rather than in CheckRedirect catches every way a plain http
// request could arise: the URL given, a redirect, a registry's token realm,
// and go-containerregistry's http fallback for localhost registries.
type httpsOnly struct{ next http.RoundTripper }

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, &insecureError{url: req.URL.Redacted()}
	}
	return t.next.RoundTrip(req)
}

// insecureError is a request refused because it was not https.
type insecureError struct{ url string }

func (e *insecureError) Error() string {
	return fmt.Sprintf("refused %s: only https is accepted (pins must come over verified TLS)", e.url)
}
