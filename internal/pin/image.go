package pin

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ImageDigest resolves an image reference (tag) to the digest of what the
// registry serves for it — the multi-arch index digest when it is an index —
// and returns the fully qualified reference
// "<registry>/<repo>:<tag>@sha256:<hex>" (docker.io/library/busybox:1.37.0-glibc@sha256:…
// for "busybox:1.37.0-glibc").
//
// The registry is asked anonymously: the installer image is public.
func (s *Source) ImageDigest(ctx context.Context, ref string) (string, error) {
	var opts []name.Option
	if s.defaultRegistry != "" {
		opts = append(opts, name.WithDefaultRegistry(s.defaultRegistry))
	}
	parsed, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", &Answered{Source: ref, Reason: "not an image reference: " + err.Error(), Err: err}
	}
	tag, ok := parsed.(name.Tag)
	if !ok {
		return "", &Answered{Source: ref, Reason: "already a digest: give a tag to resolve"}
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	o := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(s.transport),
		remote.WithUserAgent(userAgent),
	}
	// HEAD first: it does not count against Docker Hub's pull limits. Its
	// Accept header lists index and manifest types alike, so an index tag
	// yields the index digest.
	desc, err := remote.Head(tag, o...)
	if err != nil {
		if cerr, ok := classify(ref, err).(*Unreachable); ok {
			return "", cerr // GET would fail the same way, after as long a wait
		}
		// Some registries do not answer HEAD (or omit the digest header);
		// GET also carries the registry's error details in its body.
		full, gerr := remote.Get(tag, o...)
		if gerr != nil {
			return "", classify(ref, gerr)
		}
		desc = &full.Descriptor
	}
	return qualify(tag, desc.Digest)
}

// qualify spells the pinned reference in full, with docker.io rather than
// go-containerregistry's index.docker.io, as people and kustomize write it.
func qualify(tag name.Tag, d v1.Hash) (string, error) {
	if d.Algorithm != "sha256" {
		return "", &Answered{Source: tag.String(), Reason: fmt.Sprintf("registry served a %s digest, want sha256", d.Algorithm)}
	}
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return fmt.Sprintf("%s/%s:%s@%s", reg, tag.RepositoryStr(), tag.TagStr(), d), nil
}
