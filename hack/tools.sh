#!/usr/bin/env bash
# Builds the pinned control-plane and code-generation binaries from the Go module proxy into a
# cache outside the work tree, keyed by the pinned go.sum files, and prints that folder.
#
#   bash hack/tools.sh [SET...]    SET: generate | envtest | cluster | addons | bench | all   (default: cluster)
#
#   generate  controller-gen                                  (make generate, make verify)
#   envtest   etcd, kube-apiserver, the Gateway API, KEDA and JobSet CRDs  (integration suites)
#   cluster   envtest's, kube-controller-manager, kube-scheduler, kubectl, kwok, kwokctl,
#             kwok's stages and JobSet's controller           (make run, the e2e suite, make bench)
#   addons    scheduler-plugins' scheduler and controller, Kueue, with their CRDs; KEDA's
#             operator and a stand-in for its HTTP add-on's scaler (hack/tools/keda/httpscaler)
#                                                             (the e2e suite of test/e2e/addons)
#   bench     cluster's, and Kubeflow Trainer's controller     (make bench: TrainJobs beside Trainer)
#   all       every set but bench                              (make test)
#
# Only what a set needs and the cache lacks is built. A fresh clone on a machine that built them
# once reuses them; the first build on a new machine takes long (see first_run_note), so it
# prints a progress line every $KILN_TOOLS_PROGRESS seconds (default 20). Progress goes to stderr,
# the folder alone to stdout. A failing step is named, with the end of its log.
set -euo pipefail

here=$(cd "$(dirname "$0")/tools" && pwd)
# Bump recipe when the way a binary is built changes, so caches made the old way are not reused.
recipe=1
key=$( (echo "$recipe"; cat "$here/go.sum" "$here/kwok/go.sum" "$here/controller-gen/go.sum") | sha256sum | cut -c1-16)
bin="${KILN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/tools/$key}"
mkdir -p "$bin/logs"
every=${KILN_TOOLS_PROGRESS:-20}

# Kubernetes binaries report the release they were built from, as an official build does;
# kwokctl and kubectl read it.
kube_version=v1.37.2
stamp=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
done
required() { # required TOOL MODULE: its version, from a one-line require or a require block
	awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m && NF >= 2 && $2 ~ /^v/ {print $2}' "$here/$1/go.mod" | head -n 1
}
gw_version=$(required gateway-api sigs.k8s.io/gateway-api)
# The add-ons live in folders named after their release, so a new pin is built beside the old.
sp_version=$(required scheduler-plugins sigs.k8s.io/scheduler-plugins)
kueue_version=$(required kueue sigs.k8s.io/kueue)
keda_version=$(required keda github.com/kedacore/keda/v2)
jobset_version=$(required jobset sigs.k8s.io/jobset)
trainer_version=$(required trainer github.com/kubeflow/trainer/v2)
kserve_version=$(required kserve github.com/kserve/kserve)
istio_version=$(required istio istio.io/api)
# The stand-in scaler is kiln's own code: a change to it builds it again.
httpscaler=httpscaler-$(sha256sum "$here/keda/httpscaler/main.go" | cut -c1-12)

# Every piece: name, the test that it is already there, and how to make it.
# Cold times measured on a new 2-core machine (empty module and build caches, in this order; the
# first Kubernetes binary downloads and compiles what the others share) feed the estimate.
declare -A cold=(
	[controller-gen]=75 [etcd]=50 [kube-apiserver]=895 [gateway-api-crds]=5 [kube-controller-manager]=230
	[kube-scheduler]=35 [kubectl]=60 [kwok]=290 [kwokctl]=55 [kwok-stages]=5
	[scheduler-plugins]=230 [kueue]=250 [keda-crds]=10 [keda]=420
	[jobset-crds]=10 [jobset]=120 [trainer-runtimes]=10 [trainer]=350
	[kserve-manifests]=30 [istio-crds]=10 [kserve]=210
)
declare -A set_pieces=(
	[generate]="controller-gen"
	[envtest]="etcd kube-apiserver gateway-api-crds keda-crds jobset-crds trainer-runtimes kserve-manifests istio-crds"
	[cluster]="etcd kube-apiserver gateway-api-crds keda-crds jobset-crds trainer-runtimes kserve-manifests istio-crds kube-controller-manager kube-scheduler kubectl kwok kwokctl kwok-stages jobset"
)
set_pieces[addons]="scheduler-plugins kueue keda"
set_pieces[all]="${set_pieces[generate]} ${set_pieces[cluster]} ${set_pieces[addons]}"
set_pieces[bench]="${set_pieces[cluster]} trainer kserve"

present() { # present PIECE: is it in the cache already?
	case "$1" in
	gateway-api-crds) [ -f "$bin/crds/gateway-api-$gw_version/gateway.networking.k8s.io_httproutes.yaml" ] ;;
	kwok-stages) [ -f "$bin/stages/pod-delete.yaml" ] ;;
	scheduler-plugins) [ -x "$bin/scheduler-plugins-$sp_version/controller" ] ;;
	kueue) [ -x "$bin/kueue-$kueue_version/kueue" ] ;;
	keda-crds) [ -f "$bin/crds/keda-$keda_version/keda.sh_scaledobjects.yaml" ] ;;
	keda) [ -x "$bin/keda-$keda_version/keda-operator" ] && [ -x "$bin/keda-$keda_version/$httpscaler" ] ;;
	trainer-runtimes) [ -f "$bin/trainer-$trainer_version/runtimes/torch_distributed.yaml" ] ;;
	trainer) [ -x "$bin/trainer-$trainer_version/trainer-controller-manager" ] ;;
	istio-crds) [ -f "$bin/crds/istio-$istio_version/istio-crds.yaml" ] ;;
	kserve) [ -x "$bin/kserve-$kserve_version/kserve-manager" ] ;;
	kserve-manifests) [ -f "$bin/kserve-$kserve_version/samples/sklearn/v1/sklearn.yaml" ] && [ -f "$bin/kserve-$kserve_version/crds/serving.kserve.io_inferenceservices.yaml" ] && [ ! -f "$bin/kserve-$kserve_version/runtimes/kserve-openvino.yaml" ] ;;
	jobset-crds) [ -f "$bin/crds/jobset-$jobset_version/jobset.x-k8s.io_jobsets.yaml" ] ;;
	jobset) [ -x "$bin/jobset-$jobset_version/jobset" ] && [ -f "$bin/jobset-$jobset_version/webhooks.yaml" ] ;;
	*) [ -x "$bin/$1" ] ;;
	esac
}

go_build() { # go_build MODULE_DIR NAME PACKAGE [LDFLAGS]
	local dir="$1" name="$2" pkg="$3" ldflags="${4:-}"
	(cd "$dir" && CGO_ENABLED=0 go build -v -trimpath -ldflags="-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
}

module_dir() { # module_dir MODULE_DIR MODULE: the module's folder, downloaded first if it is not yet
	local dir
	(cd "$1" && go mod download "$2") >&2
	dir=$(cd "$1" && go list -m -f '{{.Dir}}' "$2")
	[ -n "$dir" ] && [ -d "$dir" ] || { echo "module $2 has no folder after 'go mod download' in $1" >&2; return 1; }
	echo "$dir"
}

make_piece() {
	case "$1" in
	etcd) go_build "$here" etcd go.etcd.io/etcd/server/v3 ;;
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
		go_build "$here" "$1" "k8s.io/kubernetes/cmd/$1" "$stamp" ;;
	kwok | kwokctl) go_build "$here/kwok" "$1" "sigs.k8s.io/kwok/cmd/$1" ;;
	controller-gen) go_build "$here/controller-gen" controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	gateway-api-crds) # HTTPRoute and friends for InferenceService canaries, in a folder named after the release
		local gw dst="$bin/crds/gateway-api-$gw_version"
		gw=$(module_dir "$here/gateway-api" sigs.k8s.io/gateway-api)
		mkdir -p "$dst"
		cp "$gw"/config/crd/standard/gateway.networking.k8s.io_{gatewayclasses,gateways,httproutes,referencegrants}.yaml "$dst/"
		chmod u+w "$dst"/*.yaml ;;
	kwok-stages) # kwok's stock node and pod stages: a cluster given stages of its own
		# (config/dev) must list these too, or nodes stay NotReady and pods Pending.
		local kw
		kw=$(module_dir "$here/kwok" sigs.k8s.io/kwok)
		mkdir -p "$bin/stages"
		cp "$kw"/kustomize/stage/node/fast/node-initialize.yaml "$kw"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$bin/stages/"
		chmod u+w "$bin"/stages/*.yaml ;;
	scheduler-plugins) # a second scheduler with the Coscheduling plugin, its PodGroup controller, their CRDs
		local sp dst="$bin/scheduler-plugins-$sp_version"
		sp=$(module_dir "$here/scheduler-plugins" sigs.k8s.io/scheduler-plugins)
		mkdir -p "$dst/crds"
		cp "$sp"/config/crd/bases/*.yaml "$dst/crds/"
		chmod u+w "$dst"/crds/*.yaml
		go_build "$here/scheduler-plugins" "${dst#"$bin/"}/kube-scheduler" sigs.k8s.io/scheduler-plugins/cmd/scheduler
		go_build "$here/scheduler-plugins" "${dst#"$bin/"}/controller" sigs.k8s.io/scheduler-plugins/cmd/controller ;;
	kueue) # Kueue's manager, its CRDs and webhook configurations
		local kq dst="$bin/kueue-$kueue_version"
		kq=$(module_dir "$here/kueue" sigs.k8s.io/kueue)
		mkdir -p "$dst/crds"
		cp "$kq"/config/components/crd/bases/*.yaml "$dst/crds/"
		cp "$kq"/config/components/webhook/manifests.yaml "$dst/webhooks.yaml"
		chmod u+w "$dst"/crds/*.yaml "$dst/webhooks.yaml"
		go_build "$here/kueue" "${dst#"$bin/"}/kueue" sigs.k8s.io/kueue/cmd/kueue ;;
	keda-crds) # KEDA's CRDs, for the tests of the ScaledObjects kiln makes
		local kd dst="$bin/crds/keda-$keda_version"
		kd=$(module_dir "$here/keda" github.com/kedacore/keda/v2)
		mkdir -p "$dst"
		cp "$kd"/config/crd/bases/*.yaml "$dst/"
		chmod u+w "$dst"/*.yaml ;;
	keda) # KEDA's operator, and the stand-in for the HTTP add-on's scaler (its module is not served)
		local dst="keda-$keda_version"
		go_build "$here/keda" "$dst/keda-operator" github.com/kedacore/keda/v2/cmd/operator
		rm -f "$bin/$dst"/httpscaler-*
		go_build "$here/keda" "$dst/$httpscaler" ./httpscaler ;;
	jobset-crds) # JobSet's CRD: kiln makes a TrainJob's JobSet
		local js dst="$bin/crds/jobset-$jobset_version"
		js=$(module_dir "$here/jobset" sigs.k8s.io/jobset)
		mkdir -p "$dst"
		cp "$js"/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml "$dst/"
		chmod u+w "$dst"/*.yaml ;;
	jobset) # JobSet's controller and its webhook configurations (which a JobSet needs: its
		# defaulting webhook sets spec.network, which the controller reads)
		local js dst="$bin/jobset-$jobset_version"
		js=$(module_dir "$here/jobset" sigs.k8s.io/jobset)
		mkdir -p "$dst"
		cp "$js"/config/components/webhook/manifests.yaml "$dst/webhooks.yaml"
		chmod u+w "$dst/webhooks.yaml"
		go_build "$here/jobset" "${dst#"$bin/"}/jobset" sigs.k8s.io/jobset ;;
	trainer-runtimes) # Kubeflow Trainer's own runtime manifests, which kiln's tests apply unchanged
		local tr dst="$bin/trainer-$trainer_version"
		tr=$(module_dir "$here/trainer" github.com/kubeflow/trainer/v2)
		mkdir -p "$dst"
		rm -rf "$dst/runtimes"
		cp -r "$tr"/manifests/base/runtimes "$dst/runtimes"
		chmod -R u+w "$dst/runtimes" ;;
	kserve-manifests) # KServe's own runtime manifests and v1beta1 samples, which kiln's tests apply
		# unchanged, and what its controller needs in the benchmark: its ConfigMap and its CRDs
		# (its controller writes KServe's conditions, which kiln's CRDs would refuse).
		local ks dst="$bin/kserve-$kserve_version"
		ks=$(module_dir "$here/kserve" github.com/kserve/kserve)
		rm -rf "$dst/runtimes" "$dst/samples" "$dst/configmap" "$dst/crds"
		mkdir -p "$dst/runtimes" "$dst/samples" "$dst/configmap" "$dst/crds"
		cp "$ks/config/configmap/inferenceservice.yaml" "$dst/configmap/"
		cp "$ks"/config/crd/full/serving.kserve.io_*.yaml "$ks"/config/crd/full/clusterstoragecontainer/*.yaml "$dst/crds/"
		rm -f "$dst/crds/kustomization.yaml"
		# The runtimes KServe installs: those its kustomization lists (kserve-openvino is not).
		awk '/^resources:/ {on = 1; next} on && /^- / {print $2; next} on && !/^ *$/ {on = 0}' "$ks/config/runtimes/kustomization.yaml" |
			while read -r f; do cp "$ks/config/runtimes/$f" "$dst/runtimes/"; done
		(cd "$ks/docs/samples/v1beta1" && find . -name '*.yaml' -exec cp --parents {} "$dst/samples/" \;)
		chmod -R u+w "$dst" ;;
	istio-crds) # Istio's CRDs (VirtualService for InferenceService canaries), as its API release ships them
		local is dst="$bin/crds/istio-$istio_version"
		is=$(module_dir "$here/istio" istio.io/api)
		mkdir -p "$dst"
		cp "$is/kubernetes/customresourcedefinitions.gen.yaml" "$dst/istio-crds.yaml"
		chmod u+w "$dst/istio-crds.yaml" ;;
	kserve) # KServe's controller: the benchmark's baseline for KServe's InferenceServices, never part of kiln
		go_build "$here/kserve" "kserve-$kserve_version/kserve-manager" github.com/kserve/kserve/cmd/manager ;;
	trainer) # Kubeflow Trainer's controller: the benchmark's baseline for TrainJobs, never part of kiln
		go_build "$here/trainer" "trainer-$trainer_version/trainer-controller-manager" github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager ;;
	*) echo "unknown piece $1" >&2; return 1 ;;
	esac
}

say() { echo "[tools] $*" >&2; }
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

progress() { # progress LOG: what a running step is doing, read from go's output
	local downloads packages last
	downloads=$(grep -c '^go: downloading' "$1" || true)
	packages=$(grep -vc -e '^go: ' -e ' ' "$1" || true)
	last=$(grep -v -e '^go: ' -e ' ' "$1" | tail -n 1 || true)
	if [ "$packages" -gt 0 ]; then
		echo "$packages packages compiled, now ${last:0:70}"
	elif [ "$downloads" -gt 0 ]; then
		echo "$downloads modules downloaded"
	else
		echo "resolving modules"
	fi
}

running=""
trap '[ -z "$running" ] || kill "$running" 2>/dev/null' EXIT

step() { # step N M PIECE: make one piece in the background, saying what it does until it is done
	local n=$1 m=$2 piece=$3 log="$bin/logs/$3.log" started=$SECONDS rc=0
	say "$piece ($n of $m): building"
	make_piece "$piece" >"$log" 2>&1 &
	running=$!
	while kill -0 "$running" 2>/dev/null; do
		for _ in $(seq "$every"); do
			kill -0 "$running" 2>/dev/null || break
			sleep 1
		done
		kill -0 "$running" 2>/dev/null || break
		say "$piece ($n of $m): $(progress "$log"); $(mmss $((SECONDS - started))) on this step, $(mmss $((SECONDS - t0))) in all"
	done
	wait "$running" || rc=$?
	running=""
	if [ "$rc" != 0 ]; then
		say "FAILED: step '$piece' ($n of $m) exited with $rc after $(mmss $((SECONDS - started))); the end of $log:"
		grep -v '^go: downloading' "$log" | tail -n 20 | sed 's/^/    /' >&2
		exit 1
	fi
	say "$piece ($n of $m): done in $(mmss $((SECONDS - started)))"
}

sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(cluster)
declare -A wanted=()
order=()
for s in "${sets[@]}"; do
	[ -n "${set_pieces[$s]:-}" ] || { echo "hack/tools.sh: unknown set '$s' (generate, envtest, cluster, addons, bench, all)" >&2; exit 2; }
	for p in ${set_pieces[$s]}; do
		[ -n "${wanted[$p]:-}" ] && continue
		wanted[$p]=1
		present "$p" || order+=("$p")
	done
done

if [ ${#order[@]} -gt 0 ]; then
	estimate=0
	for p in "${order[@]}"; do estimate=$((estimate + cold[$p])); done
	say "building ${#order[@]} pinned tools into $bin: ${order[*]}"
	say "on a new 2-core machine this takes about $(((estimate + 59) / 60)) minutes (less where Go's caches are warm);" \
		"it happens once: later runs and fresh clones reuse the folder"
	t0=$SECONDS
	for i in "${!order[@]}"; do step $((i + 1)) ${#order[@]} "${order[$i]}"; done
	say "all ${#order[@]} built in $(mmss $((SECONDS - t0)))"
fi
echo "$bin"
