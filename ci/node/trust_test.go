//go:build nodetest

package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// snapshot: every path of the host tree with its type, mode, content digest or link target.
func (h *Host) snapshot() map[string]string {
	h.t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(h.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.Root, p)
		v := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + sum(b)
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

// assertUnchanged: the host tree is exactly what it was (no binary, stamp, temp file, CA file or lock left).
func (h *Host) assertUnchanged(before map[string]string) {
	h.t.Helper()
	after := h.snapshot()
	var diffs []string
	for p, v := range after {
		if before[p] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %q -> %q", p, before[p], v))
		}
	}
	for p, v := range before {
		if _, ok := after[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %q removed", p, v))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		h.t.Fatalf("the host tree changed on a refusal:\n%s", strings.Join(diffs, "\n"))
	}
}

// refused: a non-zero exit matching re, naming both ways out, nothing installed, the host tree unchanged.
func (h *Host) refused(env map[string]string, re string) Result {
	h.t.Helper()
	before := h.snapshot()
	r := h.mustFail("install-runsc.sh", env, re)
	h.assertUnchanged(before)
	return r
}

// bothWaysOut: the message names the pin (gvisorgen pin / gvisor.release.sha512 / GVISOR_SHA512_PINS) and the
// verifying download (verified TLS, https://, the CA bundle value).
func bothWaysOut(t *testing.T, r Result) {
	t.Helper()
	for _, want := range []string{"gvisorgen pin", "gvisor.release.sha512", "GVISOR_SHA512_PINS", "verified TLS", "https://", "GVISOR_CA_BUNDLE"} {
		if !strings.Contains(r.Output, want) {
			t.Fatalf("the refusal does not name %q: %s", want, r)
		}
	}
	if regexp.MustCompile(`verified runsc|installed gVisor`).MatchString(r.Output) {
		t.Fatalf("refused, yet says it verified or installed something: %s", r)
	}
}

// The supply-chain rule on the node: an artifact is installed only if it is pinned or came over verified TLS.
func TestTrust(t *testing.T) {
	t.Parallel()
	subst := tlsEvilURL + "/subst"
	t.Run("self-signed-substitute-refused-without-pin", func(t *testing.T) {
		// The attack: a self-signed server for another name serves a substitute runsc and a matching .sha512.
		// busybox wget would take both; the host's curl rejects the certificate (exit 60) and nothing is installed.
		h := newHost(t, "16")
		r := h.refused(map[string]string{"GVISOR_BASE_URL": subst, "GVISOR_SHA512_PINS": ""}, `TLS verification of https://127\.0\.0\.1:\d+/subst/`+tagBin+`/x86_64/runsc failed \(host curl exit 60`)
		bothWaysOut(t, r)
		// the same with a CA bundle that is not the server's
		r = h.refused(map[string]string{"GVISOR_BASE_URL": subst, "GVISOR_SHA512_PINS": "", "GVISOR_CA_BUNDLE": testCAPEM}, `TLS verification of .*/runsc failed \(host curl exit 60`)
		bothWaysOut(t, r)
	})
	t.Run("self-signed-substitute-refused-with-the-genuine-pin", func(t *testing.T) {
		h := newHost(t, "16")
		h.refused(map[string]string{"GVISOR_BASE_URL": subst, "GVISOR_SHA512_PINS": pins(tagBin, binFiles...)}, `sha512 mismatch for .*/subst/.*/runsc against the pinned digest`)
	})
	t.Run("self-signed-substitute-refused-with-a-wrong-pin", func(t *testing.T) {
		h := newHost(t, "16")
		wrong := "x86_64/runsc " + strings.Repeat("ef", 64) + "\n" + pins(tagBin, "containerd-shim-runsc-v1")
		h.refused(map[string]string{"GVISOR_BASE_URL": subst, "GVISOR_SHA512_PINS": wrong}, `sha512 mismatch for .*/runsc against the pinned digest`)
	})
	t.Run("pinned-accepted-over-unverified-tls", func(t *testing.T) {
		// A pin wins: the genuine release from the same unverifiable server installs when pinned (busybox wget).
		h := newHost(t, "16")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": tlsEvilURL + "/release", "GVISOR_SHA512_PINS": pins(tagBin, binFiles...)})
		assertContains(t, "output", r.Output, "(pinned: busybox wget)")
		assertContains(t, "output", r.Output, "verified runsc (pinned digest)")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		assertContains(t, "stamp", h.read("/usr/local/bin/.gvisorgen-runsc.stamp"), "source runsc "+artSHA[tagBin+"/runsc"]+" pinned\n")
	})
	t.Run("verified-tls-with-the-trusted-ca-accepted", func(t *testing.T) {
		h := newHost(t, "24")
		r := h.mustRun("install-runsc.sh", tlsEnv("/release"))
		assertContains(t, "output", r.Output, "TLS verified against GVISOR_CA_BUNDLE")
		assertContains(t, "output", r.Output, "verified runsc (published runsc.sha512 over verified TLS)")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
		stamp := h.read("/usr/local/bin/.gvisorgen-runsc.stamp")
		assertContains(t, "stamp", stamp, "source runsc "+artSHA[tagBin+"/runsc"]+" verified-tls\n")
		// the CA file was only there while the run lasted
		if ents, _ := os.ReadDir(h.P("/run/gvisorgen")); len(ents) != 0 {
			t.Fatalf("left in the state dir: %v", ents)
		}
		// a re-run trusts its verified stamp: no network (an http base URL would otherwise be refused)
		r = h.mustRun("install-runsc.sh", map[string]string{"GVISOR_BASE_URL": refusedURL, "GVISOR_SHA512_PINS": ""})
		assertContains(t, "output", r.Output, "already installed")
		if h.read("/usr/local/bin/.gvisorgen-runsc.stamp") != stamp {
			t.Fatal("stamp rewritten on skip")
		}
	})
	t.Run("verified-tls-archive-accepted", func(t *testing.T) {
		h := newHost(t, "24")
		h.mustRun("install-runsc.sh", tlsEnv("/release", "GVISOR_VERSION", tagArchDir))
		h.assertInstalled("/usr/local/bin", tagArchDir, archFiles...)
	})
	t.Run("verified-tls-untrusted-ca-refused", func(t *testing.T) {
		// no CA bundle: the host's CA store does not hold the test CA
		h := newHost(t, "16")
		r := h.refused(tlsEnv("/release", "GVISOR_CA_BUNDLE", ""), `TLS verification of .*/runsc failed \(host curl exit 60`)
		bothWaysOut(t, r)
	})
	t.Run("verified-tls-wrong-host-name-refused", func(t *testing.T) {
		h := newHost(t, "16")
		env := tlsEnv("/release")
		env["GVISOR_BASE_URL"] = tlsWrongNameURL + "/release"
		r := h.refused(env, `TLS verification of .*/runsc failed \(host curl exit (60|51).*(subject name|does not match|certificate)`)
		bothWaysOut(t, r)
	})
	t.Run("http-refused-unless-every-artifact-is-pinned", func(t *testing.T) {
		h := newHost(t, "16")
		r := h.refused(map[string]string{"GVISOR_SHA512_PINS": ""}, `refusing to install runsc containerd-shim-runsc-v1 from http://.*: not pinned, and a plain http:// download cannot be verified`)
		bothWaysOut(t, r)
		if strings.Contains(r.Output, "downloading") {
			t.Fatal("downloaded before refusing")
		}
		r = h.refused(map[string]string{"GVISOR_SHA512_PINS": pins(tagBin, "runsc")}, `refusing to install containerd-shim-runsc-v1 from http://`)
		bothWaysOut(t, r)
		// binary pins do not cover an archive: the archive itself must be pinned
		h.refused(map[string]string{"GVISOR_VERSION": tagArch, "GVISOR_SHA512_PINS": pins(tagArch, "runsc", "containerd-shim-runsc-v1")}, `refusing to install gvisor\.tar\.bz2 from http://`)
		// even a CA bundle does not make http acceptable
		h.refused(map[string]string{"GVISOR_SHA512_PINS": "", "GVISOR_CA_BUNDLE": testCAPEM}, `not pinned, and a plain http:// download cannot be verified`)
		h.mustRun("install-runsc.sh", map[string]string{"GVISOR_SHA512_PINS": pins(tagBin, binFiles...)})
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
	})
	t.Run("no-curl-on-the-host-refused", func(t *testing.T) {
		h := newHost(t, "16")
		// the host's PATH without curl (/usr/local/sbin holds only the fake systemctl, containerd, ctr)
		r := h.refused(tlsEnv("/release", "HOST_PATH", "/usr/local/sbin"), `the host has no working curl`)
		bothWaysOut(t, r)
	})
	t.Run("bad-ca-bundle-refused", func(t *testing.T) {
		h := newHost(t, "16")
		h.refused(tlsEnv("/release", "GVISOR_CA_BUNDLE", "not a certificate"), `GVISOR_CA_BUNDLE must be PEM certificates`)
	})
	t.Run("verified-tls-flaky-server-retried", func(t *testing.T) {
		h := newHost(t, "16")
		r := h.mustRun("install-runsc.sh", tlsEnv("/fault/flaky/1-trust", "DOWNLOAD_RETRIES", "3"))
		assertContains(t, "output", r.Output, "server error")
		h.assertInstalled("/usr/local/bin", tagBin, binFiles...)
	})
	t.Run("verified-tls-timeout", func(t *testing.T) {
		h := newHost(t, "16")
		h.refused(tlsEnv("/fault/hang", "DOWNLOAD_TIMEOUT_SECONDS", "1"), `failed after 2 attempt\(s\): timed out after 1s`)
	})
	t.Run("older-stamp-without-verification-reinstalled", func(t *testing.T) {
		// A stamp written before this rule (source lines without a method) does not vouch for unpinned files.
		h := newHost(t, "16")
		h.mustRun("install-runsc.sh", nil)
		p := h.P("/usr/local/bin/.gvisorgen-runsc.stamp")
		old := regexp.MustCompile(`(?m)^(r?source .*) pinned$`).ReplaceAllString(h.read("/usr/local/bin/.gvisorgen-runsc.stamp"), "$1")
		h.write(p, 0o644, old)
		r := h.mustRun("install-runsc.sh", tlsEnv("/release"))
		assertContains(t, "output", r.Output, "installed gVisor "+tagBin)
		assertContains(t, "stamp", h.read("/usr/local/bin/.gvisorgen-runsc.stamp"), " verified-tls\n")
	})
}
