// Package cluster holds the end-to-end tests of the product on a real single-node Kubernetes cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and containerd 1.6 or 2.4.2 on one simulated node).
//
// The tests carry the build tag clustertest and run through ci/cluster/e2e.sh (make e2e-cluster), which prepares the
// scratch folder (ci/cluster/prepare.sh) first; ci/cluster/node.sh is each node's PID 1. See README.md.
package cluster
