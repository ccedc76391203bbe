#!/bin/sh
# shellcheck disable=SC2046 # blob prints "digest size", split on purpose
# ci/node/e2e/mkimg.sh OUT.tar REF [CMD_JSON]: a minimal OCI image archive holding busybox-static, made by hand.
set -eu
out=$1
ref=$2
cmd=${3:-'["/bin/sh"]'}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/rootfs/bin" "$w/rootfs/proc" "$w/rootfs/dev" "$w/rootfs/sys" "$w/rootfs/tmp" "$w/rootfs/etc" "$w/blobs/sha256"
cp /bin/busybox "$w/rootfs/bin/busybox"
for a in sh dmesg cat uname ls echo true sleep; do ln -s busybox "$w/rootfs/bin/$a"; done
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/rootfs" -cf "$w/layer.tar" .
blob() { d=$(sha256sum "$1" | cut -d' ' -f1); s=$(stat -c %s "$1"); mv "$1" "$w/blobs/sha256/$d"; echo "$d $s"; }
set -- $(blob "$w/layer.tar"); ld=$1 ls=$2
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cmd" "$ld" >"$w/config.json"
set -- $(blob "$w/config.json"); cd_=$1 cs=$2
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd_" "$cs" "$ld" "$ls" >"$w/manifest.json"
set -- $(blob "$w/manifest.json"); md=$1 ms=$2
printf '{"imageLayoutVersion":"1.0.0"}' >"$w/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s","io.containerd.image.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}]}' "$md" "$ms" "$ref" "$ref" >"$w/index.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w" -cf "$out" oci-layout index.json blobs
