#!/bin/sh
# Regenerates cue/cue.mod/gen from k8s.io/api with `cue get go`, then repairs the
# inline-embedded Go structs that cue v0.17.1 writes as named, required fields
# (TypeMeta, VolumeSource, ProbeHandler, LocalObjectReference, ...): without the
# repair, apiVersion/kind and e.g. volumes[].hostPath are rejected as "field not allowed".
set -eu
CUE=${CUE:-cue}
cd "$(dirname "$0")/../cue"
rm -rf cue.mod/gen
"$CUE" get go \
	k8s.io/api/core/v1 \
	k8s.io/api/apps/v1 \
	k8s.io/api/node/v1 \
	k8s.io/api/storage/v1 \
	k8s.io/api/rbac/v1
# A field whose name is the name of its own type is a Go embedding: embed it.
find cue.mod/gen -name '*.cue' -exec sed -i -E \
	's/^(\t+)([A-Z][A-Za-z0-9]*): (([a-z0-9]+\.)?#\2)( @.*)?$/\1\3/' {} +
if grep -rqE '^	+([A-Z][A-Za-z0-9]*): ([a-z0-9]+\.)?#\1( |$)' cue.mod/gen; then
	echo "schemas: unrepaired embedded fields remain" >&2
	exit 1
fi
