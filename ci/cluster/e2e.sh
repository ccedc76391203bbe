#!/bin/bash
# ci/cluster/e2e.sh: the product end to end on a real single-node Kubernetes cluster (run ci/cluster/setup.sh first).
#
# For containerd 1.6 (Debian, its default config: version 2) and 2.4.2 (its default config: version 4), each on a fresh
# cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet v1.37.2 and containerd, started by
# ci/cluster/node.sh as PID 1 of user+mount+pid+net+uts+ipc namespaces, with scratch folders bound over the host paths
# the installer writes (/etc/containerd, /usr/local/bin, /usr/local/sbin; /run, /var/log, /var/lib and /opt are
# private tmpfs), a fake systemctl whose "restart containerd" the node's PID 1 performs (and logs: that is how
# restarts are counted), and a gVisor mirror served over HTTPS on the node's IP (ci/cluster/tlsmirror, a certificate
# for the node IP from a test CA made here with openssl).
#
# The product is driven only through its own values: a temp copy of cue/ plus targets/e2e.yaml (profile kind, the
# mirror's https baseURL, the imported installer image by its digest with pullPolicy Never, the smoke image, runsc
# network=none for Debian's 2022 runsc); `gvisorgen pin --ca-file <test CA>` (run in the node's network namespace,
# where the mirror is) writes the release's sha512 pins into <tmp>/cue/pins.cue, `gvisorgen generate --root <tmp>`
# renders, then <tmp>/generated/e2e/*.yaml is applied server side. pin runs again at every version change, as the
# documented flow does (bump, pin, generate).
# Scenarios, in order, on each cluster:
#   0 pin: without --ca-file it exits 2 naming the certificate (the test CA is really needed), pins.cue unchanged;
#     with it, every artifact of 20240212 (x86_64 and aarch64) is pinned to the digest the mirror publishes, the
#     image is not asked (the target sets its digest), and the rendered DaemonSet carries the pins;
#   1 negative control: a runtimeClassName: gvisor pod fails with 'no runtime for "runsc" is configured';
#   2 install: rollout status, the smoke pod of <tmp>/smoke/e2e logs "Starting gVisor" (its PVC bound to a static PV
#     standing in for the local-path provisioner), a runc pod kept running through the restart, a new runc pod runs;
#   3 rollout restart: every init container runs again, containerd is restarted zero times;
#   4 upgrade: gvisor.version 20240212 (binaries layout) -> 20260801 (archive layout, same binaries), the stamp
#     names the new tag, the smoke pod runs again;
#   5 uninstall mode: gVisor pods deleted first; block, runsc.toml, binaries and stamp gone, config byte-identical
#     to the original, containerd restarted once, last; runc pods run; a gvisor pod fails like the negative control;
#   6 broken artifact: reinstall 20240212, start a gVisor pod, then 20240213, which publishes the genuine .sha512
#     beside a tampered runsc: pin pins the published (genuine) digest, the installer pod never becomes Ready,
#     containerd is never restarted, the running pods are untouched, and `kubectl logs -c install-runsc` names the
#     sha512 mismatch against the pinned digest.
# Afterwards: no file of the machine outside the scratch folders changed (a manifest of the bound paths and of
# the paths that must not appear, taken before and after). Every phase is timed. Exit 0 only if everything passed.
#
# Environment: GVZ_CLUSTER_VERSIONS ("16 24"), KEEP=1 (keep the scratch folder even on success).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
K8S=$(sh ci/k8s/build.sh --dir)
C24=$cache/containerd-v2.4.2/containerd
SHIM24=$cache/containerd-shim-runc-v2-v2.4.2
USERNSRUN=$cache/e2e/usernsrun-$(sha256sum ci/node/e2e/usernsrun/main.go | cut -c1-12)/usernsrun
RUNSC_SHIM=$cache/e2e/shim-20221203/shim
NODE_IP=10.99.0.1
MIRROR_PORT=18443
MIRROR=https://$NODE_IP:$MIRROR_PORT/release
IMG=docker.io/gvz-e2e/busybox:e2e
V_GOOD=20240212 V_UP=20260801 V_BAD=20240213
T_ALL=$(date +%s%N)

ind() { sed "s/^/${V:+[c$V] }    /"; }  # indented output of a run, prefixed with its containerd version
ind2() { sed "s/^/${V:+[c$V] }      /"; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
secs() { printf '%d.%ds' $(($1 / 1000)) $((($1 % 1000) / 100)); }
log() { echo "[cluster-e2e] $*"; }

# --- preconditions ------------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || { log "FAIL: run as root"; exit 2; }
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
	log "FAIL: this host uses cgroup v2 only; the cluster suite is proven on cgroup v1/hybrid hosts (kubelet's cgroupRoot is created in every v1 hierarchy)"
	exit 2
fi
for f in "$K8S"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kubectl,etcd} /usr/bin/containerd /usr/bin/ctr \
	"$C24" "$SHIM24/containerd-shim-runc-v2" /usr/bin/runsc "$RUNSC_SHIM" "$USERNSRUN" /bin/busybox /usr/lib/cni/bridge; do
	[ -x "$f" ] || { log "FAIL: missing $f (run ci/cluster/setup.sh)"; exit 2; }
done
command -v openssl >/dev/null || { log "FAIL: openssl missing (run ci/cluster/setup.sh)"; exit 2; }

W=$(mktemp -d /tmp/gvz-cluster.XXXXXX)
chmod 755 "$W"
VERSIONS=${GVZ_CLUSTER_VERSIONS:-16 24}
RUN_PIDS="" # one background run per containerd version, for cleanup
SC_PID=""   # the running scenario (inside a version's run)
OK=0

# --- the machine's own files: manifest before and after -------------------------------------------------------------
# Bound (must stay as they are) and must-not-appear paths. sha256 of every regular file, plus type, mode, size,
# mtime and symlink target of every entry.
HOST_PATHS=(/etc/containerd /usr/local/bin /usr/local/sbin /usr/bin/systemctl /usr/bin/runsc /usr/bin/containerd
	/etc/cni /var/lib/cni /opt/containerd /var/lib/containerd /var/lib/kubelet /etc/kubernetes /home/kubernetes
	/run/gvisorgen /run/containerd /usr/libexec/kubernetes /var/log/pods /var/log/containers)
host_manifest() {
	local p
	for p in "${HOST_PATHS[@]}"; do
		if [ ! -e "$p" ] && [ ! -L "$p" ]; then
			echo "absent $p"
			continue
		fi
		find "$p" -xdev -printf '%p %y %m %s %T@ %l\n' 2>&1 | LC_ALL=C sort
		find "$p" -xdev -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0r sha256sum
	done
}

# --- cleanup: stop the cluster, remove its cgroups; keep logs of a failure ---------------------------------------
stop_cluster() { # V
	local v=$1 cw=$W/c$1 p d
	if [ -f "$cw/run/usernsrun.pid" ]; then
		p=$(cat "$cw/run/usernsrun.pid")
		# killing the namespace's PID 1 takes every process in it down
		[ ! -f "$cw/run/ns.pid" ] || kill -9 "$(cat "$cw/run/ns.pid")" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null || true
		rm -f "$cw/run/usernsrun.pid"
	fi
	for _ in $(seq 50); do
		for d in /sys/fs/cgroup/*/gvisorgen-e2e-"$v"; do
			[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
		done
		compgen -G "/sys/fs/cgroup/*/gvisorgen-e2e-$v" >/dev/null || return 0
		sleep 0.2
	done
	log "WARN: cgroups left: $(echo /sys/fs/cgroup/*/gvisorgen-e2e-"$v")"
	return 1
}
kill_tree() { # PID: the process and its descendants, by pid
	local c
	for c in $(pgrep -P "$1"); do kill_tree "$c"; done
	kill -TERM "$1" 2>/dev/null || true
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local v p
	# the clusters first (killing a namespace's PID 1 takes everything in it down), then the runs that drove them
	for v in $VERSIONS; do [ ! -d "$W/c$v" ] || stop_cluster "$v" || true; done
	for p in $RUN_PIDS; do kill_tree "$p"; done
	if [ "$OK" = 1 ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$W"
	else
		log "scratch folder and logs kept in $W"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

t=$(date +%s%N)
host_manifest >"$W/host.before"
log "phase host manifest (before): $(secs "$(ms "$t")") ($(wc -l <"$W/host.before") entries)"

# --- prepare: gvisorgen, images, mirror, PKI, test target --------------------------------------------------------------
t=$(date +%s%N)
GO=${GO:-go}
GOFLAGS=-buildvcs=false "$GO" build -o "$W/gvisorgen" ./cmd/gvisorgen
GOFLAGS=-buildvcs=false "$GO" build -o "$W/tlsmirror" ./ci/cluster/tlsmirror

# one OCI archive, three references: the installer/smoke/test image (busybox-static with every applet) and the
# sandbox (pause) images of containerd 1.6 and 2.4.2's default configs (busybox sleeping). Each is named by its tag
# and, as a pull from a registry would name it too, by its manifest digest (repository@sha256:...): the installer is
# referenced as repository:tag@digest, which the CRI looks up as repository@digest. "REF DIGEST" lines go to
# $W/images/digests.
mkimage() { # OUT REF=CMDJSON...
	local out=$1 w=$W/img.tmp a d s ldig lsz cdig csz mdig msz entries="" ref cmd n
	shift
	rm -rf "$w"
	mkdir -p "$w/rootfs/bin" "$w/rootfs/proc" "$w/rootfs/dev" "$w/rootfs/sys" "$w/rootfs/tmp" "$w/rootfs/etc" "$w/blobs/sha256"
	chmod 1777 "$w/rootfs/tmp"
	cp /bin/busybox "$w/rootfs/bin/busybox"
	for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$w/rootfs/bin/$a"; done
	echo 'root:x:0:0:root:/:/bin/sh' >"$w/rootfs/etc/passwd"
	echo 'root:x:0:' >"$w/rootfs/etc/group"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/rootfs" -cf "$w/layer.tar" .
	blob() {
		d=$(sha256sum "$1" | cut -d' ' -f1)
		s=$(stat -c %s "$1")
		mv "$1" "$w/blobs/sha256/$d"
	}
	blob "$w/layer.tar"
	ldig=$d lsz=$s
	for a in "$@"; do
		ref=${a%%=*} cmd=${a#*=}
		printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cmd" "$ldig" >"$w/config.json"
		blob "$w/config.json"
		cdig=$d csz=$s
		printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cdig" "$csz" "$ldig" "$lsz" >"$w/manifest.json"
		blob "$w/manifest.json"
		mdig=$d msz=$s
		for n in "$ref" "${ref%:*}@sha256:$mdig"; do
			entries="$entries${entries:+,}$(printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s","io.containerd.image.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}' "$mdig" "$msz" "$n" "$n")"
		done
		echo "$ref sha256:$mdig" >>"$W/images/digests"
	done
	printf '{"imageLayoutVersion":"1.0.0"}' >"$w/oci-layout"
	printf '{"schemaVersion":2,"manifests":[%s]}' "$entries" >"$w/index.json"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w" -cf "$out" oci-layout index.json blobs
	rm -rf "$w"
}
mkdir -p "$W/images"
mkimage "$W/images/all.tar" "$IMG=[\"/bin/sh\"]" \
	'registry.k8s.io/pause:3.6=["/bin/sleep","2147483647"]' 'registry.k8s.io/pause:3.10.2=["/bin/sleep","2147483647"]'
# the installer image's digest, set in the target: no registry has this image, so `gvisorgen pin` must not ask one
IMG_DIGEST=$(awk -v r="$IMG" '$1 == r { print $2 }' "$W/images/digests")

# the mirror: <tag>/x86_64/ as the bucket lays it out, real sha512 files
S=$W/serve/release
mkdir -p "$S/$V_GOOD/x86_64" "$S/$V_UP/x86_64" "$S/$V_BAD/x86_64"
cp /usr/bin/runsc "$S/$V_GOOD/x86_64/runsc"
cp "$RUNSC_SHIM" "$S/$V_GOOD/x86_64/containerd-shim-runsc-v1"
(cd "$S/$V_GOOD/x86_64" && for a in runsc containerd-shim-runsc-v1; do sha512sum "$a" >"$a.sha512"; done)
# archive layout (from 2026-07): gvisor.tar.bz2 = runsc, the shim and gvisor-bin/ in one folder; cached (bzip2 is slow)
akey=$(cat "$S/$V_GOOD/x86_64/runsc.sha512" "$S/$V_GOOD/x86_64/containerd-shim-runsc-v1.sha512" | sha256sum | cut -c1-16)
arch=$cache/cluster-e2e/gvisor-$akey.tar.bz2
if [ ! -f "$arch" ]; then
	mkdir -p "$cache/cluster-e2e" "$W/arch/gvisor/gvisor-bin"
	cp "$S/$V_GOOD/x86_64/runsc" "$S/$V_GOOD/x86_64/containerd-shim-runsc-v1" "$W/arch/gvisor/"
	printf '#!/bin/sh\necho gvisor-bin helper of the e2e mirror\n' >"$W/arch/gvisor/gvisor-bin/e2e-helper"
	chmod 755 "$W/arch/gvisor/"* "$W/arch/gvisor/gvisor-bin/e2e-helper"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$W/arch" -cjf "$arch.tmp" gvisor
	mv "$arch.tmp" "$arch"
	rm -rf "$W/arch"
fi
cp "$arch" "$S/$V_UP/x86_64/gvisor.tar.bz2"
(cd "$S/$V_UP/x86_64" && sha512sum gvisor.tar.bz2 >gvisor.tar.bz2.sha512)
# broken: the published .sha512 is the real one, the runsc beside it is one byte longer
cp "$S/$V_GOOD/x86_64/"* "$S/$V_BAD/x86_64/"
printf 'X' >>"$S/$V_BAD/x86_64/runsc"
# aarch64, as the bucket publishes it: `gvisorgen pin` resolves every architecture the product supports. No node here
# is aarch64, so its files are hard links to the x86_64 ones (same digests; only the .sha512 files are ever read).
for v in "$V_GOOD" "$V_UP" "$V_BAD"; do cp -al "$S/$v/x86_64" "$S/$v/aarch64"; done

# the mirror's TLS: a test CA (known only to `gvisorgen pin --ca-file`, not to the system roots) and a server
# certificate for the node IP (SAN IP). RSA, as in the node tests (busybox wget's TLS client, the installer's for
# pinned artifacts, also took ECDSA P-256); see ci/cluster/tlsmirror for the tlssha1 setting it needs.
TLS=$W/tls
mkdir -p "$TLS"
openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$TLS/ca.key" -out "$TLS/ca.pem" -days 2 \
	-subj "/CN=gvisorgen cluster-e2e mirror CA" -addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -new -nodes -newkey rsa:2048 -keyout "$TLS/mirror.key" -out "$TLS/mirror.csr" \
	-subj "/CN=gvisorgen cluster-e2e mirror" 2>/dev/null
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:%s\n' \
	"$NODE_IP" >"$TLS/mirror.ext"
openssl x509 -req -in "$TLS/mirror.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
	-days 2 -extfile "$TLS/mirror.ext" -out "$TLS/mirror.pem" 2>/dev/null
openssl verify -CAfile "$TLS/ca.pem" "$TLS/mirror.pem" >/dev/null || {
	log "FAIL: the mirror's test certificate does not verify"
	exit 1
}

# PKI: service-account keys, tokens (admin: system:masters; kubelet: the node identity, Node authorizer)
P=$W/pki
mkdir -p "$P"
openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
ADMIN_TOKEN=$(openssl rand -hex 16) NODE_TOKEN=$(openssl rand -hex 16)
echo "$ADMIN_TOKEN" >"$P/admin.token"
printf '%s,admin,admin,system:masters\n%s,system:node:gvz-node,node,system:nodes\n' "$ADMIN_TOKEN" "$NODE_TOKEN" >"$P/tokens.csv"
kubeconfig() { # TOKEN
	printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: "%s"}\ncontexts:\n- name: e2e\n  context: {cluster: e2e, user: u}\ncurrent-context: e2e\n' "$1"
}
kubeconfig "$ADMIN_TOKEN" >"$P/admin.kubeconfig"
kubeconfig "$NODE_TOKEN" >"$P/node.kubeconfig"

# the test target, in a temp copy of the repository's CUE: nothing but the product's own values. No sha512 here: the
# pins come from cue/pins.cue, written by `gvisorgen pin`. The image is set by its digest (see IMG_DIGEST).
target_yaml() { # VERSION MODE
	cat >"$T/targets/e2e.yaml" <<EOF
profile: kind
gvisor:
  version: "$1"
  release: {baseURL: $MIRROR}
  installer:
    mode: $2
    image: {repository: gvz-e2e/busybox, tag: e2e, digest: "$IMG_DIGEST", pullPolicy: Never}
  runsc:
    config: {network: "none"}
smoke:
  image: $IMG
EOF
}
# gvisorgen in the node's network namespace: the mirror listens on the node IP, which exists only there (the files
# are the host's: the mount namespace stays)
gvz_netns() { nsenter -t "$NSPID" -n -- "$W/gvisorgen" "$@"; }
# target VERSION MODE: the documented flow: set the values, pin (trusting the test CA), generate
target() {
	target_yaml "$1" "$2"
	gvz_netns pin --root "$T" --target e2e --ca-file "$TLS/ca.pem" >"$CW/pin.log" 2>&1 || {
		say "FAIL: gvisorgen pin:"
		ind <"$CW/pin.log"
		return 1
	}
	say "  .. gvisorgen pin: $(tail -1 "$CW/pin.log")"
	"$W/gvisorgen" generate --root "$T" --target e2e >"$CW/generate.log" 2>&1 || {
		cat "$CW/generate.log"
		return 1
	}
}
# pinned_in_ds ARTIFACT SHA512: the rendered DaemonSet pins x86_64/ARTIFACT (GVISOR_SHA512_PINS) to SHA512
pinned_in_ds() { grep -qE "^ +x86_64/$1 $2\$" "$T/generated/e2e/daemonset-runsc-installer.yaml"; }
published() { cut -d' ' -f1 "$S/$1/x86_64/$2.sha512"; } # VERSION ARTIFACT: the digest the mirror publishes

# the harness's own workloads (not the product's): gVisor and runc pods
mkdir -p "$W/pods"
pod() { # NAME RUNTIMECLASS|- RESTARTPOLICY CMD
	{
		printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default}\nspec:\n' "$1"
		[ "$2" = - ] || printf '  runtimeClassName: %s\n' "$2"
		printf '  restartPolicy: %s\n  automountServiceAccountToken: false\n  terminationGracePeriodSeconds: 0\n' "$3"
		printf '  containers:\n  - name: c\n    image: %s\n    imagePullPolicy: Never\n    command: ["/bin/sh", "-c", "%s"]\n' "$IMG" "$4"
	} >"$W/pods/$1.yaml"
}
pod gvisor-probe gvisor Never 'dmesg'
pod gvisor-sleeper gvisor Always 'dmesg; exec sleep 2147483647'
pod runc-sleeper - Always 'echo runc up; exec sleep 2147483647'
pod runc-check - Never 'echo runc-ok; uname -r'
log "phase prepare (gvisorgen, tlsmirror, images, mirror, test CA): $(secs "$(ms "$t")")"

# --- one cluster -------------------------------------------------------------------------------------------------------
start_cluster() { # V
	local v=$1 cw=$W/c$1 H d p own
	H=$cw/host
	mkdir -p "$cw/run/logs" "$cw/conf" "$H/etc-containerd" "$H/usr-local-bin" "$H/usr-local-sbin" "$cw/cni" "$cw/pv/smoke" "$cw/plugins"
	cp "$P"/* "$cw/conf/"
	printf '/etc/containerd etc-containerd\n/usr/local/bin usr-local-bin\n/usr/local/sbin usr-local-sbin\n' >"$cw/binds"
	local ctrd=/usr/bin/containerd ctrd_path=""
	if [ "$v" = 24 ]; then
		ctrd=$C24 ctrd_path=$SHIM24
		# the host's `containerd` (found by the installer's host commands) is the one that runs
		printf '#!/bin/sh\nexec %s "$@"\n' "$C24" >"$H/usr-local-sbin/containerd"
		chmod 755 "$H/usr-local-sbin/containerd"
	fi
	# containerd's own default config (1.6: version 2; 2.4.2: version 4) plus the test-only keys: CNI plugins of
	# Debian's package, CNI config in scratch, restrict_oom_score_adj (the user namespace cannot lower oom_score_adj)
	"$ctrd" config default | sed -E \
		-e "s#^( *)restrict_oom_score_adj = false#\1restrict_oom_score_adj = true#" \
		-e "s#^( *)bin_dir = \"/opt/cni/bin\"#\1bin_dir = \"/usr/lib/cni\"#" \
		-e "s#^( *)bin_dirs = \['/opt/cni/bin'\]#\1bin_dirs = ['/usr/lib/cni']#" \
		-e "s#^( *)conf_dir = (['\"])/etc/cni/net.d(['\"])#\1conf_dir = \2$cw/cni\3#" >"$H/etc-containerd/config.toml"
	if ! grep -q "$cw/cni" "$H/etc-containerd/config.toml" || ! grep -q 'restrict_oom_score_adj = true' "$H/etc-containerd/config.toml"; then
		log "FAIL: could not set the test-only keys in containerd $v's default config"
		return 1
	fi
	cp "$H/etc-containerd/config.toml" "$cw/config.orig"
	cat >"$cw/cni/10-e2e.conflist" <<EOF
{"cniVersion":"1.0.0","name":"e2e","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":"$cw/cni-ipam"}},{"type":"loopback"}]}
EOF
	cat >"$H/usr-local-sbin/systemctl" <<EOF
#!/bin/sh
# fake systemctl of the simulated node: the node's PID 1 (ci/cluster/node.sh) restarts containerd, like systemd would
R=$cw/run
echo "\$(date +%s.%N) systemctl \$*" >>\$R/logs/systemctl.log
case "\$1 \${2:-}" in
"restart containerd")
	id=\$\$.\$(date +%s%N)
	echo restart >\$R/systemd/req.\$id.tmp && mv \$R/systemd/req.\$id.tmp \$R/systemd/req.\$id
	i=0
	while [ ! -e \$R/systemd/ack.\$id ]; do i=\$((i+1)); [ \$i -le 600 ] || { echo "systemctl: no answer from the node's init" >&2; exit 1; }; sleep 0.1; done
	rc=\$(cat \$R/systemd/ack.\$id); rm -f \$R/systemd/ack.\$id; exit "\$rc" ;;
"is-active containerd") kill -0 "\$(cat \$R/containerd.pid)" 2>/dev/null && echo active || { echo inactive; exit 3; } ;;
*) echo "fake systemctl: unsupported: \$*" >&2; exit 1 ;;
esac
EOF
	chmod 755 "$H/usr-local-sbin/systemctl"
	cat >"$cw/conf/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /gvisorgen-e2e-$v
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
imageServiceEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%"}
featureGates:
  KubeletInUserNamespace: true
readOnlyPort: 0
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
oomScoreAdj: 0
volumePluginDir: $cw/plugins
EOF
	# kubelet's cgroupRoot in every v1 hierarchy
	for d in /sys/fs/cgroup/*/; do
		[ "$d" = /sys/fs/cgroup/unified/ ] || mkdir -p "${d}gvisorgen-e2e-$v"
	done
	cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/gvisorgen-e2e-$v/cpuset.cpus"
	cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/gvisorgen-e2e-$v/cpuset.mems"
	GVZ_W=$cw GVZ_K8S=$K8S GVZ_CTRD=$ctrd GVZ_CTRD_PATH=$ctrd_path GVZ_SERVE=$W/serve GVZ_NODE_IP=$NODE_IP \
		GVZ_MIRROR=$W/tlsmirror GVZ_MIRROR_PORT=$MIRROR_PORT GVZ_MIRROR_TLS=$TLS \
		setsid "$USERNSRUN" bash "$REPO/ci/cluster/node.sh" >"$cw/run/logs/node.log" 2>&1 </dev/null &
	echo $! >"$cw/run/usernsrun.pid"
	# the namespace's PID 1: the child of usernsrun in a pid namespace other than ours. Not just any child: Go's
	# os/exec first vforks a child that exits at once (syscall.doCheckClonePidfd, its CLONE_PIDFD probe), and taking
	# that pid made every nsenter fail ("cannot open /proc/<pid>/ns/net") and cleanup miss the node, which then ran on
	# after the run (seen once here, with both clusters starting side by side)
	NSPID="" own=$(readlink /proc/self/ns/pid)
	for _ in $(seq 50); do
		for p in $(pgrep -P "$(cat "$cw/run/usernsrun.pid")"); do
			d=$(readlink "/proc/$p/ns/pid" 2>/dev/null) || continue
			[ -z "$d" ] || [ "$d" = "$own" ] || NSPID=$p
		done
		[ -z "$NSPID" ] || break
		sleep 0.1
	done
	echo "$NSPID" >"$cw/run/ns.pid"
	[ -n "$NSPID" ] || { log "FAIL: containerd $v: no node PID 1 found"; return 1; }
	# bounded wait for the node to be Ready (node.sh bounds each step too)
	for _ in $(seq 1200); do
		[ -e "$cw/run/READY" ] && return 0
		[ -e "$cw/run/FAILED" ] && break
		kill -0 "$(cat "$cw/run/usernsrun.pid")" 2>/dev/null || break
		sleep 0.2
	done
	log "FAIL: containerd $v: the cluster did not come up:"
	ind <"$cw/run/logs/node.log"
	return 1
}

# --- helpers for the scenarios (run in a subshell: fail exits it) -------------------------------------------------------
kc() { nsenter -t "$NSPID" -n -- "$K8S/kubectl" --kubeconfig "$CW/conf/admin.kubeconfig" "$@"; }
nsx() { nsenter -t "$NSPID" -m -n -- "$@"; }
say() { echo "[c$V] $*"; }
lap() { say "  .. $* (+$(secs "$(ms "$SC_T0")"))"; } # a step inside a scenario, with the time since it began
fail() {
	say "FAIL: $*"
	dump
	exit 1
}
dump() {
	say "---- diagnostics"
	kc get nodes,pods,ds,pvc,pv -A -o wide 2>&1 | ind || true
	kc get events -A --sort-by=.lastTimestamp 2>&1 | tail -25 | cut -c1-300 | ind || true
	local p c
	for p in $(kc -n gvisor-system get pods -o name 2>/dev/null); do
		for c in install-runsc configure-containerd uninstall-runsc runsc-ready; do
			kc -n gvisor-system logs "$p" -c "$c" --tail=30 2>/dev/null | sed "s|^|[c$V]     [$p $c] |" || true
		done
	done
	echo "    systemd.log:"
	ind2 2>/dev/null <"$CW/run/logs/systemd.log" || true
	for f in node kubelet containerd; do
		echo "    $f.log (tail):"
		tail -15 "$CW/run/logs/$f.log" 2>/dev/null | cut -c1-300 | ind2 || true
	done
	echo "    /etc/containerd: $(lsdir "$CW/host/etc-containerd")"
	echo "    /usr/local/bin: $(lsdir "$CW/host/usr-local-bin")"
}
restarts() { grep -c 'restart containerd' "$CW/run/logs/systemd.log" 2>/dev/null || true; }
lsdir() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | xargs; }
apply_dir() { # DIR: Namespaces first (as Argo CD's sync waves do), then everything, server side
	local d=$1 ns n
	ns=$(find "$d" -maxdepth 1 -name 'namespace-*.yaml' | sort)
	if [ -n "$ns" ]; then
		# shellcheck disable=SC2046,SC2086 # file list
		kc apply --server-side --field-manager=gvisorgen-e2e $(printf -- '-f %s ' $ns) >/dev/null || return 1
		# pods need the namespace's default ServiceAccount (the controller-manager creates it)
		# shellcheck disable=SC2086 # file list
		awk '$1 == "name:" { print $2 }' $ns | while read -r n; do
			for _ in $(seq 100); do
				kc -n "$n" get serviceaccount default >/dev/null 2>&1 && break
				sleep 0.2
			done
		done
	fi
	kc apply --server-side --field-manager=gvisorgen-e2e -f "$d" >"$CW/apply.log" 2>&1 || { cat "$CW/apply.log"; return 1; }
}
installer_pod() { # newest installer pod
	kc -n gvisor-system get pods -l app.kubernetes.io/name=runsc-installer --sort-by=.metadata.creationTimestamp \
		-o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | tail -1
}
show_logs() { # POD CONTAINER...
	local p=$1 c
	shift
	for c in "$@"; do kc -n gvisor-system logs "$p" -c "$c" 2>&1 | ind; done
}
errline() { # POD CONTAINER [--previous]: the container's ERROR line, or why there is none
	local out
	out=$(kc -n gvisor-system logs "$@" 2>&1 | tail -20)
	printf '%s\n' "$out" | grep -E 'ERROR' | tail -1 | grep . || echo "(no ERROR line; log: $(printf '%s\n' "$out" | tail -1))"
}
runsc_ctrs() { # "<runsc containers in containerd> <of them with a running task>"
	local all run
	all=$(nsx ctr --address /run/containerd/containerd.sock -n k8s.io containers ls 2>/dev/null | awk '$3 ~ /runsc/ { print $1 }')
	run=$(nsx ctr --address /run/containerd/containerd.sock -n k8s.io tasks ls 2>/dev/null | awk '$3 == "RUNNING" { print $1 }')
	echo "$(printf '%s\n' "$all" | grep -c .) $(printf '%s\n' "$all" | grep -cxF -f <(printf '%s\n' "$run" | grep . || echo none))"
}
rollout() { # wait (bounded) for the installer to roll out; log every init container failure seen meanwhile
	local end=$((SECONDS + 150)) p name ex id lex lid seen=" " n=0
	: >"$CW/initfail.log"
	until kc -n gvisor-system rollout status ds/runsc-installer --timeout=2s >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || fail "the installer DaemonSet did not roll out in 150s"
		p=$(installer_pod)
		[ -n "$p" ] || continue
		while read -r name ex id lex lid; do
			ex=${ex#x} id=${id#x} lex=${lex#x} lid=${lid#x}
			# state.terminated (logs) or lastState.terminated (logs --previous), non-zero, not seen yet
			if [ -n "$id" ] && [ "$ex" != 0 ] && [ "${seen#* "$id" }" = "$seen" ]; then
				seen="$seen$id "
				echo "+$(secs "$(ms "$SC_T0")") $name exit $ex: $(errline "$p" "$name")" >>"$CW/initfail.log"
			fi
			if [ -n "$lid" ] && [ "$lex" != 0 ] && [ "${seen#* "$lid" }" = "$seen" ]; then
				seen="$seen$lid "
				echo "+$(secs "$(ms "$SC_T0")") $name exit $lex: $(errline "$p" "$name" --previous)" >>"$CW/initfail.log"
			fi
		done < <(kc -n gvisor-system get pod "$p" -o jsonpath='{range .status.initContainerStatuses[*]}{.name} x{.state.terminated.exitCode} x{.state.terminated.containerID} x{.lastState.terminated.exitCode} x{.lastState.terminated.containerID}{"\n"}{end}' 2>/dev/null)
	done
	n=$(wc -l <"$CW/initfail.log")
	if [ "$n" -gt 0 ]; then
		say "  .. $n init container failure(s) before the rollout completed (the kubelet retried them):"
		ind2 <"$CW/initfail.log"
	fi
}
wait_phase() { # POD PHASE SECONDS [NS]
	kc -n "${4:-default}" wait --for=jsonpath='{.status.phase}'="$2" "pod/$1" --timeout="${3}s" >/dev/null 2>&1
}
wait_no_runtime() { # POD: the sandbox fails with containerd's "no runtime" error
	for _ in $(seq 120); do
		if kc get events --field-selector "involvedObject.name=$1,reason=FailedCreatePodSandBox" \
			-o jsonpath='{.items[*].message}' 2>/dev/null | grep -q 'no runtime for "runsc" is configured'; then
			kc get events --field-selector "involvedObject.name=$1,reason=FailedCreatePodSandBox" \
				-o jsonpath='{.items[0].message}' | grep -o 'no runtime for "runsc" is configured' | head -1 | sed "s/^/[c$V]     event: /"
			return 0
		fi
		sleep 0.5
	done
	return 1
}
ctr_state() { # POD: containerID restartCount phase
	kc get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount} {.status.phase}'
}
smoke() { # run the generated smoke pod (again), check "Starting gVisor"
	kc -n gvisor-smoke delete pod gvisor-smoke --ignore-not-found --wait=true >/dev/null 2>&1
	apply_dir "$T/smoke/e2e" || fail "apply of smoke/e2e"
	wait_phase gvisor-smoke Succeeded 120 gvisor-smoke || fail "the smoke pod did not succeed: $(kc -n gvisor-smoke get pod gvisor-smoke -o wide 2>&1 | tail -1)"
	kc -n gvisor-smoke logs gvisor-smoke >"$CW/smoke.log" 2>&1
	grep -q 'Starting gVisor' "$CW/smoke.log" || fail "the smoke pod's log has no 'Starting gVisor': $(head -3 "$CW/smoke.log")"
	sed "s/^/[c$V]     [smoke] /" "$CW/smoke.log"
}
binaries_present() { [ -x "$CW/host/usr-local-bin/runsc" ] && [ -x "$CW/host/usr-local-bin/containerd-shim-runsc-v1" ]; }
stamp_version() { awk '$1 == "version" { print $2 }' "$CW/host/usr-local-bin/.gvisorgen-runsc.stamp" 2>/dev/null; }

scenario() { # N TITLE FUNCTION
	local t0 rc
	t0=$(date +%s%N) SC_T0=$t0
	say "== scenario $1: $2"
	# in the background + wait: a Ctrl-C then interrupts `wait` at once and runs the INT trap (a foreground child
	# that catches SIGINT itself, like kubectl, would make bash ignore the SIGINT: "wait and cooperative exit")
	("$3") &
	SC_PID=$!
	if wait "$SC_PID"; then rc=PASS; else rc=FAIL; fi
	SC_PID=""
	say "scenario $1 ($2): $rc in $(secs "$(ms "$t0")")"
	echo "$V $1 $rc $(secs "$(ms "$t0")") $2" >>"$W/results"
	[ $rc = PASS ]
}

s0_pin() {
	local out rc a sum
	target_yaml "$V_GOOD" install
	cp "$T/cue/pins.cue" "$CW/pins.before"
	# the system roots do not hold the test CA: pin cannot ask (exit 2), names the certificate, writes nothing
	if out=$(gvz_netns pin --root "$T" --target e2e 2>&1); then
		fail "gvisorgen pin without --ca-file succeeded: $out"
	else
		rc=$?
	fi
	say "pin without --ca-file: exit $rc: $(printf '%s\n' "$out" | grep -m1 -o 'x509: .*' | cut -c1-160)"
	[ "$rc" = 2 ] || fail "gvisorgen pin without --ca-file: exit $rc, want 2: $out"
	case $out in *certificate*) ;; *) fail "gvisorgen pin without --ca-file does not name the certificate: $out" ;; esac
	cmp -s "$CW/pins.before" "$T/cue/pins.cue" || fail "gvisorgen pin without --ca-file changed pins.cue"
	# with the test CA: every artifact of every architecture, pinned to what the mirror publishes; the image not asked
	target "$V_GOOD" install || fail "pin + generate"
	ind <"$CW/pin.log"
	for a in runsc containerd-shim-runsc-v1; do
		sum=$(published "$V_GOOD" "$a")
		[ "$(grep -c "\"$sum\"" "$T/cue/pins.cue")" = 2 ] || fail "pins.cue does not pin $a of x86_64 and aarch64 to the published $sum"
		pinned_in_ds "$a" "$sum" || fail "the rendered DaemonSet does not pin x86_64/$a to $sum"
	done
	grep -q "^not asked gvz-e2e/busybox:e2e@$IMG_DIGEST " "$CW/pin.log" || fail "pin did not leave the imported image alone"
	grep -q "image: gvz-e2e/busybox:e2e@$IMG_DIGEST\$" "$T/generated/e2e/daemonset-runsc-installer.yaml" ||
		fail "the DaemonSet does not run the installer by its digest"
	say "pins.cue: $V_GOOD x86_64 + aarch64 pinned to the published digests; the DaemonSet carries them and runs gvz-e2e/busybox:e2e@$(echo "$IMG_DIGEST" | cut -c1-19)..."
}

s1_negative() {
	kc apply --server-side --field-manager=gvisorgen-e2e -f "$T/generated/e2e/runtimeclass-gvisor.yaml" >/dev/null || fail "apply RuntimeClass"
	kc apply -f "$W/pods/runc-sleeper.yaml" -f "$W/pods/gvisor-probe.yaml" >/dev/null || fail "apply test pods"
	wait_no_runtime gvisor-probe || fail "negative control: no 'no runtime for \"runsc\" is configured' event"
	kc delete pod gvisor-probe --wait=true >/dev/null
	wait_phase runc-sleeper Running 60 || fail "the runc pod does not run"
	ctr_state runc-sleeper >"$CW/runc-sleeper.state"
	say "runc-sleeper: $(cat "$CW/runc-sleeper.state")"
}

s2_install() {
	local r0
	r0=$(restarts)
	apply_dir "$T/generated/e2e" || fail "apply of generated/e2e"
	lap applied
	rollout
	lap "rolled out"
	show_logs "$(installer_pod)" install-runsc configure-containerd
	say "containerd restarts by the install: $(($(restarts) - r0))"
	[ "$(($(restarts) - r0))" = 1 ] || fail "expected exactly one containerd restart for the install"
	grep -q '^# >>> gvisorgen: runsc runtime' "$CW/host/etc-containerd/config.toml" || fail "no gvisorgen block in config.toml"
	grep -q 'network = "none"' "$CW/host/etc-containerd/runsc.toml" || fail "runsc.toml lacks network = \"none\""
	binaries_present || fail "runsc and the shim are not in /usr/local/bin"
	[ "$(stamp_version)" = "$V_GOOD" ] || fail "stamp says '$(stamp_version)', want $V_GOOD"
	# pinned, so busybox wget fetched them over https from the mirror (TLS not verified by wget: the pin is the check)
	[ "$(grep -c '^source .* pinned$' "$CW/host/usr-local-bin/.gvisorgen-runsc.stamp")" = 2 ] || fail "the stamp does not record both sources as pinned"
	kc -n gvisor-system logs "$(installer_pod)" -c install-runsc >"$CW/install.log" 2>&1
	grep -q "downloading $MIRROR/$V_GOOD/x86_64/runsc (pinned: busybox wget)" "$CW/install.log" ||
		fail "install-runsc did not download runsc pinned from $MIRROR"
	say "install-runsc: both artifacts downloaded by busybox wget over https, verified against their pins; mirror: $(grep -c ' 200 ' "$CW/run/logs/mirror.log") requests served ($(grep -o 'TLS 1.[23] [A-Z0-9_]*' "$CW/run/logs/mirror.log" | sort | uniq -c | xargs))"
	# the smoke PVC: no local-path provisioner here, so a static hostPath PV of the StorageClass stands in for it
	cat <<EOF | kc apply -f - >/dev/null || fail "PV"
apiVersion: v1
kind: PersistentVolume
metadata: {name: gvisor-smoke-e2e}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: gvisor-workspace
  hostPath: {path: $CW/pv/smoke, type: Directory}
EOF
	say "smoke PVC: no local-path provisioner in this cluster; a static hostPath PV (class gvisor-workspace) stands in for it"
	smoke
	lap "smoke pod done"
	[ "$(kc -n gvisor-smoke get pvc gvisor-smoke -o jsonpath='{.status.phase}')" = Bound ] || fail "the smoke PVC is not Bound"
	[ "$(cat "$CW/pv/smoke/smoke" 2>/dev/null)" = gvisor-smoke ] || fail "the smoke pod's file is not on the volume"
	say "smoke PVC Bound, /workspace/smoke written through gVisor onto the volume"
	# the runc pod survived the containerd restart; a new runc pod runs
	[ "$(ctr_state runc-sleeper)" = "$(cat "$CW/runc-sleeper.state")" ] || fail "runc-sleeper changed: $(ctr_state runc-sleeper)"
	kc apply -f "$W/pods/runc-check.yaml" >/dev/null
	wait_phase runc-check Succeeded 60 || fail "a new runc pod did not run"
	say "runc pods: runc-sleeper still running (same container, 0 restarts), new runc pod: $(kc logs runc-check | head -1)"
	kc delete pod runc-check --wait=false >/dev/null
	kc apply -f "$W/pods/gvisor-sleeper.yaml" >/dev/null
	wait_phase gvisor-sleeper Running 60 || fail "the long-running gVisor pod does not run"
	ctr_state gvisor-sleeper >"$CW/gvisor-sleeper.state"
}

s3_restart() {
	local r0 old new c
	r0=$(restarts)
	old=$(installer_pod)
	kc -n gvisor-system rollout restart ds/runsc-installer >/dev/null
	rollout
	new=$(installer_pod)
	[ "$new" != "$old" ] || fail "no new installer pod"
	for c in install-runsc configure-containerd; do
		[ "$(kc -n gvisor-system get pod "$new" -o jsonpath="{.status.initContainerStatuses[?(@.name==\"$c\")].state.terminated.exitCode}")" = 0 ] ||
			fail "init container $c of $new did not run to exit 0"
	done
	show_logs "$new" install-runsc configure-containerd
	echo "$V 3 containerd restarts during the re-run: $(($(restarts) - r0))" >>"$W/results"
	say "containerd restarts by the re-run: $(($(restarts) - r0))"
	[ "$(($(restarts) - r0))" = 0 ] || fail "the idempotent re-run restarted containerd"
	[ "$(ctr_state gvisor-sleeper)" = "$(cat "$CW/gvisor-sleeper.state")" ] || fail "gvisor-sleeper changed"
}

s4_upgrade() {
	local r0
	r0=$(restarts)
	target "$V_UP" install || fail "pin + generate"
	pinned_in_ds gvisor.tar.bz2 "$(published "$V_UP" gvisor.tar.bz2)" || fail "the DaemonSet does not pin gvisor.tar.bz2 of $V_UP"
	apply_dir "$T/generated/e2e" || fail "apply"
	rollout
	show_logs "$(installer_pod)" install-runsc configure-containerd
	[ "$(stamp_version)" = "$V_UP" ] || fail "stamp says '$(stamp_version)', want $V_UP"
	grep -q '^layout archive' "$CW/host/usr-local-bin/.gvisorgen-runsc.stamp" || fail "stamp is not of the archive layout"
	[ -x "$CW/host/usr-local-bin/gvisor-bin/e2e-helper" ] || fail "gvisor-bin/ of the archive not installed"
	say "stamp: version $(stamp_version), $(grep '^layout' "$CW/host/usr-local-bin/.gvisorgen-runsc.stamp"); containerd restarts by the upgrade: $(($(restarts) - r0))"
	[ "$(ctr_state gvisor-sleeper)" = "$(cat "$CW/gvisor-sleeper.state")" ] || fail "gvisor-sleeper changed during the upgrade"
	smoke
}

s5_uninstall() {
	local r0 logf p n m sampler
	kc -n gvisor-smoke delete pod gvisor-smoke --wait=true >/dev/null
	kc delete pod gvisor-sleeper --wait=true >/dev/null
	# what containerd still holds of the deleted pods, sampled during the uninstall (for the log: the installer
	# refuses while it lists runsc containers)
	(while :; do
		read -r n m < <(runsc_ctrs)
		echo "$(ms "$SC_T0") $n $m"
		sleep 0.5
	done) >"$CW/runsc-ctrs.log" 2>/dev/null &
	sampler=$!
	r0=$(restarts)
	target "$V_UP" uninstall || fail "pin + generate"
	apply_dir "$T/generated/e2e" || fail "apply"
	rollout
	kill "$sampler" 2>/dev/null || true
	say "runsc containers in containerd after the gVisor pods were deleted: $(awk '
		NR == 1 { printf "%d (%d running) at +%.1fs", $2, $3, $1 / 1000 }
		$3 == 0 && !r { printf ", none running from +%.1fs", $1 / 1000; r = 1 }
		$2 == 0 && !g { printf ", none left (kubelet container GC) from +%.1fs", $1 / 1000; g = 1 }' "$CW/runsc-ctrs.log")"
	lap "rolled out"
	logf=$CW/uninstall.log
	p=$(installer_pod)
	kc -n gvisor-system logs "$p" -c uninstall-runsc >"$logf" 2>&1 || fail "no uninstall-runsc log: $(cat "$logf")"
	ind <"$logf"
	say "containerd restarts by the uninstall: $(($(restarts) - r0))"
	[ "$(($(restarts) - r0))" = 1 ] || fail "expected exactly one containerd restart for the uninstall"
	# restarted last: the restart comes after the removal of the binaries and nothing but the wait for CRI follows it
	awk '/removed runsc, containerd-shim-runsc-v1/ { rm = NR } /restarting containerd/ { rs = NR } END { exit !(rm && rs > rm) }' "$logf" ||
		fail "containerd was not restarted after the binaries were removed"
	awk '/restarting containerd/ { f = 1; next } f && !/containerd is back|done: gVisor is removed/ { bad = 1 } END { exit bad }' "$logf" ||
		fail "something happened after the containerd restart"
	cmp -s "$CW/config.orig" "$CW/host/etc-containerd/config.toml" || fail "config.toml is not byte-identical to the original: $(diff "$CW/config.orig" "$CW/host/etc-containerd/config.toml" | head -10)"
	[ ! -e "$CW/host/etc-containerd/runsc.toml" ] || fail "runsc.toml left"
	local left
	left=$(cd "$CW/host/usr-local-bin" && find . -mindepth 1 | sort | xargs)
	[ -z "$left" ] || fail "left in /usr/local/bin: $left"
	say "config.toml byte-identical to the original, runsc.toml gone, /usr/local/bin empty again; left in /etc/containerd: $(lsdir "$CW/host/etc-containerd")"
	[ "$(ctr_state runc-sleeper)" = "$(cat "$CW/runc-sleeper.state")" ] || fail "runc-sleeper changed: $(ctr_state runc-sleeper)"
	kc delete pod runc-check --ignore-not-found --wait=true >/dev/null
	kc apply -f "$W/pods/runc-check.yaml" >/dev/null
	wait_phase runc-check Succeeded 60 || fail "a new runc pod did not run after the uninstall"
	kc delete pod runc-check --wait=false >/dev/null
	kc apply -f "$W/pods/gvisor-probe.yaml" >/dev/null
	wait_no_runtime gvisor-probe || fail "after uninstall a gvisor pod did not fail with the negative-control message"
	kc delete pod gvisor-probe --wait=true >/dev/null
	say "runc-sleeper untouched, a new runc pod ran, a gvisor pod fails again with 'no runtime for \"runsc\" is configured'"
}

s6_broken() {
	local r0 cfg p ready code msg
	# back to an installed node (install after uninstall), with a gVisor pod running
	target "$V_GOOD" install || fail "pin + generate"
	apply_dir "$T/generated/e2e" || fail "apply"
	rollout
	[ "$(stamp_version)" = "$V_GOOD" ] || fail "reinstall: stamp says '$(stamp_version)'"
	kc apply -f "$W/pods/gvisor-sleeper.yaml" >/dev/null
	wait_phase gvisor-sleeper Running 60 || fail "the gVisor pod does not run after the reinstall"
	ctr_state gvisor-sleeper >"$CW/gvisor-sleeper.state"
	say "reinstalled $V_GOOD; gvisor-sleeper runs"
	cfg=$(sha256sum <"$CW/host/etc-containerd/config.toml")
	r0=$(restarts)
	# now the broken release: pin takes the digest it publishes, the genuine one, and the tampered runsc beside it
	# does not match it
	target "$V_BAD" install || fail "pin + generate"
	[ "$(published "$V_BAD" runsc)" = "$(published "$V_GOOD" runsc)" ] || fail "$V_BAD does not publish the genuine runsc digest"
	[ "$(sha512sum <"$S/$V_BAD/x86_64/runsc" | cut -d' ' -f1)" != "$(published "$V_BAD" runsc)" ] || fail "$V_BAD's runsc is not tampered"
	pinned_in_ds runsc "$(published "$V_BAD" runsc)" || fail "the DaemonSet does not pin $V_BAD's runsc to its published digest"
	say "pinned $V_BAD x86_64/runsc to its published (genuine) digest $(published "$V_BAD" runsc | cut -c1-16)...; the runsc served beside it is one byte longer"
	apply_dir "$T/generated/e2e" || fail "apply"
	sleep 2
	for _ in $(seq 150); do
		p=$(installer_pod)
		code=$(kc -n gvisor-system get pod "$p" -o jsonpath='{.status.initContainerStatuses[?(@.name=="install-runsc")].lastState.terminated.exitCode}{.status.initContainerStatuses[?(@.name=="install-runsc")].state.terminated.exitCode}' 2>/dev/null || true)
		ready=$(kc -n gvisor-system get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
		[ "$ready" != True ] || fail "the installer pod $p became Ready with a broken artifact"
		# it failed, and was retried at least once (the kubelet's back-off), still failing
		[ -n "$code" ] && [ "$code" != 0 ] && [ "$(kc -n gvisor-system get pod "$p" -o jsonpath='{.status.initContainerStatuses[0].restartCount}')" -ge 1 ] && break
		sleep 0.5
	done
	if [ -z "$code" ] || [ "$code" = 0 ]; then fail "install-runsc did not fail"; fi
	if kc -n gvisor-system rollout status ds/runsc-installer --timeout=10s >/dev/null 2>&1; then fail "rollout status succeeded with a broken artifact"; fi
	ready=$(kc -n gvisor-system get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
	[ "$ready" != True ] || fail "the installer pod became Ready"
	msg=$(kc -n gvisor-system logs "$p" -c install-runsc 2>&1 | grep 'ERROR' | tail -1)
	say "installer pod $p: Ready=$ready, install-runsc exit $code, restarts $(kc -n gvisor-system get pod "$p" -o jsonpath='{.status.initContainerStatuses[0].restartCount}'), rollout status times out"
	kc -n gvisor-system logs "$p" -c install-runsc 2>&1 | ind
	case $msg in *"sha512 mismatch for $MIRROR/$V_BAD/x86_64/runsc against the pinned digest"*) ;; *) fail "install-runsc's log does not name the sha512 mismatch against the pinned digest: $msg" ;; esac
	say "containerd restarts since the broken release was applied: $(($(restarts) - r0))"
	[ "$(($(restarts) - r0))" = 0 ] || fail "containerd was restarted"
	[ "$(sha256sum <"$CW/host/etc-containerd/config.toml")" = "$cfg" ] || fail "config.toml changed"
	[ "$(stamp_version)" = "$V_GOOD" ] || fail "the stamp changed to '$(stamp_version)'"
	[ "$(ctr_state gvisor-sleeper)" = "$(cat "$CW/gvisor-sleeper.state")" ] || fail "gvisor-sleeper changed: $(ctr_state gvisor-sleeper)"
	[ "$(ctr_state runc-sleeper)" = "$(cat "$CW/runc-sleeper.state")" ] || fail "runc-sleeper changed: $(ctr_state runc-sleeper)"
	say "running pods untouched (gvisor-sleeper, runc-sleeper: same containers, 0 restarts); config and stamp ($V_GOOD) unchanged"
}

run_version() { # V
	local t0
	V=$1 CW=$W/c$1
	t0=$(date +%s%N)
	# the test target, in this run's own temp copy of the repository's CUE: nothing but the product's values
	T=$CW/repo
	mkdir -p "$T/targets"
	cp -r cue "$T/cue"
	if ! start_cluster "$V"; then
		echo "$V up FAIL -" >>"$W/results"
		stop_cluster "$V" || true
		return 1
	fi
	say "cluster up in $(secs "$(ms "$t0")"): $(grep -E 'containerd ok|CLUSTER UP' "$CW/run/logs/node.log" | sed 's/^\[node [^ ]* //' | xargs)"
	echo "$V up PASS $(secs "$(ms "$t0")") cluster" >>"$W/results"
	local ok=1
	scenario 0 "pin (https mirror, test CA)" s0_pin &&
		scenario 1 "negative control" s1_negative &&
		scenario 2 "install + smoke" s2_install &&
		scenario 3 "rollout restart" s3_restart &&
		scenario 4 "upgrade $V_GOOD -> $V_UP" s4_upgrade &&
		scenario 5 "uninstall mode" s5_uninstall &&
		scenario 6 "broken artifact" s6_broken || ok=0
	t0=$(date +%s%N)
	stop_cluster "$V" || ok=0
	say "phase stop: $(secs "$(ms "$t0")")"
	[ $ok = 1 ]
}

# the versions run side by side (each cluster has its own namespaces, node IP included, and cgroupRoot);
# GVZ_CLUSTER_SERIAL=1 runs them one after the other
failed=0
t=$(date +%s%N)
for v in $VERSIONS; do
	(
		t0=$(date +%s%N)
		if run_version "$v"; then r=0; else r=1; fi
		log "phase containerd $v: $(secs "$(ms "$t0")")"
		exit $r
	) &
	if [ -n "${GVZ_CLUSTER_SERIAL:-}" ]; then
		wait $! || failed=1
	else
		RUN_PIDS="$RUN_PIDS $!"
	fi
done
for p in $RUN_PIDS; do wait "$p" || failed=1; done
RUN_PIDS=""
log "phase clusters ($VERSIONS${GVZ_CLUSTER_SERIAL:+, serial}): $(secs "$(ms "$t")")"

t=$(date +%s%N)
host_manifest >"$W/host.after"
if cmp -s "$W/host.before" "$W/host.after"; then
	log "host check: no file of the machine changed (${#HOST_PATHS[@]} paths, $(wc -l <"$W/host.after") entries, $(secs "$(ms "$t")"))"
else
	log "FAIL: the machine's files changed:"
	diff "$W/host.before" "$W/host.after" | head -40 | ind
	failed=1
fi
left=$(compgen -G '/sys/fs/cgroup/*/gvisorgen-e2e-*' || true)
[ -z "$left" ] || { log "FAIL: cgroups left: $left"; failed=1; }

echo
log "summary (containerd, scenario, result, time):"
sort -s -k1,1n "$W/results" 2>/dev/null | ind || true
log "total: $(secs "$(ms "$T_ALL")")"
if [ $failed = 0 ]; then
	OK=1
	log "PASS"
else
	log "FAIL"
	exit 1
fi
