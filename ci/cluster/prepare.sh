#!/bin/bash
# ci/cluster/prepare.sh W: everything the cluster tests (go test -tags clustertest ./ci/cluster) need before a node
# starts, built into the empty scratch folder W (run ci/cluster/setup.sh first; ci/cluster/e2e.sh runs both):
#  - W/gvisorgen and W/tlsmirror (the product, and the mirror's HTTPS server), copied from GVZ_CLUSTER_BIN, or built
#    with the suite's test binary into W/bin (ci/cluster/binaries.sh);
#  - W/images/all.tar: one OCI archive (busybox-static with every applet) holding the installer/smoke/test image and
#    the pause images of containerd 1.6 and 2.4.2's default configs; W/images/kubectl.tar: the readiness gate's
#    kubectl image (the static kubectl of ci/k8s/build.sh on the same root); W/images/digests ("REF DIGEST");
#  - W/c16/serve/release, W/c17/…, W/c24/…: each node's gVisor mirror, built from the current gVisor
#    (ci/gvisor/build.sh): 20240212 in the binaries layout (the current runsc; beside it the 2022 shim on c16, which
#    containerd 1.6 can start, the current shim on c17 and c24), 20260801 in the archive layout (ci/gvisor/build.sh's release
#    archive: the current runsc and shim, gvisor-bin/gvisor_sentry), 20240213 with a tampered runsc beside the
#    genuine .sha512, 20221219 = Debian's runsc 20221219 beside the 2022 shim (the upgrade's start); aarch64 as hard
#    links;
#  - W/tls: a test CA and the mirror's certificate for the node IP; W/pki: the API server's service-account key
#    pair, the admin and kubelet tokens and their kubeconfigs;
#  - W/c16, W/c17, W/c24 (those of GVZ_CLUSTER_VERSIONS): each node's scratch folders (bound over /etc/containerd, /usr/local/bin, /usr/local/sbin by
#    node.sh), containerd's own default config plus the test-only keys (and config.orig, its copy), the CNI config,
#    the fake systemctl, kubelet.yaml, a temp copy of the repository's cue/ (the test target's root), and node.env:
#    the environment ci/cluster/node.sh runs with.
# Nothing here touches a path of the machine outside W and the tool cache.
set -euo pipefail
W=${1:?usage: prepare.sh W}
cd "$(dirname "$0")/../.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
K8S=$(sh ci/k8s/build.sh --dir)
C24=$cache/containerd-v2.4.2/containerd
C17DIR=$(sh ci/containerd17/build.sh --dir)
SHIM24=$cache/containerd-shim-runc-v2-v2.4.2
RUNSC_SHIM=$cache/e2e/shim-20221203/shim
G=$(sh ci/gvisor/build.sh --dir)
NODE_IP=10.99.0.1
IMG=docker.io/gvz-e2e/busybox:e2e
KUBECTL_IMG=docker.io/gvz-e2e/kubectl:e2e
V_GOOD=20240212 V_UP=20260801 V_BAD=20240213 V_DEB=20221219
log() { echo "[cluster-prepare] $*"; }
# the nodes of this run only, as e2e.sh (or the test, run directly) names them: the four suites side by side each made all
# three, ~300 MB of mirror a node
VERSIONS=${GVZ_CLUSTER_VERSIONS:?the versions of the run: set by ci/cluster/e2e.sh, or by the test run directly}
# ctrd_of V: "BINARY SHIM_DIR" of the containerd a node of version V runs (16: Debian's, its shim on PATH); the one list
# of the versions a node can have
ctrd_of() {
	case $1 in
	16) echo "/usr/bin/containerd" ;;
	17) echo "$C17DIR/containerd $C17DIR" ;;
	24) echo "$C24 $SHIM24" ;;
	*) return 1 ;;
	esac
}
for v in $VERSIONS; do
	ctrd_of "$v" >/dev/null || { log "FAIL: GVZ_CLUSTER_VERSIONS: no node of version $v"; exit 2; }
done

# --- preconditions ------------------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || { log "FAIL: run as root"; exit 2; }
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
	log "FAIL: this host uses cgroup v2 only; the cluster suite is proven on cgroup v1/hybrid hosts (kubelet's cgroupRoot is created in every v1 hierarchy)"
	exit 2
fi
for f in "$K8S"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl,etcd} /usr/bin/containerd /usr/bin/ctr \
	"$C24" "$SHIM24/containerd-shim-runc-v2" "$C17DIR/containerd" "$C17DIR/containerd-shim-runc-v2" /usr/bin/runsc "$G/runsc" "$G/containerd-shim-runsc-v1" "$RUNSC_SHIM" /bin/busybox /usr/lib/cni/bridge; do
	[ -x "$f" ] || { log "FAIL: missing $f (run ci/cluster/setup.sh)"; exit 2; }
done
[ -f "$G.tar.bz2" ] || { log "FAIL: missing $G.tar.bz2 (run ci/cluster/setup.sh)"; exit 2; }
command -v openssl >/dev/null || { log "FAIL: openssl missing (run ci/cluster/setup.sh)"; exit 2; }
mkdir -p "$W"
chmod 755 "$W"

# --- gvisorgen, tlsmirror --------------------------------------------------------------------------------------------
# built once by make e2e-together for all its suites (GVZ_CLUSTER_BIN), else here into W/bin (ci/cluster/binaries.sh,
# with the suite's test binary, which e2e.sh runs from there)
bin=${GVZ_CLUSTER_BIN:-}
if [ -z "$bin" ]; then
	bin=$W/bin
	sh ci/cluster/binaries.sh "$bin"
fi
for b in gvisorgen tlsmirror; do
	[ -x "$bin/$b" ] || { log "FAIL: $bin/$b missing (ci/cluster/binaries.sh builds it)"; exit 2; }
	# a hard link where it can (the same file for every suite: read, never written), else a copy
	ln -f "$bin/$b" "$W/$b" 2>/dev/null || cp "$bin/$b" "$W/$b"
done

# one OCI archive, three references: the installer/smoke/test image (busybox-static with every applet) and the
# sandbox (pause) images of containerd 1.6 and 2.4.2's default configs (busybox sleeping). Each is named by its tag
# and, as a pull from a registry would name it too, by its manifest digest (repository@sha256:...): the installer is
# referenced as repository:tag@digest, which the CRI looks up as repository@digest. "REF DIGEST" lines go to
# $W/images/digests.
mkimage() { # OUT REF=CMDJSON... (EXTRA_BIN: a static binary added as /bin/<name>)
	local out=$1 w=$W/img.tmp a d s ldig lsz cdig csz mdig msz entries="" ref cmd n
	shift
	rm -rf "$w"
	mkdir -p "$w/rootfs/bin" "$w/rootfs/proc" "$w/rootfs/dev" "$w/rootfs/sys" "$w/rootfs/tmp" "$w/rootfs/etc" "$w/blobs/sha256"
	chmod 1777 "$w/rootfs/tmp"
	cp /bin/busybox "$w/rootfs/bin/busybox"
	# every applet a relative link to busybox, in one process (one ln each was ~270 processes an image, ~10 ms of CPU
	# each on these paravirtualised machines; busybox --install -s links to /proc/self/exe's /usr/bin/busybox)
	/bin/busybox --list | perl -e 'my $d = shift; while (<STDIN>) { chomp; $_ eq "busybox" or symlink("busybox", "$d/$_") or die "$d/$_: $!\n" }' "$w/rootfs/bin"
	[ -z "${EXTRA_BIN:-}" ] || cp "$EXTRA_BIN" "$w/rootfs/bin/${EXTRA_BIN##*/}"
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
	'registry.k8s.io/pause:3.6=["/bin/sleep","2147483647"]' 'registry.k8s.io/pause:3.8=["/bin/sleep","2147483647"]' \
	'registry.k8s.io/pause:3.10.2=["/bin/sleep","2147483647"]'
# (the tests read the installer image's digest from images/digests and set it in the target: no registry has this
# image, so `gvisorgen pin` must not ask one)
# the readiness gate's image: kubectl (static, ci/k8s/build.sh) as /bin/kubectl, as registry.k8s.io/kubectl has it
# (there without a shell: the product's label-node container runs /bin/kubectl directly). Its own archive, so that
# the installer image's digest stays the same.
if [ "$(head -c 4 "$K8S/kubectl" | od -An -c | tr -d ' ')" != "177ELF" ] || grep -q 'ld-linux' "$K8S/kubectl"; then
	log "FAIL: $K8S/kubectl is not a static ELF binary (ci/k8s/build.sh builds it with CGO_ENABLED=0)"
	exit 2
fi
EXTRA_BIN=$K8S/kubectl mkimage "$W/images/kubectl.tar" "$KUBECTL_IMG=[\"/bin/kubectl\"]"

# each node's mirror: <tag>/x86_64/ as the bucket lays it out, real sha512 files
mirror_files() { # V
	local S=$W/c$1/serve/release shim=$G/containerd-shim-runsc-v1 v
	# containerd 1.6 cannot start the current shim (its bootstrap handshake): the 2022 shim runs the current runsc
	[ "$1" != 16 ] || shim=$RUNSC_SHIM
	mkdir -p "$S/$V_GOOD/x86_64" "$S/$V_UP/x86_64" "$S/$V_BAD/x86_64" "$S/$V_DEB/x86_64"
	# the upgrade's starting point: Debian's runsc 20221219 beside the 2022 shim (binaries layout)
	cp /usr/bin/runsc "$S/$V_DEB/x86_64/runsc"
	cp "$RUNSC_SHIM" "$S/$V_DEB/x86_64/containerd-shim-runsc-v1"
	(cd "$S/$V_DEB/x86_64" && for a in runsc containerd-shim-runsc-v1; do sha512sum "$a" >"$a.sha512"; done)
	cp "$G/runsc" "$S/$V_GOOD/x86_64/runsc"
	cp "$shim" "$S/$V_GOOD/x86_64/containerd-shim-runsc-v1"
	(cd "$S/$V_GOOD/x86_64" && for a in runsc containerd-shim-runsc-v1; do sha512sum "$a" >"$a.sha512"; done)
	# archive layout (from 2026-07): ci/gvisor/build.sh's gvisor.tar.bz2 (gvisor/ with runsc, the shim, gvisor-bin/)
	cp "$G.tar.bz2" "$S/$V_UP/x86_64/gvisor.tar.bz2"
	(cd "$S/$V_UP/x86_64" && sha512sum gvisor.tar.bz2 >gvisor.tar.bz2.sha512)
	# broken: the published .sha512 is the real one, the runsc beside it is one byte longer
	cp "$S/$V_GOOD/x86_64/"* "$S/$V_BAD/x86_64/"
	printf 'X' >>"$S/$V_BAD/x86_64/runsc"
	# aarch64, as the bucket publishes it: `gvisorgen pin` resolves every architecture the product supports. No node
	# here is aarch64, so its files are hard links to the x86_64 ones (same digests; only the .sha512 files are read).
	for v in "$V_GOOD" "$V_UP" "$V_BAD" "$V_DEB"; do cp -al "$S/$v/x86_64" "$S/$v/aarch64"; done
}
for v in $VERSIONS; do mirror_files "$v"; done

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

# --- each node's own files (node.sh binds host/* over the machine's paths) ------------------------------------------------
node_files() { # V
	local v=$1 cw=$W/c$1 H
	H=$cw/host
	mkdir -p "$cw/run/logs" "$cw/run/systemd" "$cw/conf" "$H/etc-containerd" "$H/usr-local-bin" "$H/usr-local-sbin" "$cw/cni" "$cw/pv/smoke" "$cw/plugins" "$cw/repo/targets"
	# the smoke pod runs as nobody: its volume's folder is world-writable, as local-path-provisioner makes its folders
	chmod 0777 "$cw/pv/smoke"
	cp -r cue "$cw/repo/cue"
	cp "$P"/* "$cw/conf/"
	printf '/etc/containerd etc-containerd\n/usr/local/bin usr-local-bin\n/usr/local/sbin usr-local-sbin\n' >"$cw/binds"
	local ctrd ctrd_path
	read -r ctrd ctrd_path < <(ctrd_of "$v")
	if [ "$ctrd" != /usr/bin/containerd ]; then
		# the host's `containerd` (found by the installer's host commands) is the one that runs
		printf '#!/bin/sh\nexec %s "$@"\n' "$ctrd" >"$H/usr-local-sbin/containerd"
		chmod 755 "$H/usr-local-sbin/containerd"
	fi
	# kubelet's cgroupRoot, named by the version and this run's scratch folder: two runs side by side on the machine
	# (make e2e-cluster and make e2e-flux both have a c16) never share a cgroup
	cgroot=gvisorgen-e2e-$v-${W##*.}
	printf 'GVZ_W=%s\nGVZ_K8S=%s\nGVZ_CTRD=%s\nGVZ_CTRD_PATH=%s\nGVZ_SERVE=%s\nGVZ_NODE_IP=%s\nGVZ_MIRROR=%s\nGVZ_MIRROR_PORT=18443\nGVZ_MIRROR_TLS=%s\nGVZ_CGROUP_ROOT=%s\n' \
		"$cw" "$K8S" "$ctrd" "$ctrd_path" "$cw/serve" "$NODE_IP" "$W/tlsmirror" "$TLS" "$cgroot" >"$cw/node.env"
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
	timeout 2 sh -c "echo \$id >\$R/systemd/wake" || true
	i=0
	while [ ! -e \$R/systemd/ack.\$id ]; do i=\$((i+1)); [ \$i -le 600 ] || { echo "systemctl: no answer from the node's init" >&2; exit 1; }; sleep 0.1; done
	rc=\$(cat \$R/systemd/ack.\$id); rm -f \$R/systemd/ack.\$id; exit "\$rc" ;;
"is-active containerd") kill -0 "\$(cat \$R/containerd.pid)" 2>/dev/null && echo active || { echo inactive; exit 3; } ;;
*) echo "fake systemctl: unsupported: \$*" >&2; exit 1 ;;
esac
EOF
	chmod 755 "$H/usr-local-sbin/systemctl"
	# kube-proxy (iptables): routes the kubernetes Service (10.0.0.1:443) to the API server, so that the readiness
	# gate's label-node container reaches it. No conntrack tuning (its sysctls are not this user namespace's to set)
	# and no localhost node ports (route_localnet). node.sh starts it once the kubelet registered the Node.
	cat >"$cw/conf/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $cw/conf/admin.kubeconfig}
hostnameOverride: gvz-node
mode: iptables
clusterCIDR: 10.88.0.0/16
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
	cat >"$cw/conf/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$cgroot
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
# a failing container's restart back-off at most 10 s (the default doubles up to 5 minutes): ci/cluster/README.md,
# "Only the product's own values", says why
crashLoopBackOff: {maxContainerRestartPeriod: 10s}
oomScoreAdj: 0
volumePluginDir: $cw/plugins
EOF
}
for v in $VERSIONS; do node_files "$v"; done
log "prepared $W in ${SECONDS}s"
