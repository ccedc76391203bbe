#!/bin/sh
# ci/drift.sh — the drift gate: is the committed tree exactly what `make generate` writes?
#
# Builds gvisorgen, asks `gvisorgen check` for its report (stale, missing and extra files with a
# unified diff), then runs `make generate` and fails when `git status --porcelain` is not empty
# afterwards, printing the report and what changed. Run it on a clean checkout (CI does); with
# uncommitted changes of your own it says so, since it cannot tell them from drift.
#
# Exit: 0 fresh; 1 drift; 2 gvisorgen could not answer (inputs that do not evaluate, I/O).
set -eu
cd "$(dirname "$0")/.."

in_actions() { [ "${GITHUB_ACTIONS:-}" = true ]; }
annotate() { # level title message
	if in_actions; then echo "::$1 title=$2::$3"; fi
}

MAKE=${MAKE:-make}
GVISORGEN=${GVISORGEN:-.bin/gvisorgen}
# The gate never trusts the cache of fresh trees: a cache restored from another run (a pull
# request's, say) must not be able to answer "fresh" for this tree.
GVISORGEN_CACHE=off
export GVISORGEN_CACHE
report=$(mktemp "${TMPDIR:-/tmp}/gvisorgen-check.XXXXXX")
trap 'rm -f "$report"' EXIT

before=$(git status --porcelain --untracked-files=all)

"$MAKE" --no-print-directory build
set +e
"$GVISORGEN" check >"$report" 2>&1
check_rc=$?
set -e
if [ "$check_rc" -eq 1 ] && grep -q '^gvisorgen: policy:' "$report"; then
	# Not drift: the output breaks a policy (after a patch, say); generate refuses it too.
	cat "$report" >&2
	annotate error "policy" "the rendered output breaks a gvisorgen policy: see the log"
	exit 1
fi
if [ "$check_rc" -ge 2 ]; then
	cat "$report" >&2
	annotate error "gvisorgen check" "gvisorgen check could not answer (exit $check_rc): see the log"
	exit 2
fi

"$MAKE" --no-print-directory generate
after=$(git status --porcelain --untracked-files=all)

# On a clean checkout (CI) any change is drift. With uncommitted changes of your own, only what
# generate changed on top of them (and check's verdict) counts.
stale=false
[ "$check_rc" -eq 0 ] || stale=true
[ "$after" = "$before" ] || stale=true
if [ "$stale" = false ]; then
	if [ -n "$before" ]; then
		echo "drift: fresh (judged on the work tree, which has uncommitted changes: commit them and run again to be sure)"
	else
		echo "drift: the committed overlays/, generated/, delivery/ and smoke/ are exactly what 'make generate' writes"
	fi
	exit 0
fi

echo "drift: the committed tree is not what 'make generate' writes."
echo "Run 'make generate' and commit everything it writes."
echo
echo "----- gvisorgen check (exit $check_rc), before make generate"
cat "$report"
echo
echo "----- git status --porcelain after make generate"
printf '%s\n' "$after"
if [ -n "$before" ]; then
	echo
	echo "(the work tree had uncommitted changes before generating; they are in this list too:)"
	printf '%s\n' "$before"
fi
echo
echo "----- git diff --stat"
git --no-pager diff --stat
annotate error "drift" "the generated tree (overlays/, generated/, delivery/, smoke/) is stale: run 'make generate' and commit the result (details in the log)"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
	{
		echo "### Drift gate: the committed tree is stale"
		echo
		echo "Run \`make generate\` and commit everything it writes."
		echo
		echo '```'
		head -c 60000 "$report"
		echo '```'
	} >>"$GITHUB_STEP_SUMMARY"
fi
exit 1
