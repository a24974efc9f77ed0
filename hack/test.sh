#!/usr/bin/env bash
# Every test kiln has: unit tests, the integration suites against the real kube-apiserver and
# etcd, the end-to-end suites on local kwok clusters (one beside scheduler-plugins and Kueue),
# `make release`, then the fuzz targets briefly. The control-plane and add-on binaries are built
# once by hack/tools.sh. Prints go test's summary lines.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN_TOOLS_DIR=$(bash hack/tools.sh cluster addons)
KUBEBUILDER_ASSETS=$KILN_TOOLS_DIR
export KILN_TOOLS_DIR KUBEBUILDER_ASSETS
go test -count=1 -timeout 20m ./...
# The release target itself (its contents are checked by test/integration/release).
make --no-print-directory release >/dev/null
version=$(bash hack/version.sh)
for f in dist/install.yaml "dist/kiln-${version#v}.tgz" dist/kiln.yaml dist/kubectl-kiln_"$version"_{linux,darwin}_{amd64,arm64}.tar.gz; do
	[ -s "$f" ] || { echo "make release did not write $f" >&2; exit 1; }
done
echo "make release: dist/install.yaml, the chart, kubectl-kiln for 4 platforms and its krew manifest written"
bash hack/fuzz.sh "${FUZZ_BUDGET:-10000x}"
