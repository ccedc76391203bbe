package artifact

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/gvisorgen/gvisorgen/internal/artifact/testkms"
)

// TestMain: run as sigstore-kms-<name> (a link to the test binary that
// kmsPlugin puts on PATH), the binary is the test KMS plugin.
func TestMain(m *testing.M) {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "sigstore-kms-") {
		os.Exit(testkms.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// kmsPlugin installs the test binary on PATH as sigstore-kms-testkms, gives it
// a fresh P-256 key (its "KMS"), and returns the key reference, the key's
// public half in PEM and the file each plugin call is logged to.
func kmsPlugin(t *testing.T) (ref string, pub []byte, log string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "sigstore-kms-testkms")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := cryptoutils.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	if pub, err = cryptoutils.MarshalPublicKeyToPEM(key.Public()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kf := filepath.Join(dir, "kms-key.pem")
	if err := os.WriteFile(kf, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "calls")
	t.Setenv(testkms.LogEnv, log)
	return "testkms://" + kf, pub, log
}

// TestKMSSigned: a key a KMS holds signs through sigstore's plugin protocol —
// the plugin (a separate process, sigstore's handler) is asked for the public
// key and the signature — and the signature is cosign's, verified by the
// KMS key's public half as Flux verifies with cosign.pub.
func TestKMSSigned(t *testing.T) {
	ref, pub, log := kmsPlugin(t)
	ctx := context.Background()
	s, err := LoadKMSSigner(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.PublicKeyPEM(); err != nil || string(got) != string(pub) {
		t.Fatalf("public key from the plugin: %v\n%s\nwant:\n%s", err, got, pub)
	}
	host, opts := testRegistry(t)
	p, err := Push(ctx, Options{Dir: tree(t, files, 0o644), Ref: host + "/gvisor/kind:v1", Meta: meta, Signer: s, Remote: opts})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Signed {
		t.Fatal("not signed")
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, p.Digest, v, opts...); err != nil {
		t.Fatalf("the KMS key's public half does not verify: %v", err)
	}
	if err := Verify(ctx, p.Digest, signer(t).Verifier(), opts...); err == nil {
		t.Error("cosign.pub verifies a signature made by the KMS key")
	}
	calls, _ := os.ReadFile(log)
	if c := string(calls); strings.Count(c, "signMessage ") != 1 || !strings.Contains(c, "publicKey ") {
		t.Errorf("plugin calls (one public key, one signature; verification in process):\n%s", c)
	}
}

func TestKMSRefused(t *testing.T) {
	ref, _, _ := kmsPlugin(t)
	ctx := context.Background()
	for _, c := range []struct{ ref, want string }{
		{"awskms:///alias/gvisor", "no KMS plugin for awskms:///alias/gvisor: gvisorgen signs with KMS keys through sigstore's KMS plugin protocol (cosign's), running sigstore-kms-awskms, and there is no executable of that name on PATH; install gvisorgen's AWS KMS plugin (go install github.com/gvisorgen/gvisorgen/kmsplugin/sigstore-kms-awskms@latest)"},
		{"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k", "cosign signs gcpkms:// keys with a provider built into cosign, which gvisorgen does not link: push with --unsigned, then sign the printed digest with cosign sign --key gcpkms://"},
		{"myhsm://slot/1", "running sigstore-kms-myhsm, and there is no executable of that name on PATH; install the plugin for your KMS, or sign with a key file"},
		{"testkms:///no/such/key.pem", "testkms: no key /no/such/key.pem"},
		// a path, not a plugin name: never run (sigstore would run sigstore-kms-x/evil relative to the working directory)
		{"x/evil://k", "the KMS key x/evil://k: the name before :// must be letters, digits, - or _"},
		{"../sigstore-kms-testkms://k", "the name before :// must be"},
		{strings.Replace(ref, "kms-key.pem", "calls", 1), "the KMS key testkms://"},
	} {
		if _, err := LoadKMSSigner(ctx, c.ref); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.ref, err, c.want)
		}
	}
}
