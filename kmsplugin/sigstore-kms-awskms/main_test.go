package main

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// TestMain: run under the plugin's name (the link the test puts on PATH), the
// test binary is the plugin, main's own code.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "sigstore-kms-awskms" {
		os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestPushSignsWithAWSKMS: `gvisorgen push --key awskms:///alias/gvisor`, as a
// user runs it, with this plugin on PATH and the AWS SDK pointed at local-kms
// (an AWS KMS API server, seeded with a P-256 key under alias/gvisor): the
// pushed digest gets cosign's signature, made by KMS's Sign call, which the
// seeded key's public half verifies (as Flux verifies with cosign.pub). An
// alias KMS does not know fails the push with KMS's own words.
func TestPushSignsWithAWSKMS(t *testing.T) {
	work := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	gvisorgen := filepath.Join(work, "gvisorgen")
	localKMS := filepath.Join(work, "local-kms")
	// gvisorgen from the repository's own module (this one does not require it), local-kms from this module's tools
	for _, b := range [][]string{
		{"-C", repo, "build", "-trimpath", "-o", gvisorgen, "./cmd/gvisorgen"},
		{"build", "-trimpath", "-o", localKMS, "github.com/nsmithuk/local-kms"},
	} {
		if out, err := exec.Command("go", b...).CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", b, err, out)
		}
	}
	endpoint := startLocalKMS(t, localKMS, work)

	// the plugin on PATH, the AWS SDK's environment as a CI job would set it
	bin := filepath.Join(work, "bin")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(bin, "sigstore-kms-awskms")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+work,
		"AWS_ACCESS_KEY_ID=AKIAGVISORGENTEST", "AWS_SECRET_ACCESS_KEY=test-only", "AWS_REGION=eu-west-2",
		"AWS_ENDPOINT_URL="+endpoint, "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)

	// a project: the repository's CUE module, generated
	root := filepath.Join(work, "project")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(repo, "cue"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy cue/: %v\n%s", err, out)
	}
	gv := func(args ...string) (string, error) {
		cmd := exec.Command(gvisorgen, args...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := gv("generate", "--target", "kind"); err != nil {
		t.Fatalf("generate: %v\n%s", err, out)
	}

	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(work, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	push := func(key string) (string, error) {
		return gv("push", "--target", "kind", "oci://"+host+"/gvisor/kind:main", "--key", key, "--ca-file", ca,
			"--revision", "main@sha1:0123456789abcdef0123456789abcdef01234567", "--created", "2026-12-01T10:00:00Z")
	}

	out, err := push("awskms:///alias/gvisor")
	if err != nil {
		t.Fatalf("push with the KMS key: %v\n%s", err, out)
	}
	if !strings.Contains(out, "\nsigned ") || !strings.Contains(out, "(read back and verified)") {
		t.Fatalf("push did not sign:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	digest := lines[len(lines)-1]
	t.Logf("pushed and signed through AWS KMS (local-kms): %s", digest)
	verifySeededKey(t, host+"/gvisor/kind@"+digest, srv)

	// an alias KMS does not know: nothing signed, KMS's words
	out, err = push("awskms:///alias/nobody")
	if err == nil || !strings.Contains(out, "alias/nobody") {
		t.Fatalf("push with an unknown alias: %v\n%s", err, out)
	}
	t.Logf("unknown alias refused: %s", strings.TrimSpace(out))
}

// startLocalKMS runs local-kms on a free port of 127.0.0.1 with the seed and
// returns its endpoint once it answers.
func startLocalKMS(t *testing.T, binary, work string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	seed, err := filepath.Abs("testdata/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "KMS_SEED_PATH="+seed,
		"KMS_DATA_PATH="+filepath.Join(work, "kms-data"), "KMS_REGION=eu-west-2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("local-kms:\n%s", logs.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("local-kms does not listen on %s:\n%s", addr, logs.String())
		}
	}
}

// verifySeededKey: the registry holds a cosign signature of ref (the payload
// naming the digest, the signature in the layer's annotation) that the seeded
// key's public half verifies.
func verifySeededKey(t *testing.T, ref string, srv *httptest.Server) {
	t.Helper()
	b, err := os.ReadFile("testdata/key.pem")
	if err != nil {
		t.Fatal(err)
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.SkipPassword)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(key.(crypto.Signer).Public(), crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	tag := d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
	img, err := remote.Image(tag, remote.WithTransport(srv.Client().Transport))
	if err != nil {
		t.Fatalf("the signature image %s: %v", tag, err)
	}
	m, err := img.Manifest()
	if err != nil || len(m.Layers) != 1 {
		t.Fatalf("signature manifest: %v, %d layers", err, len(m.Layers))
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Layers[0].Annotations["dev.cosignproject.cosign/signature"])
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)); err != nil {
		t.Fatalf("the seeded key does not verify the signature: %v", err)
	}
	var p struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
			Type string `json:"type"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Critical.Image.Digest != d.DigestStr() || p.Critical.Type != "cosign container image signature" {
		t.Fatalf("payload %s: %v", payload, err)
	}
}
