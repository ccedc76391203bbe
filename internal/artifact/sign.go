package artifact

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"
	"github.com/sigstore/sigstore/pkg/signature/kms/cliplugin"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cosign's signature format for a key-based `cosign sign --key` (its "v2"
// signatures, which Flux's OCIRepository verifies with `provider: cosign`
// and a public key): the image <repo>:sha256-<hex>.sig holds one layer per
// signature, the layer is the simple-signing payload naming the signed
// digest, and its annotation is the signature of that payload, in base64.
// Transparency-log entries and certificates (keyless) are not written.
const (
	simpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	signatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// Signer signs with a private key: cosign's own key files (`cosign
// generate-key-pair`, encrypted with a password), a PEM private key, or a key
// a KMS holds. v verifies in process with the signer's public key (for a KMS
// key, the one the KMS gave once), never by asking the signer again.
type Signer struct {
	sv signature.SignerVerifier
	v  signature.Verifier
}

// LoadSigner reads a private key. password is the key file's password
// (cosign reads it from COSIGN_PASSWORD; nil for an unencrypted key).
func LoadSigner(pemBytes, password []byte) (*Signer, error) {
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		if strings.Contains(err.Error(), "decryption failed") {
			return nil, errors.New("the password does not open the key (COSIGN_PASSWORD)")
		}
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	sv, err := signature.LoadSignerVerifier(key, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading the private key: %w", err)
	}
	return &Signer{sv: sv, v: sv}, nil
}

// LoadKMSSigner reaches a key a KMS holds, ref being <name>://<key>, through
// sigstore's KMS plugin protocol: the program sigstore-kms-<name> on PATH is
// run for each call (public key, signature), as cosign runs a plugin for
// `cosign sign --key <name>://<key>`. gvisorgen links no cloud SDK (cosign's
// built-in awskms://, gcpkms://, azurekms:// and hashivault:// providers are
// not plugins: those keys work here only with a plugin of that name, which the
// repository's kmsplugin module provides for awskms). ctx bounds each plugin
// run.
func LoadKMSSigner(ctx context.Context, ref string) (*Signer, error) {
	// The name becomes a program name: with a slash in it, sigstore would run a path relative to the working
	// directory (a checkout a pull request writes) instead of a program from PATH.
	if name, _, _ := strings.Cut(ref, "://"); !kmsName.MatchString(name) {
		return nil, fmt.Errorf("the KMS key %s: the name before :// must be letters, digits, - or _ (it names the program %s<name> on PATH)", ref, cliplugin.PluginBinaryPrefix)
	}
	sv, err := kms.Get(ctx, ref, crypto.SHA256)
	if err != nil {
		var nf *kms.ProviderNotFoundError
		if errors.As(err, &nf) {
			scheme, _, _ := strings.Cut(ref, "://")
			hint := "install the plugin for your KMS, or sign with a key file"
			switch {
			case scheme == "awskms":
				hint = "install gvisorgen's AWS KMS plugin (go install github.com/gvisorgen/gvisorgen/kmsplugin/sigstore-kms-awskms@latest), or sign with a key file"
			case slices.Contains(cosignBuiltinKMS, scheme):
				hint = "cosign signs " + scheme + ":// keys with a provider built into cosign, which gvisorgen does not link: push with --unsigned, then sign the printed digest with cosign sign --key " + ref + " (Flux verifies that signature the same way), or install a plugin of that name"
			}
			return nil, fmt.Errorf("no KMS plugin for %s: gvisorgen signs with KMS keys through sigstore's KMS plugin protocol (cosign's), running %s%s, and there is no executable of that name on PATH; %s", ref, cliplugin.PluginBinaryPrefix, scheme, hint)
		}
		return nil, fmt.Errorf("the KMS key %s: %w", ref, err)
	}
	pub, err := sv.PublicKey(options.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("the KMS key %s: its public key: %w", ref, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("the KMS key %s: its public key: %w", ref, err)
	}
	return &Signer{sv: sv, v: v}, nil
}

// kmsName is what may precede :// in a KMS key: a plugin's name, never a path.
var kmsName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// cosignBuiltinKMS are the KMS schemes cosign serves with providers of its
// own (each its cloud's SDK), not with plugins; gvisorgen ships a plugin for
// awskms (kmsplugin/sigstore-kms-awskms), none for the others yet.
var cosignBuiltinKMS = []string{"awskms", "gcpkms", "azurekms", "hashivault"}

// Verifier verifies with the signer's public key.
func (s *Signer) Verifier() signature.Verifier { return s.v }

// PublicKeyPEM is the public key, as `cosign generate-key-pair` writes
// cosign.pub and as Flux's verification secret holds it.
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	pub, err := s.v.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// LoadVerifier reads a PEM public key (cosign.pub).
func LoadVerifier(pemBytes []byte) (signature.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the public key: %w", err)
	}
	return signature.LoadVerifier(pub, crypto.SHA256)
}

// SignatureTag is where cosign keeps the signatures of d.
func SignatureTag(d name.Digest) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
}

// sign adds a signature of d to its signature image, keeping the signatures
// already there (others' keys); with one by this key already there, it adds
// nothing (signed false), as cosign does.
func (s *Signer) sign(ctx context.Context, d name.Digest, opts []remote.Option) (name.Tag, bool, error) {
	tag := SignatureTag(d)
	base, err := signatures(tag, opts)
	if err != nil {
		return tag, false, err
	}
	if ok, _ := verifies(base, d, s.v); ok {
		return tag, false, nil
	}
	msg, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		return tag, false, err
	}
	// the context bounds a KMS plugin's run (sigstore runs it under context.Background() unless told)
	sig, err := s.sv.SignMessage(bytes.NewReader(msg), options.WithContext(ctx))
	if err != nil {
		return tag, false, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(msg, simpleSigningMediaType),
		Annotations: map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return tag, false, err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return tag, false, fmt.Errorf("pushing the signature to %s: %w", tag, err)
	}
	return tag, true, nil
}

// signatures is the signature image at tag, or an empty one (cosign's: an
// OCI manifest with an OCI config) when the registry has none.
func signatures(tag name.Tag, opts []remote.Option) (v1.Image, error) {
	img, err := remote.Image(tag, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the signatures at %s: %w", tag, err)
	}
	return img, nil
}

// Verify checks that the registry holds a signature of d that v verifies:
// what Flux's OCIRepository checks with `verify.provider: cosign` and a key.
func Verify(ctx context.Context, d name.Digest, v signature.Verifier, extra ...remote.Option) error {
	opts := remoteOptions(ctx, extra)
	tag := SignatureTag(d)
	img, err := remote.Image(tag, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s is not signed: no %s", d, tag)
	}
	if err != nil {
		return fmt.Errorf("reading the signatures at %s: %w", tag, err)
	}
	ok, why := verifies(img, d, v)
	if !ok {
		return fmt.Errorf("no signature at %s verifies %s with the key%s", tag, d.DigestStr(), why)
	}
	return nil
}

// verifies says whether a layer of img is a signature, by v's key, of a
// payload naming d; if not, why not (each layer's reason).
func verifies(img v1.Image, d name.Digest, v signature.Verifier) (bool, string) {
	m, err := img.Manifest()
	if err != nil {
		return false, ": " + err.Error()
	}
	var why []string
	for i, l := range m.Layers {
		if l.MediaType != simpleSigningMediaType {
			continue
		}
		msg, err := layerBytes(img, l.Digest)
		if err != nil {
			why = append(why, fmt.Sprintf("layer %d: %v", i, err))
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[signatureAnnotation])
		if err != nil {
			why = append(why, fmt.Sprintf("layer %d: the signature is not base64", i))
			continue
		}
		if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)); err != nil {
			why = append(why, fmt.Sprintf("layer %d: signed by another key", i))
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(msg, &p); err != nil || p.Critical.Type != payload.CosignSignatureType {
			why = append(why, fmt.Sprintf("layer %d: not a cosign signature payload", i))
			continue
		}
		if got := p.Critical.Image.DockerManifestDigest; got != d.DigestStr() {
			why = append(why, fmt.Sprintf("layer %d: signs %s", i, got))
			continue
		}
		return true, ""
	}
	if len(why) == 0 {
		return false, ": it holds no signature"
	}
	return false, " (" + strings.Join(why, "; ") + ")"
}

func layerBytes(img v1.Image, h v1.Hash) ([]byte, error) {
	l, err := img.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 1<<20))
}
