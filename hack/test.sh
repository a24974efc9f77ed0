#!/usr/bin/env bash
# Every test kiln has: unit tests, the fuzz targets briefly, and the integration suites against
# the real kube-apiserver and etcd (built once by hack/tools.sh). Prints go test's summary lines.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBEBUILDER_ASSETS=$(bash hack/tools.sh --envtest)
export KUBEBUILDER_ASSETS
go test -count=1 -timeout 20m ./...
bash hack/fuzz.sh "${FUZZ_TIME:-10s}"
