#!/bin/sh
# ci/cluster/e2e-flux.sh: the Flux scenarios (make e2e-flux; run ci/cluster/setup.sh first): Flux's own
# source-controller and kustomize-controller (ci/flux/build.sh, cached) reconcile the committed e2e target from a git
# repository served over HTTP into fresh clusters (containerd 1.6 and 2.4.2 by default). Same harness and package as
# make e2e-cluster (ci/cluster/e2e.sh), its own go test process: TestClusterUp, the TestFlux* scenarios, then the
# machine check. See ci/cluster/README.md, "Flux".
#
# Environment: as e2e.sh; GVZ_CLUSTER_VERSIONS defaults to "16 24", GVZ_CLUSTER_RUN to the tests above.
set -eu
cd "$(dirname "$0")/../.."
now() { date +%s; }
t=$(now)
sh ci/flux/build.sh
# the OCI scenario's registry: the Distribution project's, built from its module (cached)
sh ci/registry/build.sh
echo "e2e-flux: Flux's controllers and the registry ready in $(($(now) - t))s"
GVZ_CLUSTER_VERSIONS=${GVZ_CLUSTER_VERSIONS:-16 24} \
	GVZ_CLUSTER_RUN=${GVZ_CLUSTER_RUN:-'^(TestClusterUp|TestFlux.*|TestMachineFilesUnchanged)$'} \
	GVZ_CLUSTER_SKIP='' exec sh ci/cluster/e2e.sh "$@"
