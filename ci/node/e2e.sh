#!/bin/bash
# ci/node/e2e.sh: node end-to-end test of the installer scripts (run ci/node/e2e-setup.sh first).
#
# For containerd 1.6 (Debian), 1.7 (ci/containerd17) and 2.4.2, with the install dir on containerd's PATH
# (/usr/local/bin) and off it (/home/kubernetes/bin: runtime_path + binary_name, Debian's own runsc hidden), and 1.6's
# version 2 config on 2.4.2 off PATH: a simulated node = user+mount+pid+net+uts+ipc namespaces (usernsrun) whose
# PID 1 is this script, with a private /run, the node's /usr/local/bin, /usr/local/sbin, /etc/containerd and
# /etc/cni/net.d bind-mounted from a temp host tree, a fake systemctl that (re)starts the real containerd, and
# openssl s_server serving two releases unpinned over https on the node's 127.0.0.1, both built from the current
# gVisor (ci/gvisor/build.sh): 20240212 in the binaries layout (the current runsc beside a 2022 shim, which containerd
# 1.6 can start) and 20260905 in the archive layout (the current runsc and shim, gvisor-bin/gvisor_sentry). 1.6 installs
# 20240212; 2.4.2 and 1.7 install 20260905; 1.6 refuses 20260905 (its shim needs containerd >= 1.7.0:
# CONTAINERD_MIN_VERSION as the generator renders it for that tag, which ci/node's TestContainerdFloorAgrees proves):
# install-runsc fails naming both versions, nothing is installed, containerd is not restarted. The sandbox network is
# on (runsc's default): the pod shows its CNI address. runsc logs to a debug folder: the archive runs prove that runsc
# booted the sandbox with the gvisor_sentry sidecar where the installer put it (on and off PATH). The "init containers" are the real scripts under busybox sh, chrooted into a busybox-only rootfs with the
# host tree at /host, in network/UTS/IPC namespaces of their own, with the default HOST_EXEC (nsenter into PID 1's mount
# namespace) and HOST_EXEC_NET (mount + network, curl only). Then: curl without the node's network is refused;
# ready.sh passes, a CRI pod with runtime handler runsc logs "Starting gVisor", uninstall.sh refuses while that pod exists, and succeeds once it is gone.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen
E2E=$cache/e2e
CRICTL=$(sh ci/node/crictl.sh --path)
USERNSRUN=$E2E/usernsrun-$(sha256sum ci/node/e2e/usernsrun/main.go | cut -c1-12)/usernsrun

if [ "${GVZ_E2E_INNER:-}" != 1 ]; then
	C24=$cache/containerd-v2.4.2/containerd
	C17=$(sh ci/containerd17/build.sh --dir)/containerd
	G=$(sh ci/gvisor/build.sh --dir)
	for f in /usr/bin/containerd "$C17" "$C24" "$G/runsc" "$G/containerd-shim-runsc-v1" /usr/bin/runsc /bin/busybox "$CRICTL" "$E2E/shim-20221203/shim" "$USERNSRUN" /usr/lib/cni/bridge; do
		[ -x "$f" ] || { echo "e2e: FAIL: missing $f (run ci/node/e2e-setup.sh)" >&2; exit 1; }
	done
	[ -f "$G.tar.bz2" ] || { echo "e2e: FAIL: missing $G.tar.bz2 (run ci/node/e2e-setup.sh)" >&2; exit 1; }
	# The node suite's fake runsc prints this build's NVIDIA driver list (ci/node/testdata/nvproxy-drivers.txt), against
	# which it tests a GPU class's driver check: it must be this runsc's own `nvproxy list-supported-drivers`.
	if ! "$G/runsc" nvproxy list-supported-drivers | cmp -s - <(grep -v '^#' ci/node/testdata/nvproxy-drivers.txt); then
		echo "e2e: FAIL: ci/node/testdata/nvproxy-drivers.txt is not what $G/runsc nvproxy list-supported-drivers prints; refresh it:" >&2
		"$G/runsc" nvproxy list-supported-drivers | diff - <(grep -v '^#' ci/node/testdata/nvproxy-drivers.txt) >&2 || true
		exit 1
	fi
	echo "e2e: ci/node/testdata/nvproxy-drivers.txt is $G/runsc's own nvproxy list-supported-drivers ($(grep -vc '^#' ci/node/testdata/nvproxy-drivers.txt) drivers)"
	# The runs are independent (each its own namespaces, /run, host tree, server and CNI bridge) and half of a run is
	# waiting (containerd restarts, the sandbox booting): GVZ_E2E_JOBS of them at a time (default 3), each run's output
	# kept and printed whole, in the order of the list, once it is done.
	max=${GVZ_E2E_JOBS:-3}
	# "containerd installdir config tag": the fifth run is 1.6's version 2 config on 2.4.2 with the install dir off PATH, the
	# block a version 2 file gets from either version (absolute runtime_type + runtime_path), started for real on 2.x
	runs=("24 upgrade 24 20260905" "17 upgrade 17 20260905" "16 onpath 16 20240212" "24 onpath 24 20260905" "16 offpath 16 20240212" "24 offpath 24 20260905"
		"24 offpath 16 20260905" "17 onpath 17 20260905" "17 offpath 17 20260905" "16 refused 16 20260905"
		)
	# GVZ_E2E_ONLY=<mode> runs only the runs of that mode (onpath, offpath, refused, upgrade)
	if [ -n "${GVZ_E2E_ONLY:-}" ]; then
		sel=()
		for r in "${runs[@]}"; do case " $r " in *" $GVZ_E2E_ONLY "*) sel+=("$r") ;; esac; done
		runs=("${sel[@]}")
	fi
	ws=() pids=()
	for i in "${!runs[@]}"; do
		# shellcheck disable=SC2086 # "containerd mode config tag", split on purpose
		set -- ${runs[$i]}
		v=$1
		case $v in 16) bin=/usr/bin/containerd ;; 17) bin=$C17 ;; *) bin=$C24 ;; esac
		W=$(mktemp -d /tmp/gvz-e2e.XXXXXX)
		ws[i]=$W
		while [ "$(jobs -rp | wc -l)" -ge "$max" ]; do wait -n || true; done
		(
			t0=$(date +%s)
			rc=0
			GVZ_E2E_INNER=1 G=$G "$USERNSRUN" bash "$REPO/ci/node/e2e.sh" "$v" "$bin" "$W" "$2" "$3" "$4" >"$W/run.log" 2>&1 || rc=$?
			echo "$rc $(($(date +%s) - t0))" >"$W/run.rc"
		) &
		pids[i]=$!
	done
	pass=0 fail=0
	for i in "${!runs[@]}"; do
		wait "${pids[$i]}" || true
		# shellcheck disable=SC2086 # "containerd mode config tag", split on purpose
		set -- ${runs[$i]}
		W=${ws[$i]}
		cat "$W/run.log"
		read -r rc took <"$W/run.rc" || { rc=1 took='?'; }
		if [ "$rc" = 0 ]; then
			echo "e2e: containerd $1, install dir $2, config host$3.toml, gVisor $4: PASS in ${took}s"
			pass=$((pass + 1))
			rm -rf "$W"
		else
			echo "e2e: containerd $1, install dir $2, config host$3.toml, gVisor $4: FAIL in ${took}s (logs kept in $W)"
			fail=$((fail + 1))
		fi
	done
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
fi

# ---- inside the simulated node (PID 1 of new namespaces) ---------------------------------------------------------------
V=$1 CTRD=$2 W=$3 MODE=$4 CFGV=$5 TAG=$6
IDIR=/usr/local/bin EXTRA=()
if [ "$MODE" = offpath ]; then
	# GKE COS style: an install dir that is not on containerd's PATH
	IDIR=/home/kubernetes/bin EXTRA=("INSTALL_DIR=$IDIR" INSTALL_DIR_ON_PATH=false)
fi
H=$W/host R=$W/hostrun C=$W/ctr
say() { echo "[e2e $V] $*"; }
mount --make-rprivate /
mount -t proc proc /proc
ip link set lo up
mount -t tmpfs tmpfs /run
mkdir -p "$H/usr/local/bin" "$H/home/kubernetes/bin" "$H/usr/local/sbin" "$H/etc/containerd/conf.d" "$H/etc/cni/net.d" "$H/run/gvisorgen" "$R/podlogs" \
	"$W/serve/release/20240212/x86_64" "$W/serve/release/20260905/x86_64" "$W/serve/release/20221219/x86_64" "$R/runsc" "$C/bin" "$C/proc" "$C/dev" "$C/host" "$C/gvisorgen" "$C/tmp" "$W/img"

# the releases: 20240212 (binaries layout) = the current runsc + the 2022 shim; 20260905 (archive layout) = the
# current runsc and shim with gvisor-bin/gvisor_sentry (ci/gvisor/build.sh)
B=$W/serve/release/20240212/x86_64 A=$W/serve/release/20260905/x86_64
cp "$G/runsc" "$B/runsc"
cp "$E2E/shim-20221203/shim" "$B/containerd-shim-runsc-v1"
cp "$G.tar.bz2" "$A/gvisor.tar.bz2"
(cd "$B" && sha512sum runsc >runsc.sha512 && sha512sum containerd-shim-runsc-v1 >containerd-shim-runsc-v1.sha512)
(cd "$A" && sha512sum gvisor.tar.bz2 >gvisor.tar.bz2.sha512)
# 20221219 (binaries layout): Debian's runsc of that release and the 2022 shim, the upgrade run's old release
D=$W/serve/release/20221219/x86_64
cp /usr/bin/runsc "$D/runsc"
cp "$E2E/shim-20221203/shim" "$D/containerd-shim-runsc-v1"
(cd "$D" && sha512sum runsc >runsc.sha512 && sha512sum containerd-shim-runsc-v1 >containerd-shim-runsc-v1.sha512)
# served unpinned over https on the node's own 127.0.0.1 (openssl s_server, a test CA): the installer must fetch it
# with the host's curl, through HOST_EXEC_NET, since the init containers have a network namespace of their own.
(
	cd "$W" && umask 077
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=gvz-e2e-ca \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >srv.ext
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile srv.ext 2>/dev/null
)
(cd "$W/serve" && exec openssl s_server -quiet -WWW -accept 127.0.0.1:18443 -cert "$W/srv.pem" -key "$W/srv.key" \
	</dev/null >"$W/s_server.log" 2>&1) &
for _ in $(seq 1 50); do curl -sf --cacert "$W/ca.pem" -o /dev/null https://127.0.0.1:18443/release/20240212/x86_64/runsc.sha512 && break; sleep 0.1; done

# the host
cp "$REPO/ci/node/e2e/host$CFGV.toml" "$H/etc/containerd/config.toml"
cp "$H/etc/containerd/config.toml" "$W/config.orig"
cat >"$H/etc/cni/net.d/10-e2e.conflist" <<'JSON'
{"cniVersion":"1.0.0","name":"e2e","plugins":[{"type":"bridge","bridge":"e2e0","isGateway":true,"ipMasq":false,
 "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.77.0/24"}]],"dataDir":"/run/cni-ipam"}},{"type":"loopback"}]}
JSON
printf '#!/bin/sh\nexec %s "$@"\n' "$CTRD" >"$H/usr/local/sbin/containerd"
# the node's crictl, as kind, GKE and EKS nodes have one: configure-containerd asks CRI for the runsc handler with it
printf '#!/bin/sh\nexec %s "$@"\n' "$CRICTL" >"$H/usr/local/sbin/crictl"
cat >"$H/usr/local/sbin/systemctl" <<EOF2
#!/bin/sh
# fake systemctl of the simulated node: containerd with a private root/state
set -eu
R=$R
echo "systemctl \$*" >>\$R/systemctl.log
case "\$1 \${2:-}" in
"restart containerd"|"start containerd")
	if [ -f \$R/containerd.pid ] && kill -0 "\$(cat \$R/containerd.pid)" 2>/dev/null; then
		kill "\$(cat \$R/containerd.pid)"
		i=0; while kill -0 "\$(cat \$R/containerd.pid)" 2>/dev/null; do i=\$((i+1)); [ \$i -lt 100 ] || exit 1; sleep 0.1; done
	fi
	rm -f /run/containerd/containerd.sock
	# like systemd: containerd runs in the node's namespaces, not in those of the caller (nsenter -t 1 -m from an init
	# container brings only the mount namespace)
	setsid nsenter -t 1 -u -i -n -- containerd --config /etc/containerd/config.toml --root \$R/root --state /run/containerd >>\$R/containerd.log 2>&1 </dev/null &
	echo \$! >\$R/containerd.pid
	i=0; until ctr version >/dev/null 2>&1; do i=\$((i+1)); [ \$i -lt 100 ] || { echo "containerd failed to start" >&2; exit 1; }; sleep 0.1; done ;;
*) echo "fake systemctl: unsupported: \$*" >&2; exit 1 ;;
esac
EOF2
chmod 0755 "$H/usr/local/sbin/containerd" "$H/usr/local/sbin/crictl" "$H/usr/local/sbin/systemctl"
for d in /usr/local/bin /usr/local/sbin /etc/containerd /etc/cni/net.d /home; do mount --bind "$H$d" "$d"; done
# the state dir is a hostPath at the same path (the host's curl reads the CA bundle the installer writes there)
mkdir -p /run/gvisorgen
mount --bind "$H/run/gvisorgen" /run/gvisorgen
# Debian's runsc would be found on PATH: hide it, so that only the installed runsc can start sandboxes
mount --bind /dev/null /usr/bin/runsc
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
systemctl start containerd
A=/run/containerd/containerd.sock
say "host containerd: $(containerd --version)"

# images: the test image and the sandbox (pause) image of each config
sh "$REPO/ci/node/e2e/mkimg.sh" "$W/img/bb.tar" docker.io/library/bbtest:1
sh "$REPO/ci/node/e2e/mkimg.sh" "$W/img/pause.tar" "$(case $CFGV in 16) echo registry.k8s.io/pause:3.6 ;; 17) echo registry.k8s.io/pause:3.8 ;; *) echo registry.k8s.io/pause:3.10.2 ;; esac)" '["/bin/sleep","2147483647"]'
for i in bb pause; do ctr -n k8s.io images import "$W/img/$i.tar" >/dev/null; done

# the init containers' rootfs: busybox only, the scripts at /gvisorgen, the host tree at /host
cp /bin/busybox "$C/bin/busybox"
# every applet a relative link, in one process (an ln each: ~270 processes of ~10 ms CPU each here)
busybox --list | perl -e 'my $d = shift; while (<STDIN>) { chomp; $_ eq "busybox" or symlink("busybox", "$d/$_") or die "$d/$_: $!\n" }' "$C/bin"
cp "$REPO"/cue/installer/*.sh "$C/gvisorgen/"
# Each init container has its own mount, network, UTS and IPC namespaces (a pod without hostNetwork), and the node's
# PID namespace (hostPID): every host command reaches the node only through HOST_EXEC / HOST_EXEC_NET's nsenter.
# runsc's own debug log, one file per command, for the sidecar line; the sandbox network stays on (the default)
RUNSC_TOML=$(printf 'debug = "true"\ndebug-log = "%s/runsc/"' "$R")
# the floor the generator renders for these tags (cue/compat.cue; TestContainerdFloorAgrees holds the two equal)
FLOOR=""
case $TAG in 20240212 | 20221219) ;; *) FLOOR=1.7.0 ;; esac
runinit() { # SCRIPT [VAR=VALUE...]
	local s=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner sh
	unshare --mount --net --uts --ipc sh -c '
		c=$1 h=$2; shift 2
		mount --rbind "$h" "$c/host"
		mount -t proc proc "$c/proc"
		mount --rbind /dev "$c/dev"
		exec chroot "$c" /bin/env -i PATH=/bin HOST_ROOT=/host GVISORGEN_SCRIPTS=/gvisorgen \
			GVISOR_BASE_URL=https://127.0.0.1:18443/release "$@"' \
		sh "$C" "$H" "GVISOR_VERSION=$TAG" "CONTAINERD_MIN_VERSION=$FLOOR" "RUNSC_CONFIG_TOML=$RUNSC_TOML" "GVISOR_CA_BUNDLE=$(cat "$W/ca.pem")" "${EXTRA[@]}" "$@" /bin/sh "/gvisorgen/$s" 2>&1 | sed "s/^/  [$s] /"
}
if [ "$MODE" = refused ]; then
	# the DaemonSet's init containers stop at the first failure: configure-containerd never runs
	if runinit install-runsc.sh >"$W/refused.log"; then cat "$W/refused.log"; say "FAIL: install-runsc installed $TAG on containerd $V"; exit 1; fi
	cat "$W/refused.log"
	grep -q "refusing to install gVisor $TAG: its shim needs containerd >= 1.7.0 .* this node runs containerd 1.6" "$W/refused.log" || { say "FAIL: no refusal naming both versions"; exit 1; }
	! grep -q "downloading" "$W/refused.log" || { say "FAIL: downloaded before refusing"; exit 1; }
	[ -z "$(ls -A /usr/local/bin)" ] || { say "FAIL: something was installed: $(ls -A /usr/local/bin)"; exit 1; }
	cmp -s "$W/config.orig" /etc/containerd/config.toml || { say "FAIL: config changed"; exit 1; }
	[ "$(grep -c restart "$R/systemctl.log" || true)" = 0 ] || { say "FAIL: containerd restarted"; exit 1; }
	say "refused: $TAG's shim needs containerd >= 1.7.0; nothing installed, config unchanged, containerd not restarted"
	exit 0
fi
if [ "$MODE" = upgrade ]; then
	# shellcheck source-path=SCRIPTDIR source=e2e-upgrade.sh
	. "$REPO/ci/node/e2e-upgrade.sh"
	exit 0
fi
# curl needs the node's network: through the mount namespace alone it cannot reach the node's 127.0.0.1
if runinit install-runsc.sh "HOST_EXEC_NET=nsenter -t 1 -m --" >"$W/nonet.log" 2>&1; then say "FAIL: curl reached the node without its network namespace"; exit 1; fi
if ! grep -q 'ERROR: .*127\.0\.0\.1:18443' "$W/nonet.log" || [ -e "$IDIR/gvisor-releases" ]; then say "FAIL: no refusal"; cat "$W/nonet.log"; exit 1; fi
say "curl through the mount namespace alone: refused ($(grep -o 'ERROR: .*' "$W/nonet.log" | cut -c1-120)...)"
t=$(date +%s%N)
runinit install-runsc.sh
runinit configure-containerd.sh | tee "$W/configure.log"
grep -q "containerd's CRI on .* lists the runsc handler" "$W/configure.log" || { say "FAIL: configure-containerd did not see CRI list the runsc handler"; exit 1; }
say "configure-containerd: $(grep -o "containerd's CRI on .* lists the runsc handler" "$W/configure.log")"
say "init containers took $((($(date +%s%N) - t) / 1000000)) ms"
runinit ready.sh
say "ready.sh: ok"
REL=$IDIR/gvisor-releases/$TAG
say "installed: $("$REL/runsc" --version | head -n 1) (gVisor $TAG, $(awk '$1 == "layout" { print $2 }' "$IDIR/.gvisorgen-runsc.stamp") layout), shim $(sha512sum "$IDIR/containerd-shim-runsc-v1" | cut -c1-12)…"
if [ ! -x "$REL/runsc" ] || [ ! -x "$IDIR/containerd-shim-runsc-v1" ]; then say "FAIL: binaries not in $IDIR"; exit 1; fi
grep -q "^binary_name = \"$IDIR/gvisorgen-runsc\"$" /etc/containerd/runsc/runsc.toml || { say "FAIL: runsc.toml does not name $IDIR/gvisorgen-runsc"; exit 1; }
grep -q "^root = \"/run/gvisorgen/runsc/$TAG\"$" /etc/containerd/runsc/runsc.toml || { say "FAIL: runsc.toml does not name $TAG's state root"; exit 1; }
# where the installer put the runtime on this node: gvisorgen's drop-in (2.x with a config that imports conf.d:
# host24.toml) or the block in config.toml (the applied marker's mode line)
RT=$(awk '$1 == "mode" && $2 != "adopted" { print $3 }' /etc/containerd/config.toml.gvisorgen-applied)
case $V:$CFGV:$RT in
24:24:/etc/containerd/conf.d/gvisorgen-runsc.toml | *:16:/etc/containerd/config.toml | *:17:/etc/containerd/config.toml) say "the runtime is in $RT" ;;
*) say "FAIL: the runtime is in '$RT' (containerd $V, config host$CFGV.toml)"; exit 1 ;;
esac
if [ "$MODE" = offpath ]; then
	[ -z "$(ls -A /usr/local/bin)" ] || { say "FAIL: installed in /usr/local/bin: $(ls -A /usr/local/bin)"; exit 1; }
	grep -q "runtime_path = \"$IDIR/containerd-shim-runsc-v1\"" "$RT" || { say "FAIL: no runtime_path"; exit 1; }
	if [ "$CFGV" = 16 ]; then # a version 2 file: the absolute runtime_type 1.x needs, whichever version wrote it
		grep -q "runtime_type = \"$IDIR/containerd-shim-runsc-v1\"" "$RT" || { say "FAIL: no absolute runtime_type"; exit 1; }
	fi
fi

# a CRI pod with runtime handler runsc
crictl=$CRICTL
CR() { "$crictl" --runtime-endpoint "unix://$A" --image-endpoint "unix://$A" --timeout 60s "$@" 2> >(grep -v 'crictl.yaml' >&2); }
sed "s|@LOGDIR@|$R/podlogs|" "$REPO/ci/node/e2e/pod.json" >"$W/pod.json"
cid=$(timeout 120 "$crictl" --runtime-endpoint "unix://$A" --image-endpoint "unix://$A" --timeout 60s run --no-pull --runtime runsc "$REPO/ci/node/e2e/ctr.json" "$W/pod.json" 2>"$W/crictl.err") || {
	cat "$W/crictl.err"
	grep -E 'level=(error|warn)' "$R/containerd.log" | grep -vE 'devmapper|btrfs|zfs|aufs' | tail -8 | cut -c1-400
	exit 1
}
ok=
for _ in $(seq 1 150); do
	CR logs "$cid" >"$W/pod.log" 2>/dev/null || true
	# the container prints dmesg, then the sandbox's addresses: wait for both
	if grep -q "Starting gVisor" "$W/pod.log" && grep -q "inet 10\.244\.77\." "$W/pod.log"; then ok=1; break; fi
	sleep 0.2
done
sed -n '1,3s/^/  [pod] /p' "$W/pod.log"
[ -n "$ok" ] || { say "FAIL: the runsc pod did not log 'Starting gVisor' and its address (30 s)"; tail -20 "$R/containerd.log" | cut -c1-300; exit 1; }
say "CRI pod with runtime handler runsc logged 'Starting gVisor'"
# the sandbox's network: the CNI address containerd reports, and the same address seen inside the sandbox
pip=$(CR inspectp -o go-template --template '{{.status.network.ip}}' "$(CR pods -q | head -n 1)")
case $pip in 10.244.77.*) ;; *) say "FAIL: the pod has no CNI address (got '$pip')"; exit 1 ;; esac
grep -q "inet $pip/" "$W/pod.log" || { say "FAIL: the sandbox does not see its address $pip"; cat "$W/pod.log"; exit 1; }
say "pod network: CNI address $pip, inside the sandbox: $(grep -o "inet $pip/[0-9]*" "$W/pod.log")"
# runsc's log: which binary booted the sandbox
sl=$(grep -rhoE 'Sidecar "gvisor_sentry" (found|not usable)[^;]*' "$R/runsc" | head -n 1 || true)
say "runsc: ${sl:-no sidecar line}"
if [ "$TAG" != 20240212 ]; then
	case $sl in "Sidecar \"gvisor_sentry\" found: booting sandbox with $REL/gvisor-bin/gvisor_sentry") ;;
	*) say "FAIL: runsc did not boot with the installed $REL/gvisor-bin/gvisor_sentry"; exit 1 ;; esac
fi

# uninstall refuses while the sandbox exists, then removes everything once it is gone
if runinit uninstall.sh GVISOR_MODE=uninstall; then say "FAIL: uninstall did not refuse while a gVisor pod exists"; exit 1; fi
CR rmp -f -a >/dev/null
runinit uninstall.sh GVISOR_MODE=uninstall
cmp "$W/config.orig" /etc/containerd/config.toml || { say "FAIL: config not restored"; exit 1; }
[ -z "$(ls -A "$IDIR")" ] || { say "FAIL: left in $IDIR: $(ls -A "$IDIR")"; exit 1; }
runinit ready.sh GVISOR_MODE=uninstall
say "uninstall: refused while the pod ran, then removed everything; config byte-identical to the original"
