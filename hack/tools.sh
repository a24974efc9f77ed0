#!/usr/bin/env bash
# Builds the pinned control-plane and code-generation binaries from the Go module proxy into a
# cache outside the work tree, keyed by the pinned go.sum files, and prints that folder.
# A fresh clone on a machine that built them once reuses them; the first build takes minutes.
set -euo pipefail

here=$(cd "$(dirname "$0")/tools" && pwd)
# Bump recipe when the way a binary is built changes, so caches made the old way are not reused.
recipe=1
key=$( (echo "$recipe"; cat "$here/go.sum" "$here/kwok/go.sum" "$here/controller-gen/go.sum") | sha256sum | cut -c1-16)
bin="${KILN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/tools/$key}"
mkdir -p "$bin"

# Kubernetes binaries report the release they were built from, as an official build does;
# kwokctl and kubectl read it.
kube_version=v1.37.2
stamp=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
done

build() { # build MODULE_DIR NAME PACKAGE [LDFLAGS]
	local dir="$1" name="$2" pkg="$3" ldflags="${4:-}"
	[ -x "$bin/$name" ] && return 0
	echo "building $name (first time only; kube-apiserver takes about 4 minutes)" >&2
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
}

build "$here" etcd go.etcd.io/etcd/server/v3
build "$here" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"
build "$here/controller-gen" controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
# The Gateway API CRDs (HTTPRoute for InferenceService canaries), from the pinned module, in a
# folder named after its version (crds/gateway-api-vX.Y.Z).
gw_version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/gateway-api" {print $3}' "$here/gateway-api/go.mod")
if [ ! -f "$bin/crds/gateway-api-$gw_version/gateway.networking.k8s.io_httproutes.yaml" ]; then
	gw_dir=$(cd "$here/gateway-api" && go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)
	mkdir -p "$bin/crds/gateway-api-$gw_version"
	cp "$gw_dir"/config/crd/standard/gateway.networking.k8s.io_{gatewayclasses,gateways,httproutes,referencegrants}.yaml "$bin/crds/gateway-api-$gw_version/"
	chmod u+w "$bin"/crds/gateway-api-"$gw_version"/*.yaml
fi
if [ "${1:-}" != "--envtest" ]; then
	build "$here" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$stamp"
	build "$here" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$stamp"
	build "$here" kubectl k8s.io/kubernetes/cmd/kubectl "$stamp"
	build "$here/kwok" kwok sigs.k8s.io/kwok/cmd/kwok
	build "$here/kwok" kwokctl sigs.k8s.io/kwok/cmd/kwokctl
	# kwok's stock node and pod stages, from the same pinned module: a cluster given stages of its
	# own (config/dev) must list these too, or nodes stay NotReady and pods Pending.
	if [ ! -f "$bin/stages/pod-ready.yaml" ]; then
		kwok_dir=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
		mkdir -p "$bin/stages"
		cp "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml "$kwok_dir"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$bin/stages/"
		chmod u+w "$bin"/stages/*.yaml
	fi
fi
echo "$bin"
