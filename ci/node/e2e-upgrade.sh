#!/bin/bash
# ci/node/e2e-upgrade.sh: the upgrade run of ci/node/e2e.sh (MODE=upgrade), sourced inside the simulated node once its
# containerd runs, with e2e.sh's variables and runinit. A bump and a rollback across the widest gap there is, with
# sandboxes running across both, as a GitOps bump does it to a node:
#   20221219 (Debian's runsc, the 2022 shim) -> 20260905 (the current runsc and shim, archive layout) -> 20221219.
# Each step: the init containers run again (install-runsc, configure-containerd, ready.sh), containerd is not restarted,
# the pod started before the step still execs, takes a new container on its own release (gvisorgen-runsc), and stops
# and is removed cleanly, a new pod runs on the new release (its sandbox processes run from the new release's folder,
# and only the new release's runsc lists it), and the older release's folder goes at the installer's next run once its
# last pod is gone. Then uninstall removes everything.
# shellcheck shell=bash disable=SC2154 # A C CRICTL H IDIR R REPO W runinit come from e2e.sh

CR() { "$CRICTL" --runtime-endpoint "unix://$A" --image-endpoint "unix://$A" --timeout 60s "$@" 2> >(grep -v 'crictl.yaml' >&2); }
restarts() { grep -c '^systemctl restart' "$R/systemctl.log" || true; }
fail() {
	say "FAIL: $*" >&2
	grep -E 'level=(error|warn)' "$R/containerd.log" | grep -vE 'devmapper|btrfs|zfs|aufs' | tail -8 | cut -c1-400
	exit 1
}
floor() { case $1 in 20221219 | 20240212) echo "" ;; *) echo 1.7.0 ;; esac; }
# Debian's 2022 runsc cannot set up the sandbox network in this simulated node (a user namespace): "cannot run with
# network enabled in root network namespace"; the cluster suite runs it with network "none" too
toml() { if [ "$1" = 20221219 ]; then printf '%s\nnetwork = "none"' "$RUNSC_TOML"; else printf '%s' "$RUNSC_TOML"; fi; }

# deploy TAG: the DaemonSet's pod for TAG (the three containers), its logs kept as $W/<script>-<n>.log
n=0
deploy() {
	n=$((n + 1))
	local s
	for s in install-runsc configure-containerd ready; do
		runinit "$s.sh" "GVISOR_VERSION=$1" "CONTAINERD_MIN_VERSION=$(floor "$1")" "RUNSC_CONFIG_TOML=$(toml "$1")" >"$W/$s-$n.log" 2>&1 || {
			cat "$W/$s-$n.log"
			fail "$s.sh for $1"
		}
	done
}

# start NAME: a pod running a sleeper in gVisor; prints "<pod id> <container id>" once the sandbox logged its boot
start() {
	local p c
	mkdir -p "$R/podlogs/$1"
	sed "s|@LOGDIR@|$R/podlogs/$1|; s|gvisor-test|$1|g" "$REPO/ci/node/e2e/pod.json" >"$W/pod-$1.json"
	p=$(CR runp --runtime runsc "$W/pod-$1.json") || fail "pod $1 did not start"
	c=$(CR create "$p" "$REPO/ci/node/e2e/sleeper.json" "$W/pod-$1.json") || fail "container of pod $1 not created"
	CR start "$c" >/dev/null || fail "container of pod $1 did not start"
	for _ in $(seq 1 150); do
		grep -q "Starting gVisor" "$R/podlogs/$1/sleeper.log" 2>/dev/null && break
		sleep 0.2
	done
	grep -q "Starting gVisor" "$R/podlogs/$1/sleeper.log" || fail "pod $1 did not log 'Starting gVisor'"
	echo "$p $c"
}

# runs_on POD_ID TAG: the pod's sandbox processes run TAG's runsc (from its release folder), and TAG's runsc, asked in
# its own state root, lists the pod
runs_on() {
	local pid id f
	pid=$(CR inspectp -o go-template --template '{{.info.pid}}' "$1" 2>/dev/null || true)
	if [ -z "$pid" ] || [ "$pid" = 0 ]; then fail "no sandbox pid for pod $1"; fi
	# by device and inode: the exe link shows the path in the sandbox's own mount namespace
	id=$(stat -L -c %d:%i "/proc/$pid/exe")
	f=$(find "$IDIR/gvisor-releases/$2" -type f -exec stat -c '%d:%i %n' {} + | awk -v id="$id" '$1 == id { print $2; exit }')
	[ -n "$f" ] || fail "pod $1's sandbox (pid $pid) runs $(readlink "/proc/$pid/exe"), no file of gVisor $2's"
	lists "$2" "$1" || fail "gVisor $2's runsc does not list pod $1 in its state root (it lists: $(tr '\n' ' ' <<<"$LISTED"))"
	say "  pod ${1:0:12}: its sandbox (pid $pid) runs $f; gVisor $2's runsc lists it"
}

# lists TAG ID: TAG's runsc, asked in its own state root, lists the container ID (its list is left in LISTED). A
# here-string, not a pipe into grep -q: with pipefail, grep leaving early would fail the pipe.
LISTED=
lists() {
	LISTED=$("$IDIR/gvisor-releases/$1/runsc" --root "/run/gvisorgen/runsc/$1/k8s.io" list -quiet)
	grep -qx -- "$2" <<<"$LISTED"
}

alive() { # CONTAINER_ID WHAT
	[ "$(CR exec -s "$1" echo alive 2>&1)" = alive ] || fail "cannot exec in $2"
}

gone() { # POD_ID WHAT: stop and remove, as kubelet does when the pod is deleted
	timeout 90 "$CRICTL" --runtime-endpoint "unix://$A" --timeout 60s stopp "$1" >/dev/null 2>"$W/stopp.err" || { cat "$W/stopp.err"; fail "cannot stop $2"; }
	timeout 90 "$CRICTL" --runtime-endpoint "unix://$A" --timeout 60s rmp "$1" >/dev/null 2>"$W/rmp.err" || { cat "$W/rmp.err"; fail "cannot remove $2"; }
}

# joins POD_ID POD_NAME TAG CURRENT: a new container in a pod started on TAG before the node moved to CURRENT (a
# restarted container, a debug container): the shim reads the current runsc.toml for it, and gvisorgen-runsc runs it
# with TAG's runsc in TAG's state root, where its sandbox is. It starts, execs, and only TAG's runsc lists it.
joins() {
	local c
	c=$(CR create "$1" "$REPO/ci/node/e2e/sleeper-2.json" "$W/pod-$2.json" 2>"$W/join.err") || { cat "$W/join.err"; fail "a new container in pod $2 (on $3) was not created"; }
	CR start "$c" >/dev/null 2>>"$W/join.err" || { cat "$W/join.err"; fail "a new container in pod $2 (on $3) did not start"; }
	alive "$c" "the new container of pod $2"
	local i=1
	# seen once (stop 20's CI run) not listed right after it started: asked again, and said when that was needed
	until lists "$3" "$c"; do
		[ "$i" -lt 3 ] || fail "gVisor $3's runsc does not list the new container $c of pod $2 (it lists: $(tr '\n' ' ' <<<"$LISTED"); state files: $(find /run/gvisorgen/runsc -name '*.state' | tr '\n' ' '))"
		say "  (gVisor $3's runsc did not list the new container yet: $(tr '\n' ' ' <<<"$LISTED"); asking again)"
		i=$((i + 1))
		sleep 1
	done
	! lists "$4" "$c" || fail "gVisor $4's runsc lists the new container of pod $2, which joined a sandbox of $3"
	say "  pod ${1:0:12}: a new container ${c:0:12} started, execs, and is $3's"
}

releases() { find "$IDIR/gvisor-releases" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' ' | sed 's/ $//'; }

say "upgrade: 20221219 -> 20260905 -> 20221219 with pods running across each step"
deploy 20221219
r0=$(restarts)
read -r p1 c1 < <(start old-1) || true
[ -n "${c1:-}" ] || fail "pod old-1"
runs_on "$p1" 20221219

# the bump
deploy 20260905
[ "$(restarts)" = "$r0" ] || fail "the bump restarted containerd"
[ "$(releases)" = "20221219 20260905" ] || fail "releases after the bump: $(releases)"
grep -q "keeping $IDIR/gvisor-releases/20221219" "$W/install-runsc-2.log" || fail "install-runsc did not say it keeps 20221219"
alive "$c1" "the 2022 pod after the bump"
read -r p2 c2 < <(start new-1) || true
[ -n "${c2:-}" ] || fail "pod new-1"
runs_on "$p2" 20260905
runs_on "$p1" 20221219
say "bump: 0 containerd restarts; the 2022 pod execs; a new pod runs on 20260905; folders: $(releases)"
joins "$p1" old-1 20221219 20260905
say "bump: a new container in the 2022 pod runs on 20221219"
gone "$p1" "the 2022 pod after the bump"
say "bump: the 2022 pod stopped and was removed"
deploy 20260905
grep -q "removed $IDIR/gvisor-releases/20221219: no sandbox uses it any more" "$W/install-runsc-3.log" || { cat "$W/install-runsc-3.log"; fail "20221219 not collected"; }
[ "$(releases)" = 20260905 ] || fail "releases after the old pod went: $(releases)"
[ ! -e /run/gvisorgen/runsc/20221219 ] || fail "20221219's state root left"
say "bump: the next run removed 20221219 (folder and state root)"

# the rollback
deploy 20221219
[ "$(restarts)" = "$r0" ] || fail "the rollback restarted containerd"
[ "$(releases)" = "20221219 20260905" ] || fail "releases after the rollback: $(releases)"
alive "$c2" "the 20260905 pod after the rollback"
joins "$p2" new-1 20260905 20221219
read -r p3 c3 < <(start old-2) || true
[ -n "${c3:-}" ] || fail "pod old-2"
runs_on "$p3" 20221219
runs_on "$p2" 20260905
gone "$p2" "the 20260905 pod after the rollback"
deploy 20221219
grep -q "removed $IDIR/gvisor-releases/20260905: no sandbox uses it any more" "$W/install-runsc-5.log" || { cat "$W/install-runsc-5.log"; fail "20260905 not collected"; }
[ "$(releases)" = 20221219 ] || fail "releases after the newer pod went: $(releases)"
say "rollback: 0 containerd restarts; the 20260905 pod execs, takes a new container on 20260905, stops and is removed; a new pod runs on 20221219; the next run removed 20260905"

gone "$p3" "the last pod"
runinit uninstall.sh GVISOR_MODE=uninstall >"$W/uninstall.log" 2>&1 || { cat "$W/uninstall.log"; fail "uninstall"; }
cmp -s "$W/config.orig" /etc/containerd/config.toml || fail "config not restored"
[ -z "$(ls -A "$IDIR")" ] || fail "left in $IDIR: $(ls -A "$IDIR")"
[ ! -e /run/gvisorgen/runsc ] || fail "state roots left: $(find /run/gvisorgen/runsc | head)"
say "uninstall: every release and the shim removed, config byte-identical to the original"
