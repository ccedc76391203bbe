//go:build argocde2e

// Command argocd is the part of Argo CD's multi-call binary (its cmd/main.go) that the e2e runs: the
// application-controller, the repo-server, the ApplicationSet controller, and git-ask-pass (the repo-server points
// git's GIT_ASKPASS at `argocd` with ARGOCD_BINARY_NAME=argocd-git-ask-pass when a repository has credentials).
// ci/argocd/build.sh copies it into the module's source tree and builds it with -tags argocde2e (the tag keeps this
// module's own go build and go vet off a file whose imports only Argo CD's module resolves). Leaving out the CLI, the
// API server, dex, notifications, the commit, CMP and k8s-auth servers leaves out their dependency trees: what the
// e2e never runs is never compiled (ci/argocd/README.md has the figures).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	applicationset "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	gitaskpass "github.com/argoproj/argo-cd/v3/cmd/argocd-git-ask-pass/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	// As upstream's main: klog at the configured level and format.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

// Upstream's main also calls util/grpc's DisableSRVLookups, which turns off gRPC's DNS SRV lookups that grpclb's init
// turns on, and panics when it finds them off: none of these components links grpclb (go list -deps), so they are
// off, as upstream wants them, and the call would only panic.
func main() {
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var cmd *cobra.Command
	switch name {
	case common.CommandApplicationController:
		cmd = appcontroller.NewCommand()
	case common.CommandRepoServer:
		cmd = reposerver.NewCommand()
	case common.CommandApplicationSetController:
		cmd = applicationset.NewCommand()
	case common.CommandGitAskPass:
		cmd = gitaskpass.NewCommand()
		cmd.SilenceUsage = true
	default:
		fmt.Fprintf(os.Stderr, "argocd: %q is not a component of this build (ci/argocd/e2emain: %s, %s, %s, %s)\n", name,
			common.CommandApplicationController, common.CommandRepoServer, common.CommandApplicationSetController,
			common.CommandGitAskPass)
		os.Exit(2)
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
