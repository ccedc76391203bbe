#!/bin/sh
# Run the apiserver suite (tag apiserver) against the binaries that
# ci/k8s/build.sh cached: every generated object, the delivery objects (when
# delivery/ exists) and the mutation suite with its parity figures.
#
#   sh ci/k8s/build.sh && sh ci/apiserver/test.sh      (make e2e)
#
# A missing binary is a failure, never a skip. Extra `go test` flags may be
# passed, e.g. `sh ci/apiserver/test.sh -run TestAPIServer/generated`.
# APISERVER_PARITY=report prints the mutation table without failing on a
# parity mismatch; APISERVER_VERBOSE=1 logs every full message and
# APISERVER_REPORT=FILE writes the whole mutation report to FILE.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

bin=$(sh ci/k8s/build.sh --dir)
missing=0
for b in etcd kube-apiserver kubectl; do
	if [ ! -x "$bin/$b" ] || [ ! -f "$bin/.complete" ]; then
		echo "ci/apiserver/test.sh: missing $bin/$b: run sh ci/k8s/build.sh first" >&2
		missing=1
	fi
done
[ "$missing" = 0 ] || exit 1

t0=$(date +%s)
rc=0
GVISORGEN_K8S_BIN=$bin go test -tags apiserver -count=1 -timeout 20m -v "$@" ./ci/apiserver/... || rc=$?
echo "apiserver suite: $(($(date +%s) - t0))s (exit $rc)"
exit $rc
