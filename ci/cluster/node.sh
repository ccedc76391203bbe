#!/bin/bash
# ci/cluster/node.sh: PID 1 of the simulated node's user+mount+pid+net+uts+ipc namespaces (started by the cluster
# tests, go test -tags clustertest ./ci/cluster, uids/gids 0-65535 mapped 1:1; it dies with the test binary unless
# KEEP=1). It plays the host: private mounts, scratch folders bound over every host path the installer (or
# containerd, CNI, kubelet) may write, a node IP on a veth, the gVisor mirror served over HTTPS there
# (ci/cluster/tlsmirror, a certificate for the node IP from prepare.sh's test CA); then etcd, kube-apiserver (Node and
# RBAC authorizers, NodeRestriction), kube-controller-manager, kube-scheduler, kube-proxy, containerd and kubelet (its
# node credentials: system:node:gvz-node) as a single-node cluster "gvz-node". Once the node is
# Ready it touches $W/run/READY and acts as the host's "systemd": the fake systemctl (bound over
# /usr/local/sbin/systemctl and /usr/bin/systemctl) asks it to restart containerd, which it does in its own context (a
# containerd started from inside the init container would live in that container's cgroup and network namespace),
# logging every restart to $W/run/logs/systemd.log.
#
# Environment (node.env, written by prepare.sh): GVZ_W (this cluster's scratch folder), GVZ_K8S (Kubernetes binaries),
# GVZ_CTRD (containerd binary), GVZ_CTRD_PATH (dirs put first on containerd's PATH, e.g. the 2.x runc shim),
# GVZ_SERVE (the mirror's document root), GVZ_NODE_IP, GVZ_MIRROR (the tlsmirror binary), GVZ_MIRROR_PORT,
# GVZ_MIRROR_TLS (folder with ca.pem, mirror.pem, mirror.key).
set -euo pipefail
W=$GVZ_W B=$GVZ_K8S R=$GVZ_W/run C=$GVZ_W/conf H=$GVZ_W/host
L=$R/logs
IP=$GVZ_NODE_IP
T0=$(date +%s%N)
ts() { echo "[node $(date +%T) +$((($(date +%s%N) - T0) / 1000000))ms] $*"; }
fail() {
	ts "FAILED: $*"
	touch "$R/FAILED"
	exec sleep infinity
}
poll() { # SECONDS CMD... : run CMD every 0.2 s until it succeeds or SECONDS have passed
	local n=$1 i
	shift
	for ((i = 0; i < n * 5; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
waitfor() { # WHAT SECONDS CMD...
	local what=$1
	shift
	if poll "$@"; then ts "$what ok"; else fail "$what (timeout ${1}s)"; fi
}
HOSTPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SOCK=/run/containerd/containerd.sock

start_containerd() {
	setsid env PATH="${GVZ_CTRD_PATH:+$GVZ_CTRD_PATH:}$HOSTPATH" "$GVZ_CTRD" --config /etc/containerd/config.toml \
		--root "$W/ctrd-root" >>"$L/containerd.log" 2>&1 </dev/null &
	echo $! >"$R/containerd.pid"
	poll 30 ctr --address "$SOCK" version
}
restart_containerd() {
	local p i
	p=$(cat "$R/containerd.pid")
	kill "$p" 2>/dev/null || true
	for i in $(seq 100); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$p" 2>/dev/null || true
	start_containerd
}

# --- the fake host -------------------------------------------------------------------------------------------------
mount --make-rprivate /
mount -t proc proc /proc
# /proc/sys read-only (uid 0 here IS the machine's uid 0: kubelet must not touch global sysctls), but net.* is per
# network namespace and the CNI bridge sets net.ipv4.ip_forward
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount --bind /proc/sys/net /proc/sys/net
mount -o remount,bind,rw /proc/sys/net
# /run (containerd's state and socket, shim sockets, /run/netns, the installer's /run/gvisorgen) and /var/log
# (/var/log/pods, /var/log/containers) are private
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/log
# /var/lib (kubelet's default cert dir, CNI's result cache, /var/lib/containerd) and /opt (containerd's opt plugin,
# NRI, image verifiers) are private too: nothing of the machine's shows through, nothing is created there
mount -t tmpfs tmpfs /var/lib
mount -t tmpfs tmpfs /opt
# scratch folders over every host path the installer, containerd, CNI and kubelet write (prepare.sh created them; the
# tests check the machine's own copies before and after the run)
while read -r d s; do
	mount --bind "$H/$s" "$d"
done <"$W/binds"
# containers call nsenter ... systemctl with the host's PATH; shadow the machine's real systemctl too
mount --bind /usr/local/sbin/systemctl /usr/bin/systemctl
# Debian's runsc (/usr/bin/runsc) is what the mirror serves: hide it, so that only the installed one can run sandboxes
mount --bind /dev/null /usr/bin/runsc
mkdir -p /run/containerd "$R/systemd"

# --- network: lo + a veth carrying the node IP and a default route (kubelet rejects loopback and wants a route) ------
ip link set lo up
ip link add veth-node type veth peer name veth-peer
ip addr add "$IP/24" dev veth-node
ip link set veth-node up
ip link set veth-peer up
ip route add default via "${IP%.*}.254" dev veth-node
"$GVZ_MIRROR" -addr "$IP:$GVZ_MIRROR_PORT" -dir "$GVZ_SERVE" -cert "$GVZ_MIRROR_TLS/mirror.pem" \
	-key "$GVZ_MIRROR_TLS/mirror.key" >>"$L/mirror.log" 2>&1 &
ts "namespaces ready (uid_map: $(xargs </proc/self/uid_map))"
# the mirror answers both clients that use it: curl verifying against the test CA (as `gvisorgen pin` verifies), and
# busybox wget with no openssl on its PATH (as the installer image fetches pinned artifacts: its own TLS client)
waitfor "mirror https (verified with the test CA)" 10 curl -sSf --cacert "$GVZ_MIRROR_TLS/ca.pem" "https://$IP:$GVZ_MIRROR_PORT/release/"
waitfor "mirror https (busybox wget's TLS client)" 10 env PATH=/nonexistent /bin/busybox wget -q -O /dev/null "https://$IP:$GVZ_MIRROR_PORT/release/"
export PATH=$B:$HOSTPATH

# --- control plane --------------------------------------------------------------------------------------------------
"$B/etcd" --data-dir "$W/etcd" --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster default=http://127.0.0.1:2380 --name default --unsafe-no-fsync >"$L/etcd.log" 2>&1 &
"$B/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --bind-address=0.0.0.0 --secure-port=6443 \
	--advertise-address="$IP" --cert-dir="$W/certs" \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$C/sa.pub" \
	--service-account-signing-key-file="$C/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
	--authorization-mode=Node,RBAC --token-auth-file="$C/tokens.csv" --enable-admission-plugins=NodeRestriction \
	--allow-privileged=true --kubelet-preferred-address-types=InternalIP \
	--admission-control-config-file="$C/admission.yaml" >"$L/apiserver.log" 2>&1 &
waitfor "apiserver readyz" 120 sh -c "curl -sfk -H 'Authorization: Bearer $(cut -d, -f1 "$C/admin.token")' https://127.0.0.1:6443/readyz | grep -qx ok"
"$B/kube-controller-manager" --kubeconfig="$C/admin.kubeconfig" --leader-elect=false \
	--service-account-private-key-file="$C/sa.key" --root-ca-file="$W/certs/apiserver.crt" --flex-volume-plugin-dir="$W/plugins" \
	--bind-address=127.0.0.1 --secure-port=10257 >"$L/kcm.log" 2>&1 &
"$B/kube-scheduler" --kubeconfig="$C/admin.kubeconfig" --leader-elect=false \
	--bind-address=127.0.0.1 --secure-port=10259 >"$L/scheduler.log" 2>&1 &
# the kubernetes Service's endpoints are live (the API server's lease reconciler: the advertise address)
waitfor "kubernetes Service endpoints ($IP:6443)" 60 sh -c "kubectl --kubeconfig '$C/admin.kubeconfig' get endpointslices -n default -l kubernetes.io/service-name=kubernetes -o jsonpath='{.items[*].endpoints[*].addresses[*]}' | grep -qx '$IP'"

# --- containerd: the host's /etc/containerd/config.toml, default socket (under the private /run), private root -------
if start_containerd; then ts "containerd ok ($("$GVZ_CTRD" --version | cut -d' ' -f3))"; else fail "containerd did not start"; fi
for t in "$W"/../images/*.tar; do ctr --address "$SOCK" -n k8s.io images import "$t" >/dev/null || fail "import $t"; done
ts "images imported: $(ctr --address "$SOCK" -n k8s.io images ls -q | grep -v sha256 | xargs)"

# --- kubelet ----------------------------------------------------------------------------------------------------------
"$B/kubelet" --config="$C/kubelet.yaml" --kubeconfig="$C/node.kubeconfig" --hostname-override=gvz-node \
	--node-ip="$IP" --root-dir="$W/kubelet" --v=2 >"$L/kubelet.log" 2>&1 &
export KUBECONFIG=$C/admin.kubeconfig
waitfor "node registered" 120 kubectl get node gvz-node
# kube-proxy routes the Service's IP to those endpoints: pods reach the API server as in-cluster clients do. Started
# once the Node exists (it waits for its Node object, 30 s, before it programs anything).
"$B/kube-proxy" --config="$C/kube-proxy.yaml" >"$L/kube-proxy.log" 2>&1 &
waitfor "node Ready" 120 kubectl wait --for=condition=Ready node/gvz-node --timeout=2s
waitfor "kube-proxy routes the kubernetes Service" 60 sh -c "iptables-save -t nat | grep -q 'default/kubernetes:https'"
ts "CLUSTER UP"
touch "$R/READY"

# --- the host's "systemd": serve the fake systemctl's restart requests ---------------------------------------------------
# It waits on a FIFO that the fake systemctl writes to after each request (held open here for reading and writing, so
# a writer never blocks while this runs), and looks every 5 s anyway: polling with `sleep 0.1` cost three clusters
# ~14000 processes per run (process accounting, 2026-12-04).
mkfifo "$R/systemd/wake"
exec 3<>"$R/systemd/wake"
set +e
while true; do
	for f in "$R"/systemd/req.*; do
		[ -e "$f" ] || continue
		case $f in *.tmp) continue ;; esac
		id=${f##*/req.}
		rm -f "$f"
		if restart_containerd; then rc=0; else rc=1; fi
		echo "$(date +%s.%N) restart containerd rc=$rc" >>"$L/systemd.log"
		echo $rc >"$R/systemd/ack.$id.tmp"
		mv "$R/systemd/ack.$id.tmp" "$R/systemd/ack.$id"
	done
	read -r -t 5 _ <&3
done
