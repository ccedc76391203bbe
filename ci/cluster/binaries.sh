#!/bin/sh
# ci/cluster/binaries.sh DIR: the three programs of the cluster suites, built into DIR: gvisorgen (the product under
# test), tlsmirror (the nodes' HTTPS mirror) and cluster.test (the suite, go test -c -tags clustertest ./ci/cluster).
# The one home of how they are built. make e2e-together builds them once for its four suites (GVZ_CLUSTER_BIN names
# the folder: each suite linking its own three cost ~40 s of CPU on the slow kind of machine, 2026-12-07); a suite
# run alone (ci/cluster/e2e.sh, or go test) builds them into its scratch folder (prepare.sh).
set -eu
D=${1:?usage: binaries.sh DIR}
cd "$(dirname "$0")/../.."
GO=${GO:-go}
mkdir -p "$D"
# The caller's GOFLAGS kept (the Makefile's -trimpath -ldflags=-w): replaced, as it was, every suite of a fresh clone
# compiled the module's own packages again (the checkout's folder is in the build cache's keys without -trimpath).
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
"$GO" build -o "$D/gvisorgen" ./cmd/gvisorgen
"$GO" build -o "$D/tlsmirror" ./ci/cluster/tlsmirror
"$GO" test -c -tags clustertest -o "$D/cluster.test" ./ci/cluster
