// Command sigstore-kms-awskms is a sigstore KMS plugin for AWS KMS keys:
// `gvisorgen push --key awskms:///alias/<name>` (any reference sigstore's AWS
// provider takes: a key ID, an alias, an ARN, with an endpoint or without)
// runs it from PATH for the public key and the signature. It is sigstore's own
// AWS provider (github.com/sigstore/sigstore/pkg/signature/kms/aws, the one
// cosign links) behind sigstore's plugin handler, in a module of its own so
// that gvisorgen itself links no cloud SDK. Credentials and region come from
// the AWS SDK's usual chain (environment, profile, instance role);
// AWS_ENDPOINT_URL points it at another endpoint.
//
//	go install github.com/gvisorgen/gvisorgen/kmsplugin/sigstore-kms-awskms@latest
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sigstore/sigstore/pkg/signature/kms/aws"
	"github.com/sigstore/sigstore/pkg/signature/kms/cliplugin/handler"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run answers one plugin call. Errors go back in the JSON response (sigstore
// ignores the exit status); stderr reaches the user through push.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	pa, err := handler.GetPluginArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "sigstore-kms-awskms:", err)
		return 1
	}
	ctx := context.Background()
	if d := pa.InitOptions.CtxDeadline; d != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, *d)
		defer cancel()
	}
	sv, err := aws.LoadSignerVerifier(ctx, aws.ReferenceScheme+pa.InitOptions.KeyResourceID)
	if err != nil {
		_ = handler.WriteErrorResponse(stdout, err)
		return 1
	}
	if _, err := handler.Dispatch(stdout, stdin, pa, sv); err != nil {
		fmt.Fprintln(stderr, "sigstore-kms-awskms:", err)
		return 1
	}
	return 0
}
