#!/bin/sh
# Build the distribution/distribution v3 registry (the CNCF Distribution project's `registry`, what most private
# registries run) from its wrapper module (ci/registry/go.mod) and cache it outside the repo:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/registry-<key>/registry
#
# <key> hashes `go version` and the wrapper's go.mod and go.sum (the version lives there, the one place to bump it).
# The wrapper requires every module it shares with the Flux wrappers at their version, and the build uses their flags:
# built after Flux's (as .ci/run does), it reuses their compiled packages (ci/flux/README.md, TestWrappersAligned).
# The build goes into a temp folder renamed into place only when it is done. Cold: about 2 minutes on 2 cores alone,
# 24 s after Flux's build (the fast kind, 2026-12-08).
#
#   sh ci/registry/build.sh          build if needed, print timings and the folder
#   sh ci/registry/build.sh --dir    print the cache folder only (nothing is built)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
now() { date +%s; }
t0=$(now)
key=$({
	"$GO" version
	cat "$here/go.mod" "$here/go.sum"
} | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/registry-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi
if [ -x "$dest/registry" ] && [ -f "$dest/.complete" ]; then
	echo "registry: cache hit $dest ($(cat "$dest/.complete"))"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.registry-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
v=$(cd "$here" && "$GO" list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
echo "registry: building distribution $v"
(cd "$here" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -ldflags='-s -w' -o "$tmp/registry" \
	github.com/distribution/distribution/v3/cmd/registry)
echo "distribution=$v" >"$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "registry: built in $(($(now) - t0))s -> $dest"
