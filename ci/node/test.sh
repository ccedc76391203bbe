#!/bin/sh
# ci/node/test.sh: the node-installer test suite (make test-node runs ci/node/setup.sh first).
#  1. shellcheck -s sh on every cue/installer/*.sh (following lib.sh);
#  2. a ban on `wget -T` / `wget --timeout` (busybox 1.35's wget segfaults on it: use `timeout N wget`);
#  3. go test -tags nodetest ./ci/node/... : the real scripts under busybox sh against fake hosts, configs checked
#     by real containerd 1.6 (Debian, /usr/bin/containerd), 1.7 and 2.4.2 (built by setup.sh).
# Missing tools fail the run; nothing is skipped.
set -eu
cd "$(dirname "$0")/../.."
CONTAINERD24_VERSION=v2.4.2
CONTAINERD22_VERSION=v2.2.9
CONTAINERD23_VERSION=v2.3.4
now() { date +%s; }
t_all=$(now)

t=$(now)
command -v shellcheck >/dev/null || { echo "test-node: FAIL: shellcheck is not installed (run ci/node/setup.sh)" >&2; exit 1; }
scripts=$(ls cue/installer/*.sh)
[ -n "$scripts" ] || { echo "test-node: FAIL: no scripts in cue/installer" >&2; exit 1; }
# shellcheck disable=SC2086 # list of files
shellcheck -s sh -x $scripts
echo "test-node: shellcheck ok ($(echo "$scripts" | wc -l) scripts) in $(($(now) - t))s"

# wget_T_lines FILE... : lines that call wget with -T or --timeout (comments ignored).
wget_T_lines() {
	grep -nE '^[^#]*wget([[:space:]]+[^|;&#]*)?[[:space:]](-[A-Za-z]*T|--timeout)' "$@" || true
}
probe=$(mktemp)
# shellcheck disable=SC2016 # a literal example line
printf 'x=$(wget -q -T 5 -O f u)\n' >"$probe"
[ -n "$(wget_T_lines "$probe")" ] || { rm -f "$probe"; echo "test-node: FAIL: the wget -T ban does not catch its own example" >&2; exit 1; }
printf 'timeout 5 wget -q -O f u\n' >"$probe"
[ -z "$(wget_T_lines "$probe")" ] || { rm -f "$probe"; echo "test-node: FAIL: the wget -T ban flags timeout N wget" >&2; exit 1; }
rm -f "$probe"
# shellcheck disable=SC2086 # list of files
bad=$(wget_T_lines $scripts)
if [ -n "$bad" ]; then
	echo "test-node: FAIL: busybox wget -T segfaults; use 'timeout N wget':" >&2
	echo "$bad" >&2
	exit 1
fi
echo "test-node: no wget -T"

CONTAINERD16=${CONTAINERD16:-/usr/bin/containerd}
CONTAINERD24=${CONTAINERD24:-${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-$CONTAINERD24_VERSION/containerd}
CONTAINERD22=${CONTAINERD22:-${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-$CONTAINERD22_VERSION/containerd}
CONTAINERD23=${CONTAINERD23:-${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/containerd-$CONTAINERD23_VERSION/containerd}
CONTAINERD17=${CONTAINERD17:-$(sh ci/containerd17/build.sh --dir)/containerd}
CRICTL=${CRICTL:-$(sh ci/node/crictl.sh --path)}
export CONTAINERD16 CONTAINERD17 CONTAINERD22 CONTAINERD23 CONTAINERD24 CRICTL
t=$(now)
# -parallel 4: every test runs in parallel (each on its own fake hosts); half of a test's time is waiting (containerd
# starting, a lock, a timeout), so twice the cores keeps both busy: 395 s against 530 s with -parallel 2 (2026-12-04)
go test -tags nodetest -count=1 -parallel 4 -timeout 25m ./ci/node/... "$@"
echo "test-node: go test in $(($(now) - t))s; total $(($(now) - t_all))s"
