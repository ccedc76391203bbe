#!/bin/sh
# ci/cluster/e2e-argocd.sh: the Argo CD scenarios (make e2e-argocd; run ci/cluster/setup.sh first): Argo CD's own
# application-controller, repo-server and applicationset-controller (ci/argocd/build.sh, cached) and Debian's redis
# sync the committed e2e target from a git repository served over HTTP into a fresh cluster (containerd 2.4.2 by
# default). Same harness and package as make e2e-cluster (ci/cluster/e2e.sh), its own go test process: TestClusterUp,
# the TestArgoCD* scenarios, then the machine check. See ci/cluster/README.md, "Argo CD".
#
# Environment: as e2e.sh; GVZ_CLUSTER_VERSIONS defaults to "24", GVZ_CLUSTER_RUN to the tests above; KUSTOMIZE (the
# kustomize the repo-server runs; make e2e-argocd passes the Makefile's).
set -eu
cd "$(dirname "$0")/../.."
now() { date +%s; }
t=$(now)
if [ -z "${KUSTOMIZE:-}" ] || [ ! -x "$KUSTOMIZE" ]; then
	echo "e2e-argocd: KUSTOMIZE must name a kustomize binary (make e2e-argocd sets it)" >&2
	exit 1
fi
export KUSTOMIZE
sh ci/argocd/build.sh
echo "e2e-argocd: Argo CD ready in $(($(now) - t))s"
GVZ_CLUSTER_VERSIONS=${GVZ_CLUSTER_VERSIONS:-24} \
	GVZ_CLUSTER_RUN=${GVZ_CLUSTER_RUN:-'^(TestClusterUp|TestArgoCD.*|TestMachineFilesUnchanged)$'} \
	GVZ_CLUSTER_SKIP='' exec sh ci/cluster/e2e.sh "$@"
