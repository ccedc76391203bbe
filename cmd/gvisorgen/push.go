package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gvisorgen/gvisorgen/internal/gen"
)

func newPush() *cobra.Command {
	var in inputFlags
	var keyFile, source, revision, created, caFile string
	var unsigned bool
	cmd := &cobra.Command{
		Use:   "push --target T oci://REGISTRY/REPOSITORY:TAG (--key cosign.key | --unsigned)",
		Short: "Publish a target's committed generated/<target> as a signed OCI artifact (Flux OCIRepository, Argo CD OCI source)",
		Long: `push packs generated/<target> as committed into an OCI artifact in the layout of
flux push artifact (Flux's own library: its media types, its annotations), pushes it with the
credentials docker and crane use (the docker config and its credential helpers), signs its
digest as cosign sign --key does, reads the signature back and verifies it, and prints the digest.

It refuses a tree that check calls stale (always evaluated, never from the cache) and a
generated/<target> that differs from the commit. The artifact's revision (<branch>@sha1:<commit>),
source (the origin remote, credentials removed) and created time (the committer's) come from the
commit, so the same commit gives the same digest; --revision, --source and --created replace them
(with both --revision and --created, git is not asked: the source is then --source or none).

The key is a cosign key file (cosign generate-key-pair; its password from COSIGN_PASSWORD, as
cosign reads it), a PEM private key, or a key a KMS holds, <name>://<key>: push then runs the
sigstore KMS plugin sigstore-kms-<name> from PATH for the public key and the signature, as cosign
does for plugins. gvisorgen links no cloud SDK; for awskms:// keys install its plugin
(go install github.com/gvisorgen/gvisorgen/kmsplugin/sigstore-kms-awskms@latest). cosign's
gcpkms://, azurekms:// and hashivault:// are providers built into cosign, not plugins: for those
keys push with --unsigned and sign the printed digest with cosign sign --key. Without --key, push
refuses unless --unsigned is given: Flux's verify (provider cosign) then refuses the artifact, and
that is the point of signing it. Keyless (OIDC) signing is not supported yet.

Exit 0: pushed (and signed and verified); 1: the tree is stale; 2: anything else (the registry
refused or could not be reached, the key or its password, a dirty tree, bad flags).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := in.options(cmd)
			if err != nil {
				return err
			}
			if len(opts.Only) != 1 {
				return &usageError{fmt.Errorf("push needs one --target (got %d): an artifact holds one target's tree", len(opts.Only))}
			}
			po := gen.PushOptions{Options: opts, Ref: args[0], Source: source, Revision: revision, CAFile: caFile}
			switch {
			case keyFile == "" && !unsigned:
				return &usageError{errors.New("no --key: push signs what it publishes (a cluster that verifies with cosign refuses an unsigned artifact); give --key cosign.key, or --unsigned to publish without a signature")}
			case keyFile != "" && unsigned:
				return &usageError{errors.New("--key and --unsigned: give one")}
			case strings.Contains(keyFile, "://"):
				po.KMS = keyFile
			case keyFile != "":
				if po.Key, err = os.ReadFile(keyFile); err != nil {
					return fmt.Errorf("reading the key: %w", err)
				}
				po.Password = []byte(os.Getenv("COSIGN_PASSWORD"))
			}
			if created != "" {
				if po.Created, err = time.Parse(time.RFC3339, created); err != nil {
					return &usageError{fmt.Errorf("--created %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", created)}
				}
			}
			rep, err := gen.Push(cmd.Context(), po)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			p := rep.Pushed
			from := ""
			if rep.Meta.Source != "" {
				from = ", from " + rep.Meta.Source
			}
			fmt.Fprintf(w, "pushed %s (%s at %s%s)\n", p.Digest, rep.Dir, rep.Meta.Revision, from)
			switch {
			case keyFile == "":
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not signed: a cluster that verifies (OCIRepository verify.provider cosign) refuses it\n", p.Digest)
			case p.Signed:
				fmt.Fprintf(w, "signed %s (read back and verified)\n", p.Signature)
			default:
				fmt.Fprintf(w, "already signed by this key at %s (verified)\n", p.Signature)
			}
			fmt.Fprintln(w, p.Digest.DigestStr())
			return nil
		},
	}
	in.register(cmd, false) // the inputs check takes; push needs exactly one --target
	fl := cmd.Flags()
	fl.StringVar(&keyFile, "key", "", "private key to sign with: a cosign key file (password in COSIGN_PASSWORD), a PEM private key, or a KMS key <name>://<key> (through the sigstore KMS plugin sigstore-kms-<name> on PATH)")
	fl.BoolVar(&unsigned, "unsigned", false, "push without a signature")
	fl.StringVar(&source, "source", "", "the artifact's source annotation (default: the origin remote's URL, credentials removed)")
	fl.StringVar(&revision, "revision", "", "the artifact's revision (default: <branch>@sha1:<commit> of HEAD)")
	fl.StringVar(&created, "created", "", "the artifact's created time, RFC 3339 (default: HEAD's committer time)")
	fl.StringVar(&caFile, "ca-file", "", "PEM certificates trusted besides the system roots (a registry with a private CA)")
	return cmd
}
