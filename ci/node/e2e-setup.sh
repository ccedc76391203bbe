#!/bin/sh
# ci/node/e2e-setup.sh: what the node end-to-end test (ci/node/e2e.sh) needs, on top of ci/node/setup.sh.
#  - the current gVisor: runsc and its shim built static from gVisor's Go module, and a release archive of them
#    (ci/gvisor/build.sh, cached);
#  - Debian packages: runsc (20221219: the cluster suite's upgrade starts from it), golang-1.19-go (to build the 2022
#    shim), containernetworking-plugins (bridge, host-local, loopback for the CRI pod);
#  - into ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/e2e/ (each built into a temp dir and renamed, skipped when present):
#    containerd-shim-runsc-v1 from gvisor.dev/gvisor/shim at a 2022 pseudo-version, built with Go 1.19 (a current
#    shim answers containerd 2's bootstrap handshake, which 1.6 cannot read: on 1.6 the current runsc runs behind this
#    shim); usernsrun.
#  (iproute2 too, for `ip link set lo up` in the node's network namespace.)
set -eu
cd "$(dirname "$0")/../.."
now() { date +%s; }
t_all=$(now)
sh ci/node/setup.sh
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/e2e
mkdir -p "$cache"

t=$(now)
missing=""
for p in runsc golang-1.19-go containernetworking-plugins iproute2; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "e2e-setup: apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "e2e-setup: apt packages ready in $(($(now) - t))s"

# build NAME CMD... : run CMD with GOBIN set to a temp dir, then rename it to $cache/NAME.
build() {
	name=$1
	shift
	if [ -d "$cache/$name" ]; then
		echo "e2e-setup: $name cached"
		return 0
	fi
	t=$(now)
	tmp=$(mktemp -d "$cache/.$name.XXXXXX")
	if ! GOBIN=$tmp "$@"; then
		rm -rf "$tmp"
		echo "e2e-setup: FAIL: building $name" >&2
		exit 1
	fi
	mv "$tmp" "$cache/$name"
	echo "e2e-setup: built $name in $(($(now) - t))s"
}
build shim-20221203 env GOFLAGS=-buildvcs=false GOTOOLCHAIN=local /usr/lib/go-1.19/bin/go install gvisor.dev/gvisor/shim@v0.0.0-20221203005347-703fd9b7fbc0
# keyed by the source's digest, so a change rebuilds it (e2e.sh computes the same name)
build "usernsrun-$(sha256sum ci/node/e2e/usernsrun/main.go | cut -c1-12)" env GOFLAGS=-buildvcs=false go install ./ci/node/e2e/usernsrun
sh ci/gvisor/build.sh
echo "e2e-setup: done in $(($(now) - t_all))s"
