#!/bin/sh
# ci/pr-diff.sh [--post] [BASE] — the rendered diff of a pull request, as a PR comment.
#
# Runs `gvisorgen diff --base BASE --format markdown` (BASE defaults to origin/$GITHUB_BASE_REF
# in a pull-request run, else gvisorgen's own default: the merge base with the main branch; the
# head is the working tree) and writes the comment body, which starts with the hidden marker
# <!-- gvisorgen-diff -->, to $OUT (default $RUNNER_TEMP or $TMPDIR / gvisorgen-pr-diff.md).
#
# Without --post it prints the body and exits like `gvisorgen diff`: 0 no difference, 1 a
# difference, 2 an error.
#
# With --post (CI) it also updates the one comment of the pull request that starts with the marker,
# or creates it, with `gh api` (env: GH_TOKEN, GITHUB_REPOSITORY, PR_NUMBER; optional
# PR_HEAD_REPO, PR_HEAD_SHA, COMMENT_AUTHOR [default github-actions[bot], empty = anyone]).
# When there is no difference and no comment yet, nothing is posted. A failed diff is posted too
# (so that no stale diff stays up) and exits 2. A pull request from a fork gets a read-only token:
# posting fails there, which is a warning, and the body is in the job summary.
# Exit with --post: 0 posted (or nothing to post); 2 the diff failed, or posting did (not a fork).
set -eu
cd "$(dirname "$0")/.."

MARKER='<!-- gvisorgen-diff -->'
LIMIT=65536 # GitHub's limit for a comment body, in characters

post=false
if [ "${1:-}" = --post ]; then
	post=true
	shift
fi
[ $# -le 1 ] || {
	echo "usage: ci/pr-diff.sh [--post] [BASE]" >&2
	exit 2
}
base=${1:-}
if [ -z "$base" ] && [ -n "${GITHUB_BASE_REF:-}" ]; then
	base=origin/$GITHUB_BASE_REF
fi

in_actions() { [ "${GITHUB_ACTIONS:-}" = true ]; }
warn() { if in_actions; then echo "::warning title=pr-diff::$*"; else echo "warning: $*" >&2; fi; }
err() { if in_actions; then echo "::error title=pr-diff::$*"; else echo "error: $*" >&2; fi; }

OUT=${OUT:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/gvisorgen-pr-diff.md}
if [ -z "${GVISORGEN:-}" ]; then
	${MAKE:-make} --no-print-directory build >&2
	GVISORGEN=.bin/gvisorgen
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gvisorgen-pr-diff.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

set -- diff --format markdown
[ -z "$base" ] || set -- "$@" --base "$base"
set +e
"$GVISORGEN" "$@" >"$tmp/diff.md" 2>"$tmp/diff.err"
rc=$?
set -e
case $rc in
0) status=same ;;
1) status=differ ;;
*) status=error ;;
esac

footer() {
	head_sha=${PR_HEAD_SHA:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
	# shellcheck disable=SC2016 # the backquotes are markdown
	printf '\n<sub>Rendered by `gvisorgen diff` at %s' "$(printf '%s' "$head_sha" | cut -c1-12)"
	if [ -n "${GITHUB_RUN_ID:-}" ] && [ -n "${GITHUB_REPOSITORY:-}" ]; then
		printf ' in [this run](%s/%s/actions/runs/%s)' "${GITHUB_SERVER_URL:-https://github.com}" \
			"$GITHUB_REPOSITORY" "$GITHUB_RUN_ID"
	fi
	printf '; the comment is updated on every push.</sub>\n'
}

write_body() { # the diff's markdown (or only its summary, when cut) wrapped in marker and footer
	{
		echo "$MARKER"
		if [ "$status" = error ]; then
			echo "### gvisorgen: rendered manifests"
			echo
			echo ":x: \`gvisorgen diff${base:+ --base $base}\` failed (exit $rc), so this pull request's rendered difference is unknown:"
			echo
			echo '```'
			head -c 20000 "$tmp/diff.err"
			echo '```'
		else
			cat "$1"
		fi
		footer
	} >"$OUT"
}

chars() { LC_ALL=C.UTF-8 wc -m <"$1" | tr -d ' '; }

write_body "$tmp/diff.md"
if [ "$(chars "$OUT")" -gt "$LIMIT" ]; then
	# gvisorgen keeps its own output under the limit; the marker and footer may push it over.
	# Keep the summary (everything before the first per-resource <details>) and say so.
	awk '/^<details>/ { exit } { print }' "$tmp/diff.md" >"$tmp/summary.md"
	echo "_The per-resource diffs were cut to fit GitHub's comment limit: run \`gvisorgen diff${base:+ --base $base}\` locally to see them._" >>"$tmp/summary.md"
	write_body "$tmp/summary.md"
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
	cat "$OUT" >>"$GITHUB_STEP_SUMMARY"
fi
if [ "$status" = error ]; then
	err "gvisorgen diff failed (exit $rc): $(head -c 2000 "$tmp/diff.err" | tr '\n' ' ')"
fi

if [ "$post" = false ]; then
	cat "$OUT"
	echo "pr-diff: comment body written to $OUT" >&2
	exit "$rc"
fi

: "${GITHUB_REPOSITORY:?GITHUB_REPOSITORY (owner/name) is required with --post}"
: "${PR_NUMBER:?PR_NUMBER is required with --post}"
author=${COMMENT_AUTHOR-github-actions[bot]}
fork=false
if [ -n "${PR_HEAD_REPO:-}" ] && [ "$PR_HEAD_REPO" != "$GITHUB_REPOSITORY" ]; then
	fork=true
fi
exit_posted() { # what to exit with once the comment is settled
	if [ "$status" = error ]; then exit 2; fi
	exit 0
}
post_failed() {
	if [ "$fork" = true ]; then
		warn "could not post the diff comment: a pull request from a fork gets a read-only token; the diff is in the job summary"
		exit_posted
	fi
	err "could not post the diff comment on pull request #$PR_NUMBER (see gh's message above)"
	exit 2
}

# The comment to update: by this workflow's author, starting with the marker.
jq_filter=".[] | select((.body | startswith(\"$MARKER\")) and (\"$author\" == \"\" or .user.login == \"$author\")) | .id"
if ! gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" --jq "$jq_filter" >"$tmp/ids"; then
	post_failed
fi
id=$(head -n 1 "$tmp/ids")

if [ -n "$id" ]; then
	if gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$OUT" >/dev/null; then
		echo "pr-diff: updated comment $id on pull request #$PR_NUMBER ($status)"
	else
		post_failed
	fi
elif [ "$status" = same ]; then
	echo "pr-diff: no rendered difference and no earlier comment: nothing to post"
else
	if gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$OUT" >/dev/null; then
		echo "pr-diff: commented on pull request #$PR_NUMBER ($status)"
	else
		post_failed
	fi
fi
exit_posted
