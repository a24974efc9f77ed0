#!/usr/bin/env bash
# Prints kiln's version for `make build` and `make release` to stamp:
#   a checkout at or after a v* tag:  git describe (v0.2.0, v0.2.0-3-gabc1234, …-dirty)
#   a checkout with no v* tag:        VERSION's release, -dev and the commit (v0.1.0-dev-gabc1234[-dirty])
#   no git (a source archive):        VERSION as it is
# KILN_VERSION overrides all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
release=$(tr -d ' \n' < VERSION)
if [ -n "${KILN_VERSION:-}" ]; then
	echo "$KILN_VERSION"
elif git rev-parse --git-dir >/dev/null 2>&1; then
	git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null ||
		echo "$release-dev-g$(git rev-parse --short=7 HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)"
else
	echo "$release"
fi
