// Package artifact publishes a target's rendered tree as an OCI artifact:
// packed and pushed in the layout `flux push artifact` writes (Flux's own
// library, fluxcd/pkg/oci: the same media types, annotations and tarball, so
// Flux's OCIRepository and Argo CD's OCI source read it), then signed the way
// `cosign sign --key` signs (sign.go) and verified from the registry before a
// push is called done.
package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	fluxoci "github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Meta is what the artifact says about where it came from: Flux shows it as
// the OCIRepository's revision and origin. Created comes from the commit, not
// the clock, so the same commit gives the same digest.
type Meta struct {
	Source   string // the repository's URL
	Revision string // e.g. main@sha1:<commit>, as `flux push artifact` documents
	Created  time.Time
}

// Options are one push.
type Options struct {
	// Dir is the tree to pack (generated/<target>), read as it is on disk.
	Dir string
	// Ref is where to push: registry/repository:tag, oci:// allowed.
	Ref  string
	Meta Meta
	// Signer signs the pushed digest; nil pushes unsigned.
	Signer *Signer
	// Remote are extra registry options (a transport with a private CA);
	// credentials always come from the docker config and its helpers.
	Remote []remote.Option
}

// Pushed is what a push did.
type Pushed struct {
	Digest    name.Digest // the artifact, by digest
	Signature name.Tag    // the signature's tag; empty when unsigned
	// Signed is false when an equal signature by the same key was already
	// there (a re-push of the same tree signs nothing new).
	Signed bool
}

// ParseRef accepts registry/repository:tag with or without oci://; a digest
// is refused (a push names where the artifact goes, the digest is the result).
func ParseRef(s string) (name.Tag, error) {
	t, err := name.NewTag(strings.TrimPrefix(s, fluxoci.OCIRepositoryPrefix), name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("artifact reference %q: %w (want oci://registry/repository:tag)", s, err)
	}
	return t, nil
}

// Push packs o.Dir, pushes it to o.Ref, signs its digest when o.Signer is
// set, and checks that the registry serves the digest and its signature.
func Push(ctx context.Context, o Options) (*Pushed, error) {
	tag, err := ParseRef(o.Ref)
	if err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp("", "gvisorgen-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if err := copyTree(o.Dir, stage); err != nil {
		return nil, fmt.Errorf("packing %s: %w", o.Dir, err)
	}
	opts := remoteOptions(ctx, o.Remote)
	client := fluxoci.NewClient([]crane.Option{func(c *crane.Options) { c.Remote = append(c.Remote, opts...) }})
	meta := fluxoci.Metadata{Source: o.Meta.Source, Revision: o.Meta.Revision, Created: o.Meta.Created.UTC().Format(time.RFC3339)}
	pushed, err := client.Push(ctx, tag.String(), stage, fluxoci.WithPushMetadata(meta))
	if err != nil {
		return nil, fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := name.NewDigest(pushed, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("pushing %s: the registry answered %q: %w", tag, pushed, err)
	}
	// The tag now names the digest: asked again, not assumed.
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading back %s: %w", tag, err)
	}
	if desc.Digest.String() != digest.DigestStr() {
		return nil, fmt.Errorf("reading back %s: it names %s, not the artifact just pushed (%s): another push to the same tag?", tag, desc.Digest, digest.DigestStr())
	}
	p := &Pushed{Digest: digest}
	if o.Signer == nil {
		return p, nil
	}
	if p.Signature, p.Signed, err = o.Signer.sign(ctx, digest, opts); err != nil {
		return nil, fmt.Errorf("signing %s: %w", digest, err)
	}
	if err := Verify(ctx, digest, o.Signer.Verifier(), o.Remote...); err != nil {
		return nil, fmt.Errorf("verifying the signature just pushed: %w", err)
	}
	return p, nil
}

// remoteOptions: credentials as docker and crane find them (the docker
// config and its credential helpers), then the caller's.
func remoteOptions(ctx context.Context, extra []remote.Option) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, extra...)
}

// copyTree copies the regular files under src into dst with fixed modes
// (0644 files, 0755 folders): the tarball then does not depend on the umask
// of the checkout it was packed from. Anything but files and folders (a link
// into the rest of the machine) is refused, not followed.
func copyTree(src, dst string) error {
	found := false
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if rel == "." {
				return nil
			}
			return os.Mkdir(out, 0o755)
		case d.Type().IsRegular():
			found = true
			return copyFile(p, out)
		}
		return fmt.Errorf("%s: not a regular file or folder (%s): refused", p, d.Type())
	})
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist: run `gvisorgen generate` and commit the result", src)
	}
	if err == nil && !found {
		err = fmt.Errorf("%s holds no file", src)
	}
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o644)
}
