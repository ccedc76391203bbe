#!/bin/sh
# ci/cluster/e2e.sh: the cluster end-to-end tests (make e2e-cluster; run ci/cluster/setup.sh first): prepares the
# scratch folder (ci/cluster/prepare.sh: gvisorgen, tlsmirror, images, mirror, test CA, tokens, each node's files),
# then runs the Go tests: the test binary of go test -tags clustertest ./ci/cluster (ci/cluster/binaries.sh; see
# ci/cluster/README.md).
#
# Environment: GVZ_CLUSTER_VERSIONS ("16 17 24"), GVZ_CLUSTER_PARALLEL (clusters at once; default: all),
# GVZ_CLUSTER_SERIAL=1 (one version after the other: -parallel 1),
# GVZ_CLUSTER_RUN (go test -run pattern, e.g. 'TestUpgrade/c24'), KEEP=1 (leave the clusters running and the scratch
# folder in place; sh ci/cluster/down.sh W stops them), GVZ_CLUSTER_SKIP (go test -skip pattern; default '^Test(Flux|ArgoCD|Agent)':
# the Flux and Argo CD scenarios run in their own processes on fresh clusters, ci/cluster/e2e-flux.sh and
# e2e-argocd.sh), GVZ_CLUSTER_BIN (a folder ci/cluster/binaries.sh filled: gvisorgen, tlsmirror and the test binary;
# default: built into the scratch folder). Extra arguments go to the test binary (-test.run=…, -test.short).
set -eu
cd "$(dirname "$0")/../.."
t0=$(date +%s)
# the versions of this run, for prepare.sh and the test alike
GVZ_CLUSTER_VERSIONS=${GVZ_CLUSTER_VERSIONS:-16 17 24}
export GVZ_CLUSTER_VERSIONS
W=$(mktemp -d /tmp/gvz-cluster.XXXXXX)
bash ci/cluster/prepare.sh "$W" || { rm -rf "$W"; exit 1; }
echo "cluster-e2e: prepared in $(($(date +%s) - t0))s"
# every version's cluster at once (GVZ_CLUSTER_PARALLEL, default: as many as versions): a scenario's steps mostly wait
# (rollouts, probe periods, kubelet's GC), and the next scenario starts when every version finished this one
par=${GVZ_CLUSTER_PARALLEL:-$(echo "$GVZ_CLUSTER_VERSIONS" | wc -w)}
[ -z "${GVZ_CLUSTER_SERIAL:-}" ] || par=1
# the suite's test binary: make e2e-together's (GVZ_CLUSTER_BIN, built once for its suites), or the one prepare.sh
# built into W/bin; run in its package's folder, as go test runs it. -test.timeout: explicit, 45 minutes: the suites
# side by side on the slow kind of machine took up to ~17 minutes, with waits sized for it
bin=${GVZ_CLUSTER_BIN:-$W/bin}
cd ci/cluster
GVZ_CLUSTER_WORK=$W exec "$bin/cluster.test" -test.count=1 -test.v -test.timeout 45m -test.parallel "$par" \
	-test.run "${GVZ_CLUSTER_RUN:-.}" -test.skip "${GVZ_CLUSTER_SKIP-^Test(Flux|ArgoCD|Agent)}" "$@"
