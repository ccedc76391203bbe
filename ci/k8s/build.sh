#!/bin/sh
# Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, kubectl and etcd from the wrapper module in ci/k8s (`go build
# -trimpath`), and cache them outside the repo:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/k8s-<key>/{kube-apiserver,...,etcd}
#
# <key> hashes the Kubernetes and etcd versions, `go version`, the wrapper's
# go.mod and go.sum and the ldflags. The build goes into a temp folder that is
# renamed into place only when every binary is there, so an interrupted build
# never looks complete. A warm run is a cache hit that takes well under a second.
#
#   sh ci/k8s/build.sh          build if needed, print timings and the folder
#   sh ci/k8s/build.sh --dir    print the cache folder only (nothing is built)
#
# A cold build takes about 15-20 minutes on 2 cores and ~3 GB of memory.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

now() { date +%s; }
t0=$(now)

# The versions come from the wrapper's go.mod (the single place to bump them).
modver() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' go.mod; }
K8S_VERSION=$(modver k8s.io/kubernetes)
ETCD_VERSION=$(modver go.etcd.io/etcd/server/v3)
if [ -z "$K8S_VERSION" ] || [ -z "$ETCD_VERSION" ]; then
	echo "build.sh: cannot read the k8s.io/kubernetes or etcd version from $here/go.mod" >&2
	exit 1
fi
k8s_minor=${K8S_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}

LDFLAGS="-s -w \
-X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$k8s_minor \
-X k8s.io/component-base/version.gitTreeState=clean"

# One `go build` of every command, all static (CGO_ENABLED=0): each package is compiled once for all seven (a second
# invocation with another cgo setting compiled kubectl's whole dependency tree again: ~60 s of a cold run). Upstream
# builds the control plane, kube-proxy, kubectl and etcd static too; the kubelet builds and runs without cgo (k0s
# ships it so). The cluster e2e's kubectl image is the kubectl binary alone, on a busybox root with no C library.
PKGS="k8s.io/kubernetes/cmd/kube-apiserver
k8s.io/kubernetes/cmd/kube-controller-manager
k8s.io/kubernetes/cmd/kube-scheduler
k8s.io/kubernetes/cmd/kubelet
k8s.io/kubernetes/cmd/kube-proxy
k8s.io/kubernetes/cmd/kubectl
go.etcd.io/etcd/server/v3"
BINS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd"

GO=${GO:-go}
key=$({
	echo "k8s=$K8S_VERSION etcd=$ETCD_VERSION"
	"$GO" version
	echo "$LDFLAGS"
	echo "$PKGS"
	echo "CGO_ENABLED=0"
	cat go.mod go.sum
} | sha256sum | cut -c1-16)

cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/k8s-$key

if [ "${1:-}" = "--dir" ]; then
	echo "$dest"
	exit 0
fi

is_complete() {
	[ -f "$1/.complete" ] || return 1
	for b in $BINS; do [ -x "$1/$b" ] || return 1; done
}

if is_complete "$dest"; then
	echo "k8s binaries: cache hit $dest ($(($(now) - t0))s)"
	exit 0
fi

echo "k8s binaries: cache miss, building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION with $("$GO" version)"
echo "k8s binaries: into $dest (cold: about 15-20 minutes on 2 cores)"
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.k8s-$key.tmp.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

t1=$(now)
"$GO" mod download
t2=$(now)
echo "k8s binaries: go mod download $((t2 - t1))s"

# shellcheck disable=SC2086 # PKGS is a list
CGO_ENABLED=0 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$tmp/" $PKGS
echo "k8s binaries: go build $(($(now) - t2))s"

# go names the etcd server main after the element before /v3.
mv "$tmp/server" "$tmp/etcd"
for b in $BINS; do
	[ -x "$tmp/$b" ] || { echo "build.sh: $b was not built" >&2; exit 1; }
done
"$tmp/kube-apiserver" --version
"$tmp/etcd" --version | head -1
{
	echo "k8s=$K8S_VERSION etcd=$ETCD_VERSION"
	"$GO" version
	date -u +%Y-%m-%dT%H:%M:%SZ
} >"$tmp/.complete"

if is_complete "$dest"; then
	# Another build finished first; keep its result.
	echo "k8s binaries: $dest appeared meanwhile, keeping it"
else
	rm -rf "$dest"
	mv "$tmp" "$dest"
fi
trap - EXIT
rm -rf "$tmp"

# Folders of other keys may still be in use (another checkout, a version
# bump being tried): name them, never remove them here.
for old in "$cache"/k8s-*; do
	[ "$old" = "$dest" ] || [ ! -d "$old" ] || echo "k8s binaries: another key's folder, $(du -sh "$old" | cut -f1), remove it by hand once unused: $old"
done

echo "k8s binaries: built in $(($(now) - t0))s -> $dest"
