#!/usr/bin/env bash
# Fails when `make generate` changed a tracked file, left an untracked generated file, or a Go
# file is not gofmt'ed. Run after `make generate` (make verify does both).
set -euo pipefail
cd "$(dirname "$0")/.."
generated=(api config/crd config/rbac)
status=$(git status --porcelain -- "${generated[@]}")
if [ -n "$status" ]; then
	echo "generated files are stale or untracked (run 'make generate' and commit):" >&2
	echo "$status" >&2
	git --no-pager diff --stat -- "${generated[@]}" >&2
	exit 1
fi
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt'ed (run 'gofmt -w' on them):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "verify: generated files and formatting are up to date"
