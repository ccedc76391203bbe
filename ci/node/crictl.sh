#!/bin/sh
# crictl, the CRI client: the node tests put it on a fake host's PATH (configure-containerd asks CRI whether it lists
# the runsc handler) and the node e2e runs its pod with it. Built from its Go module into
# ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/e2e/crictl-<version>/ (temp dir + rename); the version is spelled here only.
#
#   sh ci/node/crictl.sh          build if missing; print the binary's path on the last line
#   sh ci/node/crictl.sh --path   print the binary's path only (nothing is built)
set -eu
CRICTL_VERSION=v1.34.0
dir=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/e2e/crictl-$CRICTL_VERSION
if [ "${1:-}" = --path ]; then
	echo "$dir/crictl"
	exit 0
fi
if [ ! -x "$dir/crictl" ]; then
	t0=$(date +%s)
	mkdir -p "${dir%/*}"
	tmp=$(mktemp -d "$dir.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	GOBIN=$tmp GOFLAGS=-buildvcs=false go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
	echo "crictl: built $CRICTL_VERSION in $(($(date +%s) - t0))s" >&2
fi
echo "$dir/crictl"
