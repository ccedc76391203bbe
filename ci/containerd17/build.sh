#!/bin/sh
# Build containerd 1.7 (the daemon and its runc shim) from the wrapper module in ci/containerd17 and cache it outside
# the repo:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-<version>-<key>/{containerd,containerd-shim-runc-v2}
#
# containerd 1.7 is what most managed node images ran through 2025 and the oldest containerd that reads a current
# gVisor shim's bootstrap handshake. Its go.mod carries `exclude` directives, so `go install …@v1.7.x` refuses it:
# hence a wrapper module (bump the version in go.mod, then go mod tidy). <key> hashes the go.mod/go.sum, `go version`
# and the flags; the build goes into a temp folder renamed into place when both binaries are there.
#
#   sh ci/containerd17/build.sh          build if needed, print the timing and the binary
#   sh ci/containerd17/build.sh --dir    print the cache folder only (nothing is built)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
VERSION=$(sed -n 's#^[^/]*github.com/containerd/containerd \(v1\.[0-9.]*\)$#\1#p' go.mod | head -n 1)
[ -n "$VERSION" ] || { echo "containerd17: no github.com/containerd/containerd v1.x in $here/go.mod" >&2; exit 1; }
GO=${GO:-go}
LDFLAGS="-s -w -X github.com/containerd/containerd/version.Version=$VERSION"
key=$({
	"$GO" version
	echo "$LDFLAGS"
	cat go.mod go.sum
} | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/containerd-$VERSION-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi
if [ -x "$dest/containerd" ] && [ -x "$dest/containerd-shim-runc-v2" ]; then
	echo "containerd17: cached $dest ($("$dest/containerd" --version))"
	exit 0
fi
t0=$(date +%s)
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.containerd-$VERSION.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# no cgo: the btrfs snapshotter (cgo) is not needed, and a static binary runs in any mount namespace
CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -ldflags="$LDFLAGS" -o "$tmp/" \
	github.com/containerd/containerd/cmd/containerd github.com/containerd/containerd/cmd/containerd-shim-runc-v2
"$tmp/containerd" --version | grep -q " $VERSION " || { echo "containerd17: the built containerd is not $VERSION" >&2; exit 1; }
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT INT TERM
echo "containerd17: built $dest in $(($(date +%s) - t0))s ($("$dest/containerd" --version))"
