#!/bin/sh
# ci/cluster/down.sh W: stops the clusters a KEEP=1 run left running in scratch folder W (kills each node's PID 1,
# which takes every process of its namespaces down, then removes its cgroups).
set -u
W=${1:?usage: down.sh W}
for f in "$W"/c*/run/ns.pid; do
	[ -f "$f" ] || continue
	kill -9 "$(cat "$f")" 2>/dev/null
	rm -f "$f"
done
sleep 1
# this run's cgroups only (prepare.sh: gvisorgen-e2e-<V>-<the suffix of W's name>): another run may be up beside it
for d in /sys/fs/cgroup/*/gvisorgen-e2e-*-"${W##*.}"; do
	[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
done
left=$(find /sys/fs/cgroup/*/ -maxdepth 1 -name "gvisorgen-e2e-*-${W##*.}" 2>/dev/null)
[ -z "$left" ] || { echo "down: cgroups left: $left" >&2; exit 1; }
echo "down: stopped"
