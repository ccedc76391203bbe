#!/bin/sh
# ci/node/setup.sh: install what the node-installer tests need (idempotent, prints phase timings).
#  - Debian packages: busybox-static (the installer's shell and applets), containerd 1.6 + runc (the 1.6 checks),
#    the shellcheck linter, bzip2 (to build the test's release archive), util-linux (unshare), procps, curl and
#    ca-certificates (the fake host's curl: install-runsc fetches unpinned artifacts with the host's curl).
#  - containerd v2.4.2 built from its Go module into
#    ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-v2.4.2/containerd
#    (built into a temp dir and renamed, so an interrupted build never looks complete);
#  - containerd 1.7 (ci/containerd17/build.sh: a wrapper module, cached keyed by version; ~130 s cold).
# Run as root (CI and the dev machines are root). Prints CONTAINERD24=<path> on its last line.
set -eu

CONTAINERD24_VERSION=v2.4.2
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

# --- containerd 2.4.2 from its Go module ---------------------------------------------------------------------------
t=$(now)
if [ -x "$c24dir/containerd" ] && "$c24dir/containerd" --version 2>/dev/null | grep -q " ${CONTAINERD24_VERSION#v}"; then
	echo "setup: containerd $CONTAINERD24_VERSION cached at $c24dir"
else
	echo "setup: building containerd $CONTAINERD24_VERSION (a few minutes cold)"
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.containerd-$CONTAINERD24_VERSION.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
	GOBIN=$tmp GOFLAGS=-buildvcs=false go install "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD24_VERSION"
	"$tmp/containerd" --version
	rm -rf "$c24dir"
	mv "$tmp" "$c24dir"
	trap - EXIT INT TERM
fi
echo "setup: containerd $CONTAINERD24_VERSION ready in $(($(now) - t))s"
# --- containerd 1.7 from its module (a wrapper module: its go.mod has exclude directives) ------------------------------
t=$(now)
sh "$(dirname "$0")/../containerd17/build.sh"
echo "setup: containerd 1.7 ready in $(($(now) - t))s"
sh "$(dirname "$0")/crictl.sh" >/dev/null
echo "setup: done in $(($(now) - t_all))s"
echo "CONTAINERD24=$c24dir/containerd"
echo "CONTAINERD17=$(sh "$(dirname "$0")/../containerd17/build.sh" --dir)/containerd"
