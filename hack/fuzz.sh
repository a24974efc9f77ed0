#!/usr/bin/env bash
# Runs every fuzz target of the repository with the given budget each (default 10000x). The
# budget is a count of executions, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can report "context deadline exceeded" at the deadline with no failing input
# (go.dev/issue/75804, fixed in Go 1.27). A real finding writes testdata/fuzz/<target>/<input>.
# Targets under test/ run against a real kube-apiserver (KUBEBUILDER_ASSETS), each input a few
# requests: they get the second budget (default 3000x, about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-10000x}
apiserver_budget=${2:-3000x}
# go test discards what its fuzz workers print; the suites' workers write it to this file
# (testenv.FuzzWorkerLogEnv), shown when a target fails: why a worker died before fuzzing.
workers=$(mktemp)
# Each run starts from the committed seeds: the inputs a run finds interesting go to a corpus of
# its own, deleted at its end, not to the Go build cache, where they piled up from run to run and
# every run first replayed them all, taking longer each time on a machine whose cache is kept
# (an apiserver target with 136 took 71 s, with its 14 seeds 59 s).
corpus=$(mktemp -d)
trap 'rm -rf "$workers" "$corpus"' EXIT
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
	pkg=./$(dirname "${file#./}")
	b=$budget
	case $pkg in ./test/*) b=$apiserver_budget ;; esac
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
		echo "fuzz $pkg $target for $b"
		: >"$workers"
		if ! KILN_FUZZ_WORKER_LOG=$workers go test -run '^$' -fuzz "^${target}\$" -fuzztime "$b" "$pkg" -args -test.fuzzcachedir="$corpus"; then
			echo "fuzz $pkg $target failed; the end of its workers' output:"
			tail -n 200 "$workers"
			exit 1
		fi
	done
done
