#!/bin/sh
# ci/node/setup.sh: install what the node-installer tests need (idempotent, prints phase timings).
#  - Debian packages: busybox-static (the installer's shell and applets), containerd 1.6 + runc (the 1.6 checks),
#    the shellcheck linter, bzip2 (to build the test's release archive), util-linux (unshare), procps, curl and
#    ca-certificates (the fake host's curl: install-runsc fetches unpinned artifacts with the host's curl).
#  - containerd v2.4.2 built from its Go module into
#    ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-v2.4.2/containerd
#    (built into a temp dir and renamed, so an interrupted build never looks complete);
#  - containerd v2.2.9 the same way (the drop-in cases: 2.2 is the first release whose default config imports conf.d);
#  - containerd v2.3.4 the same way (RKE2's agent node: RKE2 bundles 2.3.4-k3s);
#  - containerd 1.7 (ci/containerd17/build.sh: a wrapper module, cached keyed by version; ~130 s cold).
# Run as root (CI and the dev machines are root). Prints CONTAINERD24=<path> on its last line.
set -eu

CONTAINERD24_VERSION=v2.4.2
CONTAINERD22_VERSION=v2.2.9
CONTAINERD23_VERSION=v2.3.4
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
c24dir=$cache/containerd-$CONTAINERD24_VERSION

now() { date +%s; }
t_all=$(now)

# --- Debian packages -------------------------------------------------------------------------------------------
pkgs="busybox-static containerd runc shellcheck bzip2 util-linux procps curl ca-certificates"
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
t=$(now)
if [ -n "$missing" ]; then
	echo "setup: apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "setup: apt packages ready in $(($(now) - t))s"

# Debian's containerd package would start a daemon under systemd on a real host; here there is no systemd, and the
# tests start their own containerd with private root/state/socket. Nothing to stop.

# The tests bind-mount the fake host's /etc/containerd over the machine's: the mount point must exist.
mkdir -p /etc/containerd

# --- containerd 2.x from its Go module, one folder per version ----------------------------------------------------
# build_containerd VERSION : cached in $cache/containerd-VERSION/containerd, built into a temp dir and renamed.
build_containerd() {
	t=$(now)
	dir=$cache/containerd-$1
	if [ -x "$dir/containerd" ] && "$dir/containerd" --version 2>/dev/null | grep -q " ${1#v}"; then
		echo "setup: containerd $1 cached at $dir"
	else
		echo "setup: building containerd $1 (about 3 minutes cold)"
		mkdir -p "$cache"
		tmp=$(mktemp -d "$cache/.containerd-$1.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT INT TERM
		GOBIN=$tmp GOFLAGS="-buildvcs=false -trimpath" go install -ldflags="-s -w" "github.com/containerd/containerd/v2/cmd/containerd@$1"
		"$tmp/containerd" --version
		rm -rf "$dir"
		mv "$tmp" "$dir"
		trap - EXIT INT TERM
	fi
	echo "setup: containerd $1 ready in $(($(now) - t))s"
}
build_containerd "$CONTAINERD24_VERSION"
# 2.2: the first release whose default config imports conf.d, and the line k3s and RKE2 bundled in 2026 (v2.2.6-k3s1);
# it merges a drop-in of another config version than the main file's without migrating the main file's CRI settings.
build_containerd "$CONTAINERD22_VERSION"
# 2.3: the line RKE2 bundles (v2.3.4-k3s); its config dump drops a drop-in's tables when the drop-in's version differs
# from the main file's (seen: a version 2 runsc table beside k3s's version 3 template is gone), so the drop-in has none.
build_containerd "$CONTAINERD23_VERSION"
# --- containerd 1.7 from its module (a wrapper module: its go.mod has exclude directives) ------------------------------
t=$(now)
sh "$(dirname "$0")/../containerd17/build.sh"
echo "setup: containerd 1.7 ready in $(($(now) - t))s"
sh "$(dirname "$0")/crictl.sh" >/dev/null
echo "setup: done in $(($(now) - t_all))s"
echo "CONTAINERD24=$c24dir/containerd"
echo "CONTAINERD22=$cache/containerd-$CONTAINERD22_VERSION/containerd"
echo "CONTAINERD23=$cache/containerd-$CONTAINERD23_VERSION/containerd"
echo "CONTAINERD17=$(sh "$(dirname "$0")/../containerd17/build.sh" --dir)/containerd"
