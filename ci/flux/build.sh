#!/bin/sh
# Build Flux's source-controller and kustomize-controller from their wrapper modules (ci/flux/<name>/go.mod) and
# cache them outside the repo:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/flux-<key>/{source-controller,kustomize-controller,crds/}
#
# One wrapper per controller: their go.mod files carry replace directives and pin kustomize and Kubernetes versions
# of their own, which must enter neither the project's go.mod nor each other's. <key> hashes `go version` and both
# wrappers' go.mod and go.sum (the versions live there, the single place to bump them). The build goes into a temp
# folder renamed into place only when both binaries are there, so an interrupted build never looks complete.
#
#   sh ci/flux/build.sh          build if needed, print timings and the folder
#   sh ci/flux/build.sh --dir    print the cache folder only (nothing is built)
#
# Cold: about 4-7 minutes per controller on 2 cores (ci/flux/README.md has the figures).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
NAMES="source-controller kustomize-controller"
GO=${GO:-go}
now() { date +%s; }
t0=$(now)

key=$({
	"$GO" version
	for n in $NAMES; do cat "$here/$n/go.mod" "$here/$n/go.sum"; done
} | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/flux-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi

is_complete() {
	for n in $NAMES; do [ -x "$1/$n" ] || return 1; done
	[ -f "$1/.complete" ]
}
# crds/: both controllers' CRDs (config/crd/bases of the very module versions built), which the e2e installs for
# real. Filled on their own (temp folder + rename) so that a cache built before they were added gets them without
# a rebuild.
crds() { # DIR
	[ -d "$1/crds" ] && return 0
	ctmp=$(mktemp -d "$1/.crds.XXXXXX")
	for n in $NAMES; do
		src=$(cd "$here/$n" && "$GO" mod download -json "github.com/fluxcd/$n@$("$GO" list -m -f '{{.Version}}' "github.com/fluxcd/$n")" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[ -d "$src/config/crd/bases" ] || { echo "flux: no config/crd/bases in $n's module ($src)" >&2; rm -rf "$ctmp"; exit 1; }
		cp "$src"/config/crd/bases/*.yaml "$ctmp/"
	done
	chmod 0644 "$ctmp"/*.yaml
	mv "$ctmp" "$1/crds"
}
if is_complete "$dest"; then
	crds "$dest"
	echo "flux: cache hit $dest ($(cat "$dest/.complete"))"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.flux-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
versions=""
for n in $NAMES; do
	t1=$(now)
	v=$(cd "$here/$n" && "$GO" list -m -f '{{.Version}}' "github.com/fluxcd/$n")
	echo "flux: building $n $v"
	(cd "$here/$n" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false "$GO" build -trimpath -ldflags='-s -w' -o "$tmp/$n" "github.com/fluxcd/$n")
	echo "flux: $n built in $(($(now) - t1))s"
	versions="$versions $n=$v"
done
crds "$tmp"
echo "${versions# }" >"$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "flux: built in $(($(now) - t0))s -> $dest"
