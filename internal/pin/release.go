package pin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ReleaseSHA512 fetches url+".sha512" and returns the 128-hex digest (lower
// case).
//
// The body must be sha512sum output for one file: 128 hex digits, optionally
// followed by whitespace and a file name, on one line. Upper-case hex is
// accepted and returned in lower case: it is the same digest, and sha512sum
// -c accepts it too. The file name is not compared with the artifact's, as
// the release tooling may record a build path there.
func (s *Source) ReleaseSHA512(ctx context.Context, artifactURL string) (string, error) {
	parsed, err := url.Parse(artifactURL + ".sha512")
	if err != nil {
		return "", &Answered{Source: artifactURL, Reason: "not a URL: " + err.Error(), Err: err}
	}
	if parsed.Scheme != "https" || parsed.Host == "" {
		return "", &Answered{Source: parsed.Redacted(), Reason: "only https URLs are accepted (pins must come over verified TLS)"}
	}
	u := parsed.Redacted() // never echo a password in an error

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, parsed.String(), nil)
	if err != nil {
		return "", &Answered{Source: u, Reason: "cannot build the request: " + err.Error(), Err: err}
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", classify(u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", &Answered{Source: u, Reason: "HTTP " + resp.Status}
	}
	// Read one byte past the limit to tell "at the limit" from "over it".
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.sha512Limit+1))
	if err != nil {
		return "", classify(u, fmt.Errorf("reading the body: %w", err))
	}
	if int64(len(body)) > s.sha512Limit {
		return "", &Answered{Source: u, Reason: fmt.Sprintf("body larger than %d bytes: not a .sha512 file", s.sha512Limit)}
	}
	digest, err := parseSHA512(string(body))
	if err != nil {
		return "", &Answered{Source: u, Reason: "malformed .sha512: " + err.Error(), Err: err}
	}
	return digest, nil
}

// parseSHA512 reads sha512sum output for one file and returns its digest in
// lower case.
func parseSHA512(body string) (string, error) {
	line := strings.TrimRight(body, " \t\r\n")
	if strings.ContainsAny(line, "\r\n") {
		return "", fmt.Errorf("more than one line")
	}
	const n = 128
	if len(line) < n {
		return "", fmt.Errorf("want %d hex digits, got %q", n, short(line))
	}
	digest, rest := line[:n], line[n:]
	for _, c := range digest {
		if !isHex(c) {
			return "", fmt.Errorf("want %d hex digits, got %q", n, short(line))
		}
	}
	if rest != "" {
		// sha512sum separates digest and name with two spaces, or a space
		// and '*' in binary mode; any whitespace then a name is accepted.
		name := strings.TrimLeft(rest, " \t")
		if len(name) == len(rest) || strings.TrimPrefix(name, "*") == "" {
			return "", fmt.Errorf("want %d hex digits, then whitespace and a file name, got %q", n, short(line))
		}
	}
	return strings.ToLower(digest), nil
}

func isHex(c rune) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// short keeps a malformed body readable in an error message.
func short(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
