#!/bin/sh
# ci/cluster/e2e-agents.sh: the agent-sandbox scenarios (make e2e-agents; run ci/cluster/setup.sh first): SIG Apps'
# agent-sandbox controller (ci/agentsandbox/build.sh, cached) runs warm pools, claims and sandboxes on a sandbox class
# of the product's in a fresh cluster (containerd 2.4.2 by default). Same harness and package as make e2e-cluster
# (ci/cluster/e2e.sh), its own go test process: TestClusterUp, then the TestAgent* scenarios. See ci/cluster/README.md,
# "Agent sandboxes".
#
# Environment: as e2e.sh; GVZ_CLUSTER_VERSIONS defaults to "24", GVZ_CLUSTER_RUN to the tests above.
set -eu
cd "$(dirname "$0")/../.."
now() { date +%s; }
t=$(now)
sh ci/agentsandbox/build.sh
echo "e2e-agents: agent-sandbox's controller ready in $(($(now) - t))s"
GVZ_CLUSTER_VERSIONS=${GVZ_CLUSTER_VERSIONS:-24} \
	GVZ_CLUSTER_RUN=${GVZ_CLUSTER_RUN:-'^(TestClusterUp|TestAgent.*)$'} \
	GVZ_CLUSTER_SKIP='' exec sh ci/cluster/e2e.sh "$@"
