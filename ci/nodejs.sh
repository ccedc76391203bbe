#!/bin/sh
# ci/nodejs.sh — print the path of node (Node.js), installing Debian's nodejs with apt-get when it is missing
# (needs root, as on CI). internal/schema's TestPatternsMeanTheSameInECMA runs the values schema's regular
# expressions in ECMA-262, the dialect editors compile JSON Schema patterns in; make test passes this path as NODE.
# Exit: 0 and the path on stdout; 2 when node is missing and cannot be installed.
set -eu
if ! command -v node >/dev/null 2>&1; then
	echo "nodejs.sh: installing nodejs with apt-get" >&2
	if [ "$(id -u)" -ne 0 ]; then
		echo "nodejs.sh: node is missing and this is not root: install it (apt-get install nodejs)" >&2
		exit 2
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs >/dev/null; } || {
		echo "nodejs.sh: could not install nodejs" >&2
		exit 2
	}
fi
command -v node
