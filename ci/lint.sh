#!/bin/sh
# ci/lint.sh — lint the GitHub workflows and the shell scripts.
#
#   actionlint (pinned, built with `go install` into the tool cache, once) on .github/workflows/*;
#   it also runs `shellcheck` on the workflows' `run:` blocks.
#   `shellcheck -s sh` on the CI scripts of the GitOps workflows (ci/drift.sh, ci/pr-diff.sh,
#   ci/smoke.sh, ci/lint.sh) and on the installer scripts (cue/installer/*.sh);
#   LINT_ALL_CI=1 adds every other ci/*.sh and ci/**/*.sh.
# The shellcheck tool comes from apt-get when it is missing (needs root, as on CI). A clean result is cached by its
# inputs (below).
# Exit: 0 clean; 1 findings; 2 a tool could not be installed.
set -eu
cd "$(dirname "$0")/.."

ACTIONLINT_VERSION=v1.7.12
TOOLBIN=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/bin
# Versioned by file name like the Makefile's tools: a half-finished install never looks done.
ACTIONLINT=$TOOLBIN/actionlint-$ACTIONLINT_VERSION

if [ ! -x "$ACTIONLINT" ]; then
	echo "lint: installing actionlint $ACTIONLINT_VERSION into $TOOLBIN"
	tmp=$TOOLBIN/tmp-actionlint.$$
	mkdir -p "$tmp"
	if ! GOBIN=$tmp ${GO:-go} install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"; then
		rm -rf "$tmp"
		echo "lint: could not install actionlint" >&2
		exit 2
	fi
	mv "$tmp/actionlint" "$ACTIONLINT"
	rmdir "$tmp"
fi

if ! command -v shellcheck >/dev/null 2>&1; then
	echo "lint: installing shellcheck with apt-get"
	if [ "$(id -u)" -ne 0 ]; then
		echo "lint: shellcheck is missing and this is not root: install it (apt-get install shellcheck)" >&2
		exit 2
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q shellcheck >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q shellcheck >/dev/null; } || {
		echo "lint: could not install shellcheck" >&2
		exit 2
	}
fi

set -- ci/drift.sh ci/pr-diff.sh ci/smoke.sh ci/lint.sh cue/installer/*.sh
if [ "${LINT_ALL_CI:-0}" = 1 ]; then
	for f in ci/*.sh ci/*/*.sh ci/*/*/*.sh; do
		[ -f "$f" ] || continue
		case " $* " in *" $f "*) continue ;; esac
		set -- "$@" "$f"
	done
fi

# A clean result is remembered by what determines it: both tools' versions, and the name and bytes of every file
# linted (the workflows, the scripts). The same inputs again skip the ~5 s of both tools (make test's inner loop);
# a finding is never cached, and any change to a file, a tool or the list runs both again.
SC_VERSION=$(shellcheck --version | sed -n 's/^version: //p' | head -n 1)
key=$({
	echo "actionlint $ACTIONLINT_VERSION shellcheck $SC_VERSION"
	sha256sum .github/workflows/* "$@"
} | sha256sum | cut -c1-32)
stamp=${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/lint/clean-$key
if [ -f "$stamp" ]; then
	echo "lint: clean (the same workflows, $# scripts and tool versions were linted clean before: $stamp)"
	exit 0
fi

rc=0

echo "lint: actionlint $ACTIONLINT_VERSION on .github/workflows ($SC_VERSION for run: blocks)"
"$ACTIONLINT" -shellcheck "$(command -v shellcheck)" || rc=1

echo "lint: shellcheck -s sh on $# scripts"
shellcheck -s sh "$@" || rc=1

if [ "$rc" -eq 0 ]; then
	echo "lint: clean"
	mkdir -p "${stamp%/*}" && : >"$stamp"
fi
exit "$rc"
