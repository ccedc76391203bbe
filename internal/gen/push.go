package gen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gvisorgen/gvisorgen/internal/artifact"
	"github.com/gvisorgen/gvisorgen/internal/gitsrc"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/pin"
)

// PushOptions are one `gvisorgen push`: one target (Options.Only), where to,
// and how to sign.
type PushOptions struct {
	Options
	Ref string
	// Key is the private key's PEM (cosign.key) and Password its password;
	// no Key pushes unsigned (the command asks for --unsigned to say so).
	Key, Password []byte
	// KMS is a key a KMS holds, <name>://<key>, reached through the sigstore
	// KMS plugin sigstore-kms-<name> on PATH (instead of Key).
	KMS string
	// Source, Revision and Created replace what the commit says; Revision
	// and Created together make git unnecessary.
	Source, Revision string
	Created          time.Time
	// CAFile is trusted besides the system roots (a registry's private CA).
	CAFile string
}

// PushReport is what a push did.
type PushReport struct {
	Target string
	Dir    string // the tree packed, slash-separated, relative to the root
	Meta   artifact.Meta
	Pushed *artifact.Pushed
}

// Push publishes one target's committed rendered tree (generated/<target>)
// as a signed OCI artifact. It refuses a stale tree (*Stale, as check) and a
// tree that differs from the commit the artifact would name; it never writes
// the repository.
func Push(ctx context.Context, o PushOptions) (*PushReport, error) {
	if len(o.Only) != 1 {
		return nil, fmt.Errorf("push takes one target, got %d", len(o.Only))
	}
	rep := &PushReport{Target: o.Only[0], Dir: path.Join(layout.GeneratedDir, o.Only[0])}
	var signer *artifact.Signer
	switch {
	case o.Key != nil && o.KMS != "":
		return rep, errors.New("a key file and a KMS key: give one")
	case o.Key != nil:
		s, err := artifact.LoadSigner(o.Key, o.Password)
		if err != nil {
			return rep, err
		}
		signer = s
	case o.KMS != "":
		s, err := artifact.LoadKMSSigner(ctx, o.KMS)
		if err != nil {
			return rep, err
		}
		signer = s
	}
	if _, err := artifact.ParseRef(o.Ref); err != nil {
		return rep, err
	}
	// The gate CI trusts, not the cache (whoever can write the cache could
	// make a stale tree look fresh).
	check := o.Options
	check.NoCache = true
	if _, err := Run(check, Check); err != nil {
		var stale *Stale
		if errors.As(err, &stale) {
			return rep, fmt.Errorf("refusing to push %s: %w", rep.Dir, err)
		}
		return rep, err
	}
	meta, err := describe(o, rep.Dir)
	if err != nil {
		return rep, err
	}
	rep.Meta = meta
	roots, err := pin.Roots(o.CAFile)
	if err != nil {
		return rep, err
	}
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	rep.Pushed, err = artifact.Push(ctx, artifact.Options{
		Dir:    filepath.Join(o.Root, filepath.FromSlash(rep.Dir)),
		Ref:    o.Ref,
		Meta:   meta,
		Signer: signer,
		Remote: []remote.Option{remote.WithTransport(tr)},
	})
	return rep, err
}

// describe is what the artifact says of its origin: the commit's, unless
// the flags say otherwise.
func describe(o PushOptions, dir string) (artifact.Meta, error) {
	m := artifact.Meta{Source: o.Source, Revision: o.Revision, Created: o.Created}
	if m.Revision != "" && !m.Created.IsZero() {
		return m, nil
	}
	c, err := gitsrc.Head(o.Root, dir)
	if err != nil {
		return m, err
	}
	if m.Source == "" {
		m.Source = c.Origin
	}
	if m.Revision == "" {
		// Flux's revision format: <branch>@sha1:<commit>, or sha1:<commit>.
		m.Revision = "sha1:" + c.Hash
		if c.Branch != "" {
			m.Revision = c.Branch + "@" + m.Revision
		}
	}
	if m.Created.IsZero() {
		m.Created = c.Committed
	}
	return m, nil
}
