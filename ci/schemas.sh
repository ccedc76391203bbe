#!/bin/sh
# Regenerates cue/cue.mod/gen: the Kubernetes types from k8s.io/api with
# `cue get go`, and the Argo CD and Flux types from their CRDs (`cue get crd`;
# `cue get go` of Argo CD's Go types does not build here). Then it repairs the
# inline-embedded Go structs that cue v0.17.1 writes as named, required fields
# (TypeMeta, VolumeSource, ProbeHandler, LocalObjectReference, ...): without the
# repair, apiVersion/kind and e.g. volumes[].hostPath are rejected as "field not allowed".
# Last, ci/schemaprune keeps only the top-level declarations that cue/*.cue reach
# (every process parses and compiles cue.mod/gen at start-up): a module file that
# starts using another definition needs `make schemas` again.
set -eu
CUE=${CUE:-cue}
GO=${GO:-go}
# CRD sources: module zips from the Go module proxy (the newest releases that
# the local Go accepts).
ARGOCD=github.com/argoproj/argo-cd/v3@v3.5.7
FLUX_SOURCE=github.com/fluxcd/source-controller@v1.9.6
FLUX_KUSTOMIZE=github.com/fluxcd/kustomize-controller@v1.9.6
cd "$(dirname "$0")/../cue"
moddir() { "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'; }
rm -rf cue.mod/gen
"$CUE" get go \
	k8s.io/api/core/v1 \
	k8s.io/api/apps/v1 \
	k8s.io/api/node/v1 \
	k8s.io/api/storage/v1 \
	k8s.io/api/rbac/v1 \
	k8s.io/api/admissionregistration/v1
# A field whose name is the name of its own type is a Go embedding: embed it.
find cue.mod/gen -name '*.cue' -exec sed -i -E \
	's/^(\t+)([A-Z][A-Za-z0-9]*): (([a-z0-9]+\.)?#\2)( @.*)?$/\1\3/' {} +
if grep -rqE '^	+([A-Z][A-Za-z0-9]*): ([a-z0-9]+\.)?#\1( |$)' cue.mod/gen; then
	echo "schemas: unrepaired embedded fields remain" >&2
	exit 1
fi

# crd GROUP VERSION FILE...: one package per group and version, imported as
# "GROUP/VERSION" like the Kubernetes ones.
crd() {
	group=$1 version=$2
	shift 2
	tmp=$(mktemp -d)
	(cd "$tmp" && "$CUE" mod init crd.local@v0 >/dev/null && "$CUE" get crd --group "$group" "$@" >/dev/null)
	mkdir -p "cue.mod/gen/$group"
	mv "$tmp/$version" "cue.mod/gen/$group/$version"
	rm -rf "$tmp"
}
argo=$(moddir "$ARGOCD")/manifests/crds
source=$(moddir "$FLUX_SOURCE")/config/crd/bases
kust=$(moddir "$FLUX_KUSTOMIZE")/config/crd/bases
crd argoproj.io v1alpha1 "$argo/application-crd.yaml" "$argo/applicationset-crd.yaml" "$argo/appproject-crd.yaml"
crd source.toolkit.fluxcd.io v1 "$source/source.toolkit.fluxcd.io_gitrepositories.yaml" "$source/source.toolkit.fluxcd.io_ocirepositories.yaml"
crd kustomize.toolkit.fluxcd.io v1 "$kust/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
# Keep only what the module reaches (run from the repository root: the pruner is
# a package of the main Go module).
(cd .. && "$GO" run ./ci/schemaprune cue)
