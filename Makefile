# kiln's build, test and run entry points. Everything they need is built from the Go module proxy
# by hack/tools.sh into a cache outside the work tree (first time: several minutes).
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
GO ?= go
TOOLS = $(shell bash hack/tools.sh)
ENVTEST_TOOLS = $(shell bash hack/tools.sh --envtest)
GO_TEST_FLAGS ?= -count=1
FUZZ_BUDGET ?= 10000x

.PHONY: all build tools generate verify test test-unit test-integration test-e2e fuzz run bench
all: build

build: ## Build bin/kiln.
	$(GO) build -o bin/kiln ./cmd/kiln

tools: ## Build (once) the pinned control-plane and generator binaries and print their folder.
	@bash hack/tools.sh

generate: ## Regenerate deepcopy code, CRDs, RBAC and webhook configurations from the Go types and markers.
	@cg=$$(bash hack/tools.sh --envtest)/controller-gen; \
	$$cg object:headerFile=hack/boilerplate.go.txt paths=./api/...; \
	$$cg crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases; \
	$(GO) run ./hack/crd-descriptions config/crd/bases/*.yaml; \
	$(GO) run ./hack/webhook-manifests config/webhook/manifests.yaml; \
	$$cg rbac:roleName=kiln-manager paths=./internal/... output:rbac:artifacts:config=config/rbac

verify: ## Regenerate and fail when generated files were stale or untracked, or code is not gofmt'ed.
	@bash hack/verify.sh

test: verify ## Every test: unit, integration (real kube-apiserver), e2e (local cluster), fuzz.
	@bash hack/test.sh

test-unit: ## Unit tests only (no control plane).
	$(GO) test $(GO_TEST_FLAGS) ./api/... ./internal/... ./cmd/...

test-integration: ## Integration suites against the real kube-apiserver.
	KUBEBUILDER_ASSETS=$(ENVTEST_TOOLS) $(GO) test $(GO_TEST_FLAGS) ./test/integration/...

test-e2e: ## The end-to-end suite on a fresh local cluster (scheduler, GC, controller-manager, kwok).
	KILN_TOOLS_DIR=$(TOOLS) $(GO) test $(GO_TEST_FLAGS) ./test/e2e/...

fuzz: ## Run each fuzz target for FUZZ_BUDGET executions.
	@bash hack/fuzz.sh $(FUZZ_BUDGET)

run: build ## A local cluster, kiln and the samples; Ctrl-C tears it down.
	@tools=$$(bash hack/tools.sh) && ./bin/kiln dev --tools "$$tools"

bench: build ## Benchmark kiln against the apiserver's floor; J, W, D, FOREIGN, PYTORCH, MODES, ROUNDS, PROFILE, OUT tune it.
	@KILN_TOOLS_DIR=$(TOOLS) $(GO) run ./test/bench
