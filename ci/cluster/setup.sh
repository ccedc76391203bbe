#!/bin/sh
# ci/cluster/setup.sh: everything the cluster end-to-end tests (ci/cluster/e2e.sh: prepare.sh, go test -tags clustertest) need; idempotent, prints timings.
#  - ci/node/setup.sh + ci/node/e2e-setup.sh: busybox-static, containerd 1.6 + runc (Debian), containerd 2.4.2 (cache),
#    Debian's runsc 20221219, the matching 2022 containerd-shim-runsc-v1, crictl, CNI plugins, iproute2, usernsrun;
#  - ci/k8s/build.sh: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl (static), etcd
#    v1.37.2 (cache);
#  - containerd v2.4.2's containerd-shim-runc-v2 (Debian's 1.6 runc shim fails under containerd 2.x:
#    "io.containerd.runc.v2: type with url ...: not found") into
#    ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-shim-runc-v2-v2.4.2/ (built into a temp dir, then renamed);
#  - openssl (the API server's service-account key pair and the test's tokens), iptables (kube-proxy), git and
#    redis-server (the Flux and Argo CD suites).
# Run as root. Cold: ~20 minutes (the Kubernetes build); warm: a few seconds.
set -eu
cd "$(dirname "$0")/../.."
now() { date +%s; }
t_all=$(now)
sh ci/node/e2e-setup.sh
t=$(now)
sh ci/k8s/build.sh
echo "cluster-setup: k8s binaries ready in $(($(now) - t))s"

t=$(now)
pkgs=""
command -v openssl >/dev/null 2>&1 || pkgs="$pkgs openssl"
# kube-proxy (iptables mode) runs iptables-restore and iptables-save on the node
[ -x /usr/sbin/iptables-restore ] || command -v iptables-restore >/dev/null 2>&1 || pkgs="$pkgs iptables"
# the controller suites' (git: the repository the tests commit to and serve; redis: Argo CD's), here once: the suites
# may run side by side (make e2e-together), and two apt-get runs at once fail on dpkg's lock
command -v git >/dev/null 2>&1 || pkgs="$pkgs git"
command -v redis-server >/dev/null 2>&1 || pkgs="$pkgs redis-server"
if [ -n "$pkgs" ]; then
	echo "cluster-setup: apt-get install$pkgs"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086 # a list
	apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
fi
echo "cluster-setup: openssl, iptables, git, redis-server ready in $(($(now) - t))s"

V=v2.4.2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
dir=$cache/containerd-shim-runc-v2-$V
t=$(now)
if [ -x "$dir/containerd-shim-runc-v2" ]; then
	echo "cluster-setup: containerd-shim-runc-v2 $V cached at $dir"
else
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.containerd-shim-runc-v2-$V.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
	GOBIN=$tmp GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install -ldflags '-s -w' "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$V"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT INT TERM
	echo "cluster-setup: built containerd-shim-runc-v2 $V in $(($(now) - t))s"
fi
echo "cluster-setup: done in $(($(now) - t_all))s"
