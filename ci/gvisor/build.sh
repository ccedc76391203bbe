#!/bin/sh
# Build a current gVisor — runsc and its containerd shim — from gVisor's Go module, static, and cache it outside the
# repo for the end-to-end suites:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/gvisor-<key>/{runsc,containerd-shim-runsc-v1,VERSION}
#   ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/gvisor-<key>.tar.bz2
#
# The archive is a release in the archive layout (gVisor's from 2026-07): gvisor/{runsc,containerd-shim-runsc-v1} and
# gvisor/gvisor-bin/gvisor_sentry, a copy of runsc (runsc boots the sandbox with that sidecar when it finds it; the
# other sidecars of a real release, gvisor-sentry-prewarmer (C) and checkpointgofer (prebuilt), cannot be built from
# the module and are optional to runsc). Deterministic tar (sorted, owner 0, mtime 0).
#
# Static on purpose: runsc re-executes /proc/self/exe after pivoting into an empty root, where a dynamic loader does
# not exist, so a `go install` build linked against libc (cgo on, the default when gcc is present) fails there with
# ENOENT. The module's shim binary is called `shim`; it is installed under the name containerd looks for.
# <key> hashes the module version, `go version` and the flags. The build goes into a temp folder that is renamed into
# place only when both binaries are there and static, so an interrupted build never looks complete.
#
#   sh ci/gvisor/build.sh          build if needed, print the timing and the folder
#   sh ci/gvisor/build.sh --dir    print the cache folder only (nothing is built)
#
# The version is the newest the module proxy serves on the day it was chosen (a pseudo-version: gVisor tags its
# releases in git, not as module versions); bump it here only.
set -eu

GVISOR_MODULE_VERSION=v0.0.0-20260905035102-160fafc42237
GO=${GO:-go}
LDFLAGS="-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_MODULE_VERSION"
key=$({
	echo "gvisor=$GVISOR_MODULE_VERSION"
	"$GO" version
	echo "$LDFLAGS"
} | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dest=$cache/gvisor-$key

if [ "${1:-}" = --dir ]; then
	echo "$dest"
	exit 0
fi
# archive: build $dest.tar.bz2 from the binaries in $dest (temp file + rename)
archive() {
	[ ! -f "$dest.tar.bz2" ] || return 0
	ta=$(date +%s)
	atmp=$(mktemp -d "$cache/.gvisor-archive.XXXXXX")
	mkdir -p "$atmp/gvisor/gvisor-bin"
	cp "$dest/runsc" "$dest/containerd-shim-runsc-v1" "$atmp/gvisor/"
	cp "$dest/runsc" "$atmp/gvisor/gvisor-bin/gvisor_sentry"
	chmod 0755 "$atmp/gvisor" "$atmp/gvisor/gvisor-bin" "$atmp/gvisor/runsc" "$atmp/gvisor/containerd-shim-runsc-v1" "$atmp/gvisor/gvisor-bin/gvisor_sentry"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$atmp" -cf - gvisor | bzip2 -1 >"$atmp/gvisor.tar.bz2"
	mv "$atmp/gvisor.tar.bz2" "$dest.tar.bz2"
	rm -rf "$atmp"
	echo "gvisor: archived $dest.tar.bz2 in $(($(date +%s) - ta))s"
}

mkdir -p "$cache"
if [ -x "$dest/runsc" ] && [ -x "$dest/containerd-shim-runsc-v1" ]; then
	archive
	echo "gvisor: cached $dest ($(cat "$dest/VERSION"))"
	exit 0
fi

t0=$(date +%s)
tmp=$(mktemp -d "$cache/.gvisor-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Outside any module: go install pkg@version builds with the module's own go.mod.
(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$tmp" "$GO" install -trimpath -ldflags="$LDFLAGS" \
	"gvisor.dev/gvisor/runsc@$GVISOR_MODULE_VERSION" "gvisor.dev/gvisor/shim@$GVISOR_MODULE_VERSION")
mv "$tmp/shim" "$tmp/containerd-shim-runsc-v1"
for b in runsc containerd-shim-runsc-v1; do
	# A dynamically linked binary has a program interpreter (the loader) in its ELF header.
	if LC_ALL=C readelf -l "$tmp/$b" | grep -q 'INTERP'; then
		echo "gvisor: $b is dynamically linked: runsc cannot re-execute it inside the sandbox's empty root" >&2
		exit 1
	fi
done
echo "$GVISOR_MODULE_VERSION" >"$tmp/VERSION"
chmod 0755 "$tmp"
rm -rf "$dest" "$dest.tar.bz2"
mv "$tmp" "$dest"
trap - EXIT
archive
echo "gvisor: built $dest in $(($(date +%s) - t0))s ($("$dest/runsc" --version 2>/dev/null | head -n 1))"
