#!/bin/sh
# Build SIG Apps' agent-sandbox controller (cmd/agent-sandbox-controller of sigs.k8s.io/agent-sandbox) for the
# cluster e2e's agent scenarios, with its CRDs (k8s/crds of the same module version), and cache both outside the repo:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/agent-sandbox-<key>/{agent-sandbox-controller,crds/}
#
# Built from the wrapper module next to this file (go.mod, go.sum: the module has no replace directive to carry over),
# which requires every module it shares with the Flux wrappers (ci/flux) at one version, with the same flags as theirs:
# the controller-runtime, client-go, gRPC and OpenTelemetry packages Flux's build compiled are reused, not compiled again
# (ci/flux/align_test.go holds the three aligned). Nothing of it enters the project's go.mod. <key> hashes `go
# version`, AGENT_SANDBOX_VERSION (its one home: this file, which the wrapper's go.mod must match) and the wrapper's
# go.mod and go.sum. The build goes into a temp folder renamed into place only when complete, so an interrupted build
# never looks complete.
#
#   sh ci/agentsandbox/build.sh          build if needed, print timings and the folder
#   sh ci/agentsandbox/build.sh --dir    print the cache folder only (nothing is built)
#   sh ci/agentsandbox/build.sh --version
#
# Cold: about 5 minutes on 2 cores (downloads included), 52 MB; ~1 minute after Flux's build (2026-12-08).
set -eu

AGENT_SANDBOX_VERSION=v1.0.1
MODULE=sigs.k8s.io/agent-sandbox
GO=${GO:-go}
now() { date +%s; }
t0=$(now)

if [ "${1:-}" = --version ]; then
	echo "$AGENT_SANDBOX_VERSION"
	exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
if ! grep -q "^[[:space:]]*$MODULE $AGENT_SANDBOX_VERSION\([[:space:]]\|\$\)" "$here/go.mod"; then
	echo "agent-sandbox: $here/go.mod does not require $MODULE $AGENT_SANDBOX_VERSION (bump both, then align: ci/flux/README.md)" >&2
	exit 1
fi
key=$({
	"$GO" version
	echo "$MODULE@$AGENT_SANDBOX_VERSION"
	cat "$here/go.mod" "$here/go.sum"
} | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/agent-sandbox-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi
if [ -x "$dest/agent-sandbox-controller" ] && [ -f "$dest/.complete" ]; then
	echo "agent-sandbox: cache hit $dest ($(cat "$dest/.complete"))"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.agent-sandbox-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
echo "agent-sandbox: building $MODULE/cmd/agent-sandbox-controller@$AGENT_SANDBOX_VERSION"
# the flags of ci/flux/build.sh's builds: the compiled packages are shared only when they agree
(cd "$here" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -ldflags='-s -w' -o "$tmp/agent-sandbox-controller" "$MODULE/cmd/agent-sandbox-controller")
src=$(cd "$here" && "$GO" mod download -json "$MODULE@$AGENT_SANDBOX_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src/k8s/crds" ] || { echo "agent-sandbox: no k8s/crds in the module ($src)" >&2; exit 1; }
mkdir "$tmp/crds"
cp "$src"/k8s/crds/*.yaml "$tmp/crds/"
chmod 0644 "$tmp"/crds/*.yaml
echo "$MODULE@$AGENT_SANDBOX_VERSION" >"$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "agent-sandbox: built in $(($(now) - t0))s -> $dest"
