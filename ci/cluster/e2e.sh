#!/bin/sh
# ci/cluster/e2e.sh: the cluster end-to-end tests (make e2e-cluster; run ci/cluster/setup.sh first): prepares the
# scratch folder (ci/cluster/prepare.sh: gvisorgen, tlsmirror, images, mirror, test CA, tokens, each node's files),
# then runs the Go tests, go test -tags clustertest ./ci/cluster (see ci/cluster/README.md).
#
# Environment: GVZ_CLUSTER_VERSIONS ("16 17 24"), GVZ_CLUSTER_PARALLEL (clusters at once; default: all),
# GVZ_CLUSTER_SERIAL=1 (one version after the other: -parallel 1),
# GVZ_CLUSTER_RUN (go test -run pattern, e.g. 'TestUpgrade/c24'), KEEP=1 (leave the clusters running and the scratch
# folder in place; sh ci/cluster/down.sh W stops them), GVZ_CLUSTER_SKIP (go test -skip pattern; default '^Test(Flux|ArgoCD|Agent)':
# the Flux and Argo CD scenarios run in their own processes on fresh clusters, ci/cluster/e2e-flux.sh and
# e2e-argocd.sh). Extra arguments go to go test.
set -eu
cd "$(dirname "$0")/../.."
t0=$(date +%s)
W=$(mktemp -d /tmp/gvz-cluster.XXXXXX)
bash ci/cluster/prepare.sh "$W" || { rm -rf "$W"; exit 1; }
echo "cluster-e2e: prepared in $(($(date +%s) - t0))s"
# every version's cluster at once (GVZ_CLUSTER_PARALLEL, default: as many as versions): a scenario's steps mostly wait
# (rollouts, probe periods, kubelet's GC), and the next scenario starts when every version finished this one
par=${GVZ_CLUSTER_PARALLEL:-$(echo "${GVZ_CLUSTER_VERSIONS:-16 17 24}" | wc -w)}
[ -z "${GVZ_CLUSTER_SERIAL:-}" ] || par=1
# -timeout: explicit, the default 10 minutes must not cut a cold run (the test binary is built before it counts); 45
# minutes: the suites side by side on the slow kind of machine took up to ~17 minutes, with waits sized for it
GVZ_CLUSTER_WORK=$W exec ${GO:-go} test -tags clustertest -count=1 -v -timeout 45m -parallel "$par" \
	-run "${GVZ_CLUSTER_RUN:-.}" -skip "${GVZ_CLUSTER_SKIP-^Test(Flux|ArgoCD|Agent)}" "$@" ./ci/cluster
