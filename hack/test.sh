#!/usr/bin/env bash
# Every test kiln has: unit tests, the integration suites against the real kube-apiserver and
# etcd, the end-to-end suite on a local kwok cluster, then the fuzz targets briefly. The
# control-plane binaries are built once by hack/tools.sh. Prints go test's summary lines.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN_TOOLS_DIR=$(bash hack/tools.sh)
KUBEBUILDER_ASSETS=$KILN_TOOLS_DIR
export KILN_TOOLS_DIR KUBEBUILDER_ASSETS
go test -count=1 -timeout 20m ./...
bash hack/fuzz.sh "${FUZZ_BUDGET:-10000x}"
