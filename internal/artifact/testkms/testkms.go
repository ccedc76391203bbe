// Package testkms is a KMS plugin for tests: a program that speaks sigstore's
// KMS plugin protocol (github.com/sigstore/sigstore/pkg/signature/kms/cliplugin,
// the one cosign's --key <plugin>://<key> uses) with sigstore's own handler,
// and whose "KMS" is a PEM private key file: the key reference's path. Tests
// install it on PATH as sigstore-kms-testkms (or any sigstore-kms-<name>), so
// that `gvisorgen push --key testkms:///path/key.pem` signs through the same
// client code and process boundary a cloud KMS plugin would; no cloud KMS is
// reachable here.
package testkms

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms/cliplugin/handler"
)

// LogEnv names a file each call appends its method to (so a test can tell the
// plugin was asked, and for what).
const LogEnv = "TESTKMS_LOG"

// Main runs one plugin call: args are the program's arguments (protocol
// version, the call's JSON), stdin the message to sign or verify. It returns
// the exit status (sigstore ignores it: errors travel in the JSON response).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	pa, err := handler.GetPluginArgs(append([]string{"sigstore-kms-testkms"}, args...))
	if err != nil {
		fmt.Fprintln(stderr, "testkms:", err)
		return 1
	}
	if f := os.Getenv(LogEnv); f != "" {
		if lf, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(lf, pa.MethodName, pa.InitOptions.KeyResourceID)
			_ = lf.Close()
		}
	}
	sv, err := load(pa.InitOptions.KeyResourceID, pa.InitOptions.HashFunc)
	if err != nil {
		_ = handler.WriteErrorResponse(stdout, err)
		return 1
	}
	if _, err := handler.Dispatch(stdout, stdin, pa, sv); err != nil {
		fmt.Fprintln(stderr, "testkms:", err)
		return 1
	}
	return 0
}

func load(path string, h crypto.Hash) (*keyFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testkms: no key %s: %w", path, err)
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("testkms: key %s: %w", path, err)
	}
	sv, err := signature.LoadSignerVerifier(key, h)
	if err != nil {
		return nil, err
	}
	return &keyFile{SignerVerifier: sv, key: key}, nil
}

// keyFile is the rest of the plugin interface around an in-process key.
type keyFile struct {
	signature.SignerVerifier
	key crypto.PrivateKey
}

func (k *keyFile) CreateKey(context.Context, string) (crypto.PublicKey, error) {
	return nil, errors.New("testkms: creates no keys")
}

func (k *keyFile) CryptoSigner(context.Context, func(error)) (crypto.Signer, crypto.SignerOpts, error) {
	s, ok := k.key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("testkms: not a signing key")
	}
	return s, crypto.SHA256, nil
}

func (k *keyFile) SupportedAlgorithms() []string { return []string{"ecdsa-p256-sha256"} }
func (k *keyFile) DefaultAlgorithm() string      { return "ecdsa-p256-sha256" }
