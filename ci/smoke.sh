#!/bin/sh
# ci/smoke.sh TARGET — does a runtimeClassName: gvisor pod really run in gVisor on this cluster?
#
# Runs against whatever cluster kubectl points at (KUBECONFIG, current context). It applies the
# generated smoke manifests of TARGET (smoke/TARGET/*.yaml: the Namespace first, then the rest:
# a PersistentVolumeClaim when the target's StorageClass is smoke-tested, and the Pod), waits
# until the pod has finished, and reads its logs, which are the output of `dmesg`:
#   PASS  the logs show gVisor's kernel log ("[    0.000000] Starting gVisor...");
#   FAIL  they look like the node's real kernel ("Linux version ...", or "read kernel buffer
#         failed: Operation not permitted"): the pod ran on the host kernel, not in gVisor;
#   FAIL  anything else, or the pod did not finish in time, or a PVC is not Bound.
# The namespace is deleted on exit (KEEP=1 keeps it for a look).
#
#   ci/smoke.sh --gate TARGET   decides whether the CI leg of TARGET can run (see gate below)
#
# Exit: 0 pass; 1 fail; 2 usage or setup error.
#
# Environment:
#   SMOKE_DIR               manifests folder (default smoke/TARGET)
#   SMOKE_NAMESPACE         namespace of the smoke objects (default gvisor-smoke)
#   SMOKE_POD, SMOKE_PVC    object names (default gvisor-smoke)
#   SMOKE_POD_TIMEOUT       seconds for the pod to finish (default 300; image pull included)
#   SMOKE_PVC_TIMEOUT       seconds for the PVC to be Bound once the pod is done (default 120)
#   SMOKE_DELETE_TIMEOUT    seconds to wait for a leftover namespace to go (default 180)
#   SMOKE_POLL_INTERVAL     seconds between polls (default 5)
#   KEEP=1                  do not delete the namespace at the end
#   KUBECTL                 kubectl command (default kubectl)
set -eu

KUBECTL=${KUBECTL:-kubectl}

# ci annotations show in GitHub's UI; elsewhere they are plain lines.
in_actions() { [ "${GITHUB_ACTIONS:-}" = true ]; }
group() { if in_actions; then echo "::group::$*"; else echo "----- $*"; fi; }
endgroup() { if in_actions; then echo "::endgroup::"; fi; }
fail() {
	if in_actions; then echo "::error title=gvisor smoke ($TARGET)::$*"; fi
	echo "FAIL: smoke $TARGET: $*" >&2
	summary "FAIL: $*"
	exit 1
}
summary() {
	if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
		# shellcheck disable=SC2016 # the backquotes are markdown
		printf '**gvisor smoke `%s`**: %s\n\n' "$TARGET" "$*" >>"$GITHUB_STEP_SUMMARY"
	fi
}
usage() {
	echo "usage: ci/smoke.sh TARGET        (manifests from \${SMOKE_DIR:-smoke/TARGET})" >&2
	echo "       ci/smoke.sh --gate TARGET (CI: may the leg of TARGET run here?)" >&2
	exit 2
}
is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; esac }
now() { date +%s; }

# gate TARGET: writes enabled=true|false (and auth=wif|key for gke) to $GITHUB_OUTPUT, or to
# stdout outside Actions. kind always runs. gke runs only with cloud credentials: the project
# (GCP_PROJECT_ID) plus Workload Identity Federation (GCP_WORKLOAD_IDENTITY_PROVIDER and
# GCP_SERVICE_ACCOUNT, and an OIDC token, which a fork's pull request does not get) or the
# fallback key (HAVE_GCP_SA_KEY=true, or GCP_SA_KEY non-empty); without them the leg is skipped
# with a warning. Credentials without GKE_CLUSTER and GKE_LOCATION are a configuration error.
# eks runs with an IAM role for GitHub's OIDC (AWS_ROLE_ARN, AWS_REGION) and EKS_CLUSTER; aks with an Entra
# app's federated credential (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_SUBSCRIPTION_ID), AKS_RESOURCE_GROUP and
# AKS_CLUSTER. Both need the OIDC token a fork's pull request does not get; credentials without the cluster's
# names are a configuration error, as for gke.
gate() {
	out=${GITHUB_OUTPUT:-/dev/stdout}
	case $1 in
	gke)
		auth=
		if [ -n "${GCP_WORKLOAD_IDENTITY_PROVIDER:-}" ] && [ -n "${GCP_SERVICE_ACCOUNT:-}" ] &&
			[ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ]; then
			auth=wif
		elif [ "${HAVE_GCP_SA_KEY:-}" = true ] || [ -n "${GCP_SA_KEY:-}" ]; then
			auth=key
		fi
		missing=
		[ -n "${GCP_PROJECT_ID:-}" ] || missing="GCP_PROJECT_ID"
		[ -n "$auth" ] || missing="${missing:+$missing and }GCP_SA_KEY (or Workload Identity Federation: vars GCP_WORKLOAD_IDENTITY_PROVIDER, GCP_SERVICE_ACCOUNT and id-token: write)"
		if [ -n "$missing" ]; then
			echo "::warning title=gcp-standard-rwo skipped::GKE smoke leg skipped: $missing not set (secrets are not given to pull requests from forks)"
			echo "enabled=false" >>"$out"
			return 0
		fi
		for v in GKE_CLUSTER GKE_LOCATION; do
			eval "val=\${$v:-}"
			# shellcheck disable=SC2154 # val is set by eval
			if [ -z "$val" ]; then
				echo "::error title=gcp-standard-rwo misconfigured::GCP credentials are set but the repository variable $v is not: set GKE_CLUSTER and GKE_LOCATION (the test cluster's name and location)"
				return 1
			fi
		done
		echo "GKE smoke leg enabled: cluster $GKE_CLUSTER in $GKE_LOCATION, project $GCP_PROJECT_ID, auth $auth"
		{
			echo "enabled=true"
			echo "auth=$auth"
		} >>"$out"
		;;
	eks) oidc_leg eks "AWS_ROLE_ARN AWS_REGION" "EKS_CLUSTER" "$out" ;;
	aks) oidc_leg aks "AZURE_CLIENT_ID AZURE_TENANT_ID AZURE_SUBSCRIPTION_ID" "AKS_RESOURCE_GROUP AKS_CLUSTER" "$out" ;;
	k3s) kubeconfig_leg k3s HAVE_K3S_KUBECONFIG K3S_KUBECONFIG "$out" ;;
	rke2) kubeconfig_leg rke2 HAVE_RKE2_KUBECONFIG RKE2_KUBECONFIG "$out" ;;
	kind)
		echo "enabled=true" >>"$out"
		;;
	*)
		echo "::error title=no smoke leg::no smoke leg for target $1: add one to .github/workflows/gvisor-smoke.yml and a gate here"
		return 1
		;;
	esac
}

# oidc_leg LEG CREDS CLUSTER OUT: a cloud leg that authenticates with GitHub's OIDC token. Without the credential
# variables (or the token) it is skipped with a warning; with them but without the cluster's names it is an error.
oidc_leg() {
	leg=$1 creds=$2 cluster=$3 out=$4 missing=
	for v in $creds; do
		eval "val=\${$v:-}"
		[ -n "$val" ] || missing="${missing:+$missing, }$v"
	done
	[ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || missing="${missing:+$missing, }an OIDC token (id-token: write)"
	if [ -n "$missing" ]; then
		echo "::warning title=$leg skipped::$leg smoke leg skipped: $missing not set (secrets and OIDC tokens are not given to pull requests from forks)"
		echo "enabled=false" >>"$out"
		return 0
	fi
	for v in $cluster; do
		eval "val=\${$v:-}"
		if [ -z "$val" ]; then
			echo "::error title=$leg misconfigured::$leg credentials are set but the repository variable $v is not: set $cluster"
			return 1
		fi
	done
	echo "$leg smoke leg enabled"
	echo "enabled=true" >>"$out"
}

# kubeconfig_leg LEG HAVE SECRET OUT: a self-hosted cluster's leg (k3s, RKE2), reached with a kubeconfig kept in the
# repository secret SECRET (the workflow passes only whether it is set, as HAVE=true). Without it the leg is skipped
# with a warning.
kubeconfig_leg() {
	eval "have=\${$2:-}"
	# shellcheck disable=SC2154 # have is set by eval
	if [ "$have" != true ]; then
		echo "::warning title=$1 skipped::$1 smoke leg skipped: the secret $3 (a kubeconfig of your $1 test cluster) is not set (secrets are not given to pull requests from forks)"
		echo "enabled=false" >>"$4"
		return 0
	fi
	echo "$1 smoke leg enabled"
	echo "enabled=true" >>"$4"
}

if [ "${1:-}" = --gate ]; then
	[ $# -eq 2 ] || usage
	gate "$2"
	exit $?
fi

[ $# -eq 1 ] || usage
TARGET=$1
case $TARGET in '' | -*) usage ;; esac

SMOKE_DIR=${SMOKE_DIR:-smoke/$TARGET}
NS=${SMOKE_NAMESPACE:-gvisor-smoke}
POD=${SMOKE_POD:-gvisor-smoke}
PVC=${SMOKE_PVC:-gvisor-smoke}
POD_TIMEOUT=${SMOKE_POD_TIMEOUT:-300}
PVC_TIMEOUT=${SMOKE_PVC_TIMEOUT:-120}
DELETE_TIMEOUT=${SMOKE_DELETE_TIMEOUT:-180}
POLL=${SMOKE_POLL_INTERVAL:-5}
KEEP=${KEEP:-0}
for v in "$POD_TIMEOUT" "$PVC_TIMEOUT" "$DELETE_TIMEOUT" "$POLL"; do
	is_uint "$v" || {
		echo "smoke: timeouts and SMOKE_POLL_INTERVAL are whole seconds, got '$v'" >&2
		exit 2
	}
done

# The manifests: one Namespace file, a Pod file, maybe PVC files. Anything missing is a setup
# error (exit 2), not a failed smoke test.
if [ ! -d "$SMOKE_DIR" ]; then
	echo "smoke: no folder $SMOKE_DIR: the smoke manifests of target '$TARGET' are generated by 'make generate' (set SMOKE_DIR to use another folder)" >&2
	exit 2
fi
ns_files=
other_files=
has_pod=false
has_pvc=false
for f in "$SMOKE_DIR"/*.yaml; do
	[ -f "$f" ] || continue
	case ${f##*/} in
	namespace-*) ns_files="$ns_files $f" ;;
	*)
		other_files="$other_files $f"
		case ${f##*/} in
		pod-*) has_pod=true ;;
		persistentvolumeclaim-*) has_pvc=true ;;
		esac
		;;
	esac
done
if [ -z "$ns_files" ] || [ "$has_pod" != true ]; then
	echo "smoke: $SMOKE_DIR must hold a namespace-*.yaml and a pod-*.yaml" >&2
	exit 2
fi

cleanup() {
	rc=$?
	trap - EXIT
	if [ "$KEEP" = 1 ]; then
		echo "KEEP=1: namespace $NS is left in place; delete it with: $KUBECTL delete namespace $NS"
	else
		"$KUBECTL" delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1 ||
			echo "smoke: could not delete namespace $NS" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

dump() {
	group "pod $NS/$POD"
	"$KUBECTL" -n "$NS" describe pod "$POD" 2>&1 || true
	endgroup
	group "events in $NS"
	"$KUBECTL" -n "$NS" get events --sort-by=.lastTimestamp 2>&1 || true
	endgroup
	group "logs of $NS/$POD"
	"$KUBECTL" -n "$NS" logs "pod/$POD" --all-containers 2>&1 || true
	endgroup
	if [ "$has_pvc" = true ]; then
		group "pvc $NS/$PVC"
		"$KUBECTL" -n "$NS" describe pvc "$PVC" 2>&1 || true
		endgroup
	fi
}

# A pod spec is immutable: a namespace left by an earlier run (KEEP=1, a killed job) goes first.
if "$KUBECTL" get namespace "$NS" >/dev/null 2>&1; then
	echo "smoke: deleting the leftover namespace $NS of an earlier run"
	"$KUBECTL" delete namespace "$NS" --ignore-not-found --wait=true --timeout="${DELETE_TIMEOUT}s"
fi

echo "smoke: applying $SMOKE_DIR (target $TARGET)"
# shellcheck disable=SC2086 # the lists are space-separated paths of generated files
for f in $ns_files $other_files; do
	"$KUBECTL" apply -f "$f"
done

echo "smoke: waiting up to ${POD_TIMEOUT}s for pod $NS/$POD to finish"
deadline=$(($(now) + POD_TIMEOUT))
phase=
while :; do
	phase=$("$KUBECTL" -n "$NS" get pod "$POD" -o 'jsonpath={.status.phase}' 2>/dev/null) || phase=
	case $phase in Succeeded | Failed) break ;; esac
	if [ "$(now)" -ge "$deadline" ]; then
		dump
		fail "pod $NS/$POD did not finish within ${POD_TIMEOUT}s (phase '${phase:-unknown}'): see the events above (image pull, scheduling onto a node with runsc, an unbound PVC); raise SMOKE_POD_TIMEOUT if the cluster is just slow"
	fi
	sleep "$POLL"
done

logs=$("$KUBECTL" -n "$NS" logs "pod/$POD" 2>&1) || {
	dump
	fail "could not read the logs of pod $NS/$POD (phase $phase)"
}
group "dmesg in pod $NS/$POD (phase $phase)"
printf '%s\n' "$logs"
endgroup

host_kernel() {
	rc=$("$KUBECTL" -n "$NS" get pod "$POD" -o 'jsonpath={.spec.runtimeClassName}' 2>/dev/null) || rc=
	node=$("$KUBECTL" -n "$NS" get pod "$POD" -o 'jsonpath={.spec.nodeName}' 2>/dev/null) || node=
	dump
	fail "the pod ran on the host kernel, not in gVisor: its dmesg is the node's real kernel log (runtimeClassName '${rc:-<none>}', node '${node:-?}'). Either the pod has no runtimeClassName: gvisor, or the RuntimeClass's handler 'runsc' on that node is not gVisor (check the runsc-installer pod on the node and containerd's runtimes.runsc)"
}
# The node's kernel: its banner, or util-linux/busybox dmesg refused by the host (no CAP_SYSLOG).
if printf '%s\n' "$logs" | grep -Eq 'Linux version [0-9]|read kernel buffer failed|klogctl'; then
	host_kernel
fi
if ! printf '%s\n' "$logs" | grep -Eq '^(<[0-9]+>)?\[ *[0-9]+\.[0-9]+\] Starting gVisor'; then
	dump
	fail "the pod's logs do not show gVisor's dmesg ('[    0.000000] Starting gVisor...'); phase $phase"
fi
if [ "$phase" != Succeeded ]; then
	dump
	fail "the pod ran in gVisor but ended $phase (a non-zero exit: see its logs above)"
fi
echo "smoke: pod $NS/$POD ran in gVisor"

if [ "$has_pvc" = true ]; then
	echo "smoke: waiting up to ${PVC_TIMEOUT}s for pvc $NS/$PVC to be Bound"
	deadline=$(($(now) + PVC_TIMEOUT))
	while :; do
		pvc_phase=$("$KUBECTL" -n "$NS" get pvc "$PVC" -o 'jsonpath={.status.phase}' 2>/dev/null) || pvc_phase=
		[ "$pvc_phase" = Bound ] && break
		if [ "$(now)" -ge "$deadline" ]; then
			sc=$("$KUBECTL" -n "$NS" get pvc "$PVC" -o 'jsonpath={.spec.storageClassName}' 2>/dev/null) || sc=
			dump
			fail "pvc $NS/$PVC is '${pvc_phase:-missing}', not Bound, after ${PVC_TIMEOUT}s: StorageClass '${sc:-?}' did not provision a volume (is its CSI driver installed? see the events above)"
		fi
		sleep "$POLL"
	done
	echo "smoke: pvc $NS/$PVC is Bound"
fi

result="a runtimeClassName: gvisor pod ran in gVisor"
[ "$has_pvc" = true ] && result="$result and its PVC on the target's StorageClass is Bound"
echo "PASS: smoke $TARGET: $result"
summary "PASS: $result"
