# kiln's build, test and run entry points. Everything they need is built from the Go module proxy
# by hack/tools.sh into a cache outside the work tree (the first time on a new machine: about 25
# minutes on 2 cores, with a progress line every 20 s; then it is reused).
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
GO ?= go
ENVTEST_TOOLS = $(shell bash hack/tools.sh envtest)
E2E_TOOLS = $(shell bash hack/tools.sh cluster addons)
# make bench builds Kubeflow Trainer's and KServe's controllers only when a run compares with them.
BENCH_TOOLS = $(shell bash hack/tools.sh $(if $(or $(findstring trainer,$(MODES)),$(findstring kserve,$(MODES))),bench,cluster))
# The version stamped into bin/kiln and the release: see hack/version.sh (KILN_VERSION overrides).
VERSION ?= $(shell bash hack/version.sh)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS = -X github.com/kiln-ml/kiln/internal/version.Version=$(VERSION) -X github.com/kiln-ml/kiln/internal/version.Commit=$(COMMIT)
GO_TEST_FLAGS ?= -count=1
FUZZ_BUDGET ?= 10000x

# The APIs whose CRDs config/crd/bases holds. KServe's (api/serving.kserve.io) go to config/crd/kserve
# without descriptions, as KServe generates them: with them, the InferenceService CRD is too large
# for a client-side kubectl apply.
KILN_API_PATHS = ./api/kubeflow.org/...;./api/serving/...;./api/trainer.kubeflow.org/...;./api/training/...

.PHONY: all build tools generate verify test test-unit test-integration test-e2e fuzz run bench release
all: build

# bin/ holds the binaries as the image builds them (Dockerfile): static, without cgo, with the flags
# of internal/version.GoBuild, so make run, the tests and make bench run and measure what ships.
GO_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -tags=grpcnotrace

build: ## Build bin/kiln, stamped with its version (bin/kiln version), bin/kiln-fetch and bin/kubectl-kiln.
	$(GO_BUILD) -ldflags "$(LDFLAGS)" -o bin/kiln ./cmd/kiln
	$(GO_BUILD) -o bin/kiln-fetch ./cmd/kiln-fetch
	$(GO_BUILD) -ldflags "$(LDFLAGS)" -o bin/kubectl-kiln ./cmd/kubectl-kiln

tools: ## Build (once) every pinned control-plane, add-on and generator binary and print their folder.
	@bash hack/tools.sh all

generate: ## Regenerate deepcopy code, CRDs, RBAC and webhook configurations from the Go types and markers, and the chart's copies of them.
	@cg=$$(bash hack/tools.sh generate)/controller-gen; \
	$$cg object:headerFile=hack/boilerplate.go.txt paths=./api/...; \
	$$cg crd:generateEmbeddedObjectMeta=true paths="$(KILN_API_PATHS)" output:crd:artifacts:config=config/crd/bases; \
	$$cg crd:generateEmbeddedObjectMeta=true,maxDescLen=0 paths=./api/serving.kserve.io/... output:crd:artifacts:config=config/crd/kserve; \
	$(GO) run ./hack/kserve-crds config/crd/kserve/serving.kserve.io_inferenceservices.yaml; \
	$(GO) run ./hack/crd-descriptions config/crd/bases/*.yaml; \
	$(GO) run ./hack/webhook-manifests config/webhook/manifests.yaml config/crd/bases/*.yaml; \
	$$cg rbac:roleName=kiln-manager paths=./internal/... output:rbac:artifacts:config=config/rbac; \
	rm -f charts/kiln/crds/*.yaml && cp config/crd/bases/*.yaml charts/kiln/crds/; \
	cp config/rbac/role.yaml charts/kiln/files/manager-role.yaml; \
	$(GO) run ./hack/rbac-split config/rbac/role.yaml charts/kiln/files config/components/namespaced \
	  config/components/mpi-kubectl-exec/rbac.yaml config/components/mpi-kubectl-exec-namespaced; \
	cp config/rbac/edit_role.yaml config/rbac/view_role.yaml config/rbac/metrics_reader_role.yaml charts/kiln/files/; \
	cp config/components/mpi-kubectl-exec/rbac.yaml charts/kiln/files/mpi-kubectl-exec-role.yaml; \
	cp config/webhook/manifests.yaml charts/kiln/files/webhooks.yaml; \
	cp config/runtimes/runtimes.yaml charts/kiln/files/runtimes.yaml; \
	cat config/crd/kserve/serving.kserve.io_*.yaml > charts/kiln/files/kserve-crds.yaml; \
	cp config/kserve/runtimes.yaml charts/kiln/files/kserve-runtimes.yaml

verify: ## Regenerate and fail when generated files were stale or untracked, or code is not gofmt'ed.
	@bash hack/verify.sh

test: ## make verify, then every test: unit, integration (real kube-apiserver), e2e (local cluster), release, fuzz.
	@bash hack/tools.sh all >/dev/null
	@$(MAKE) --no-print-directory verify
	@bash hack/test.sh

test-unit: ## Unit tests only (no control plane).
	$(GO) test $(GO_TEST_FLAGS) ./api/... ./internal/... ./cmd/...

test-integration: ## Integration suites against the real kube-apiserver.
	KUBEBUILDER_ASSETS=$(ENVTEST_TOOLS) $(GO) test $(GO_TEST_FLAGS) ./test/integration/...

test-e2e: ## The end-to-end suites on fresh local clusters (scheduler, GC, controller-manager, kwok; scheduler-plugins and Kueue in test/e2e/addons).
	KILN_TOOLS_DIR=$(E2E_TOOLS) $(GO) test $(GO_TEST_FLAGS) ./test/e2e/...

fuzz: ## Run each fuzz target for FUZZ_BUDGET executions.
	@bash hack/fuzz.sh $(FUZZ_BUDGET)

run: ## A local cluster, kiln and the samples; Ctrl-C tears it down.
	@tools=$$(bash hack/tools.sh cluster) && $(MAKE) --no-print-directory build && ./bin/kiln dev --tools "$$tools"

release: ## dist/install.yaml, the Helm chart dist/kiln-<version>.tgz (kiln's image pinned to VERSION, hack/version.sh), kubectl-kiln for Linux and macOS, its krew manifest dist/kiln.yaml.
	$(GO) run ./hack/release -version $(VERSION) -commit $(COMMIT) -out dist

bench: build ## Benchmark kiln against the apiserver's floor; J, W, D, FOREIGN, PYTORCH, MODES, ROUNDS, PROFILE, OUT tune it.
	@KILN_TOOLS_DIR=$(BENCH_TOOLS) $(GO) run ./test/bench
