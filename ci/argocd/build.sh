#!/bin/sh
# Build Argo CD (one multi-call binary of the components the e2e runs: application-controller, repo-server,
# applicationset-controller, git-ask-pass; ci/argocd/e2emain)
# from its module and cache it outside the repo, with what the e2e installs from the same module version:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/argocd-<key>/{argocd, argocd-<component> -> argocd, manifests/, hack/}
#
# The module needs Go 1.27 (GOTOOLCHAIN, which the Go module proxy serves) and replaces its gitops-engine with
# ./gitops-engine, which the module zip does not hold: the same version of that module is put there. <key> hashes the
# versions below, this script and e2emain/main.go. The build goes into a temp folder renamed into place only when done.
# Cold: about 8 minutes on 2 cores (downloads included).
#
#   sh ci/argocd/build.sh          build if needed, print timings and the folder
#   sh ci/argocd/build.sh --dir    print the cache folder only (nothing is built)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
ARGOCD_VERSION=v3.6.2
ARGOCD_GO=go1.27.3
GO=${GO:-go}
now() { date +%s; }
t0=$(now)
key=$({
	echo "$ARGOCD_VERSION $ARGOCD_GO"
	cat "$0" "$here/e2emain/main.go"
} | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/argocd-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi
if [ -x "$dest/argocd" ] && [ -f "$dest/.complete" ]; then
	echo "argocd: cache hit $dest ($(cat "$dest/.complete"))"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.argocd-$key.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
moddir() { # MODULE@VERSION
	GOTOOLCHAIN=$ARGOCD_GO GOFLAGS=-mod=mod "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
src=$(moddir "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION")
engine=$(moddir "github.com/argoproj/argo-cd/gitops-engine/v3@$ARGOCD_VERSION")
if [ ! -d "$src/cmd" ] || [ ! -d "$engine" ]; then
	echo "argocd: module download failed" >&2
	exit 1
fi
cp -r "$src" "$tmp/src"
chmod -R u+w "$tmp/src"
cp -r "$engine" "$tmp/src/gitops-engine"
chmod -R u+w "$tmp/src/gitops-engine"
# Only the components the e2e runs (e2emain/main.go says which and why), not upstream's cmd/ and all of its own.
mkdir "$tmp/src/cmd/e2emain"
cp "$here/e2emain/main.go" "$tmp/src/cmd/e2emain/"
echo "argocd: building $ARGOCD_VERSION with $ARGOCD_GO (the components of ci/argocd/e2emain)"
# The version as Argo CD's Makefile stamps it (common.version, from its VERSION file), so that the controllers' logs
# name it.
(cd "$tmp/src" && GOTOOLCHAIN=$ARGOCD_GO CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -tags argocde2e \
	-ldflags="-s -w -X github.com/argoproj/argo-cd/v3/common.version=$(cat VERSION)" -o "$tmp/argocd" ./cmd/e2emain)
for c in application-controller repo-server applicationset-controller; do
	ln -s argocd "$tmp/argocd-$c"
done
# What the e2e installs, from the same version: CRDs and RBAC (manifests/), the repo-server's git wrapper (hack/).
mkdir -p "$tmp/hack"
cp -r "$tmp/src/manifests" "$tmp/manifests"
cp "$tmp/src/hack/git-verify-wrapper.sh" "$tmp/hack/"
rm -rf "$tmp/src"
echo "argocd=$ARGOCD_VERSION go=$ARGOCD_GO" >"$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "argocd: built in $(($(now) - t0))s -> $dest"
