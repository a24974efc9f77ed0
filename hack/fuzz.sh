#!/usr/bin/env bash
# Runs every fuzz target of the repository for the given time each (default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	pkg=./$(dirname "${file#./}")
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
		echo "fuzz $pkg $target for $fuzztime"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
