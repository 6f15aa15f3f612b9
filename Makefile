# servicecidr-guard. `make` (or `make help`) lists the targets; every variable below can be
# overridden on the command line: make e2e-local KUBE_VERSION=v1.34.4.

# Pinned versions: Kubernetes for the local control plane (DEFAULT_KUBE_VERSION, BETA_KUBE_VERSION)
# and kind, its node images and cert-manager for the kind e2e run (DEFAULT_KIND_*,
# DEFAULT_CERT_MANAGER_VERSION). Kept in hack/versions.env, which the hack/ scripts read too.
include hack/versions.env
PROMTOOL_VERSION ?= v0.316.0

# Kubernetes version for local-up and e2e-local.
KUBE_VERSION ?= $(DEFAULT_KUBE_VERSION)
# Passed to hack/local/up.sh when set: the policy file, the service range of the local cluster,
# WEBHOOK=image to run the webhook from the image IMG instead of local processes, how many webhook
# replicas run behind the round robin, and whether they share reservations (1, 0).
POLICY ?=
SERVICE_CIDR ?=
WEBHOOK ?=
WEBHOOK_REPLICAS ?=
SHARED_RESERVATION ?=
# Where hack/local/up.sh keeps the local control plane's state (its env file names KUBECONFIG).
LOCAL_DIR ?= $(CURDIR)/.local

# The image: name and tag for `make image`; set it for `make deploy` to run the image you pushed.
VERSION := $(shell sed -n 's/^  "version": "\(.*\)",$$/\1/p' package.json)
IMG ?= servicecidr-guard:$(VERSION)
CONTAINER_TOOL ?= docker

# The overlay for deploy/undeploy (config/overlays/OVERLAY) and the ones `manifests` renders.
OVERLAY ?= gke
OVERLAYS ?= $(notdir $(patsubst %/,%,$(wildcard config/overlays/*/)))
MANIFESTS_DIR ?= $(CURDIR)/_output/manifests

# kubectl: the one hack/control-plane/build.sh built for DEFAULT_KUBE_VERSION if it is cached (its
# kustomize is the one the manifests are checked with), else the kubectl on PATH.
KUBECTL ?= $(shell hack/control-plane/find-kubectl.sh 2>/dev/null || echo kubectl)
# Tools built from the Go module proxy, cached per version outside the repository.
TOOLS_DIR ?= $(or $(SCG_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/servicecidr-guard)/tools
KIND_VERSION ?= $(DEFAULT_KIND_VERSION)
KIND ?= $(TOOLS_DIR)/kind-$(KIND_VERSION)
PROMTOOL ?= $(TOOLS_DIR)/promtool-$(PROMTOOL_VERSION)

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o pipefail -ec
.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN { FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m [VARIABLE=value ...]\n" } \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: install
install: ## Everything `make test` and the image need: Debian packages, npm ci, the control plane (cached), a container engine.
	KUBE_VERSION=$(KUBE_VERSION) hack/install.sh
	$(MAKE) container-engine

.PHONY: build
build: ## Compile TypeScript into dist/.
	npm run build

.PHONY: typecheck
typecheck: ## Type-check src, test, bench and hack (tsc --noEmit).
	npm run typecheck

.PHONY: lint
lint: ## Lint TypeScript (eslint) and every hack/ script (shellcheck).
	npm run lint
	$(MAKE) lint-shell

.PHONY: lint-shell
lint-shell: ## shellcheck every bash script under hack/ and .ci/.
	shellcheck -x -P SCRIPTDIR $$(grep -rlE '^#!/usr/bin/env bash|^# shellcheck shell=bash' hack .ci)

.PHONY: test
test: ## The suite CI runs: type check, lint (eslint, shellcheck), unit tests, then the e2e suite on a local control plane.
	npm test
	$(MAKE) lint-shell
	$(MAKE) e2e-local

.PHONY: test-unit
test-unit: ## Unit tests only.
	npm run test:unit

.PHONY: package-verify
package-verify: ## npm pack, publish to a throwaway local registry, then `npx servicecidr-guard@VERSION check` in an empty directory (needs the npm registry).
	npm run test:package

.PHONY: bench
bench: ## Run the benchmarks (prints figures; see docs/benchmarks.md).
	npm run bench

##@ Local control plane

.PHONY: control-plane
control-plane: ## Build (or find cached) kube-apiserver, kube-controller-manager, kubectl and etcd for KUBE_VERSION.
	KUBE_VERSION=$(KUBE_VERSION) hack/control-plane/build.sh

.PHONY: local-up
local-up: ## Start etcd, kube-apiserver, kube-controller-manager and the webhook replicas locally (KUBE_VERSION, POLICY, SERVICE_CIDR, WEBHOOK_REPLICAS, SHARED_RESERVATION).
	KUBE_VERSION=$(KUBE_VERSION) LOCAL_DIR=$(LOCAL_DIR) \
	  $(if $(POLICY),POLICY=$(POLICY)) $(if $(SERVICE_CIDR),SERVICE_CIDR=$(SERVICE_CIDR)) \
	  $(if $(WEBHOOK_REPLICAS),WEBHOOK_REPLICAS=$(WEBHOOK_REPLICAS)) $(if $(SHARED_RESERVATION),SHARED_RESERVATION=$(SHARED_RESERVATION)) \
	  $(if $(WEBHOOK),WEBHOOK=$(WEBHOOK) WEBHOOK_IMAGE=$(IMG)) hack/local/up.sh

.PHONY: local-down
local-down: ## Stop the local control plane.
	LOCAL_DIR=$(LOCAL_DIR) hack/local/down.sh

##@ E2E

# The cluster the suite runs against: KUBECONFIG given on the make command line, else the running
# local control plane ($(LOCAL_DIR)/env, all of whose variables the suite then sees), else
# KUBECONFIG from the environment. $(1) = local: only the local control plane.
define run-e2e
	if [[ "$(1)" != local && "$(origin KUBECONFIG)" == "command line" ]]; then \
	  echo "e2e: KUBECONFIG=$(KUBECONFIG) (make command line)"; \
	elif [[ -f "$(LOCAL_DIR)/env" ]]; then \
	  set -a; source "$(LOCAL_DIR)/env"; set +a; \
	  echo "e2e: local control plane, KUBECONFIG=$$KUBECONFIG"; \
	elif [[ "$(1)" != local && -n "$${KUBECONFIG:-}" ]]; then \
	  echo "e2e: KUBECONFIG=$$KUBECONFIG (environment)"; \
	else \
	  echo "e2e: no cluster: run 'make local-up' first, or pass KUBECONFIG=FILE" >&2; exit 1; \
	fi; \
	npm run test:e2e
endef

.PHONY: e2e
e2e: ## Run the e2e suite against the running local-up, or any cluster: make e2e KUBECONFIG=FILE.
	@$(call run-e2e,any)

.PHONY: e2e-local
e2e-local: ## local-up, e2e, local-down (always), with phase times (hack/local/e2e.sh; POLICY, E2E_REQUIRE, WEBHOOK=image, WEBHOOK_REPLICAS, SHARED_RESERVATION).
	KUBE_VERSION=$(KUBE_VERSION) LOCAL_DIR=$(LOCAL_DIR) $(if $(POLICY),POLICY=$(POLICY)) \
	  $(if $(E2E_REQUIRE),E2E_REQUIRE=$(E2E_REQUIRE)) $(if $(WEBHOOK),WEBHOOK=$(WEBHOOK) WEBHOOK_IMAGE=$(IMG)) \
	  $(if $(WEBHOOK_REPLICAS),WEBHOOK_REPLICAS=$(WEBHOOK_REPLICAS)) \
	  $(if $(SHARED_RESERVATION),SHARED_RESERVATION=$(SHARED_RESERVATION)) hack/local/e2e.sh

.PHONY: e2e-image
e2e-image: image ## Build the image IMG, then e2e-local with the webhook replicas running from it (WEBHOOK=image).
	$(MAKE) e2e-local WEBHOOK=image IMG=$(IMG)

.PHONY: e2e-race-off
e2e-race-off: ## 09-replicas with the replicas' shared reservation off: it must then find overlapping ranges admitted twice.
	$(MAKE) e2e-local SHARED_RESERVATION=0 E2E_SPECS=$(or $(E2E_SPECS),09-replicas) E2E_SUMMARY=$(or $(E2E_SUMMARY),.e2e/summary-race-off.json)

.PHONY: e2e-beta
e2e-beta: ## e2e-local on BETA_KUBE_VERSION; fails unless networking.k8s.io/v1beta1 was covered.
	$(MAKE) e2e-local KUBE_VERSION=$(BETA_KUBE_VERSION) E2E_REQUIRE=v1beta1

.PHONY: e2e-kind
e2e-kind: ## Run the e2e suite on kind with the real image and manifests (needs Docker; KEEP_CLUSTER=1 keeps it).
	KUBECTL=$(KUBECTL) TOOLS_DIR=$(TOOLS_DIR) CONTAINER_TOOL=$(CONTAINER_TOOL) KIND_VARIANT=v1 hack/kind/e2e.sh

.PHONY: kind-node-image
kind-node-image: ## Build (or find cached) the offline kind node image for KUBE_VERSION (hack/kind/node/build.sh).
	hack/kind/node/build.sh $(KUBE_VERSION)

.PHONY: e2e-kind-beta
e2e-kind-beta: ## e2e-kind on Kubernetes 1.32 with the v1beta1 API behind its feature gate.
	KUBECTL=$(KUBECTL) TOOLS_DIR=$(TOOLS_DIR) CONTAINER_TOOL=$(CONTAINER_TOOL) KIND_VARIANT=v1beta1 hack/kind/e2e.sh

##@ Deployment

.PHONY: manifests
manifests: ## Render every overlay into MANIFESTS_DIR/OVERLAY.yaml (IMG=... sets the image, except in kind's).
	@mkdir -p $(MANIFESTS_DIR)
	@for overlay in $(OVERLAYS); do \
	  img=$(if $(filter command line,$(origin IMG)),$(IMG)); [[ $$overlay != kind ]] || img=; \
	  KUBECTL=$(KUBECTL) IMG=$$img hack/manifests/render.sh $$overlay > $(MANIFESTS_DIR)/$$overlay.yaml; \
	  echo "$(MANIFESTS_DIR)/$$overlay.yaml: $$(grep -c '^kind:' $(MANIFESTS_DIR)/$$overlay.yaml) objects"; \
	done

.PHONY: validate-manifests
validate-manifests: ## Build every kustomization and check security, RBAC, webhook and wiring (offline).
	KUBECTL=$(KUBECTL) $(if $(wildcard $(PROMTOOL)),PROMTOOL=$(PROMTOOL)) hack/manifests/validate.sh

##@ Containers

.PHONY: container-engine
container-engine: ## Make sure a Docker engine answers: install docker.io, start dockerd (with a runc shim where needed), buildx.
	hack/containers/engine.sh up
	hack/containers/buildx.sh

.PHONY: container-engine-down
container-engine-down: ## Stop the dockerd that container-engine started (never another one).
	hack/containers/engine.sh down

.PHONY: vap
vap: ## Regenerate config/vap/OVERLAY/ (the ValidatingAdmissionPolicy of each overlay's policy) after a policy change.
	@for overlay in gke generic; do \
	  node_modules/.bin/node src/main.ts generate vap --policy config/overlays/$$overlay/policy.yaml \
	    > config/vap/$$overlay/validating-admission-policy.yaml; \
	  echo "config/vap/$$overlay/validating-admission-policy.yaml"; \
	done

.PHONY: image
image: ## Build the image IMG (BASE_IMAGES=auto|upstream|local; local: bases built from Debian packages).
	IMG=$(IMG) hack/images/build.sh

.PHONY: image-bases
image-bases: ## Build the local stand-ins for the Dockerfile's base images (cached by version).
	hack/images/bases.sh

.PHONY: image-verify
image-verify: ## Run the image IMG as the Deployment does against a local control plane: user, read-only, /readyz, a review, SIGTERM.
	IMG=$(IMG) hack/images/verify.sh

.PHONY: image-verify-negative
image-verify-negative: ## Show image-verify failing on images and runs that break what it checks (root, capabilities, writable root, a shell, dev packages).
	IMG=$(IMG) hack/images/verify-negative.sh

.PHONY: image-verify-cli
image-verify-cli: ## Run every subcommand from the image IMG as a team does in CI (docker run IMG check ..., files mounted).
	IMG=$(IMG) CONTAINER_TOOL=$(CONTAINER_TOOL) hack/images/verify-cli.sh

.PHONY: deploy
deploy: ## Install config/overlays/OVERLAY into the current kubectl context (needs cert-manager; IMG=... sets the image).
	@$(KUBECTL) get crd certificates.cert-manager.io >/dev/null 2>&1 || { \
	  echo "deploy: cert-manager is not installed in $$($(KUBECTL) config current-context). Install it first:" >&2; \
	  echo "  $(KUBECTL) apply -f https://github.com/cert-manager/cert-manager/releases/download/$(DEFAULT_CERT_MANAGER_VERSION)/cert-manager.yaml" >&2; \
	  exit 1; }
	KUBECTL=$(KUBECTL) $(if $(filter command line,$(origin IMG)),IMG=$(IMG)) hack/manifests/render.sh $(OVERLAY) | $(KUBECTL) apply -f -
	$(KUBECTL) -n servicecidr-guard-system rollout status deployment/servicecidr-guard --timeout=300s

.PHONY: undeploy
undeploy: ## Remove config/overlays/OVERLAY from the current kubectl context, webhook registration first.
	$(KUBECTL) delete validatingwebhookconfiguration servicecidr-guard --ignore-not-found
	KUBECTL=$(KUBECTL) hack/manifests/render.sh $(OVERLAY) | $(KUBECTL) delete --ignore-not-found -f -

##@ Tools

.PHONY: kind
kind: $(KIND) ## Build kind KIND_VERSION into TOOLS_DIR.
$(KIND):
	$(call go-install-tool,$@,sigs.k8s.io/kind,$(KIND_VERSION))

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool PROMTOOL_VERSION into TOOLS_DIR (validate-manifests then checks PromQL).
$(PROMTOOL):
	$(call go-install-tool,$@,github.com/prometheus/prometheus/cmd/promtool,$(PROMTOOL_VERSION))

# go-install-tool TARGET,PACKAGE,VERSION: go install PACKAGE@VERSION, saved as TARGET.
define go-install-tool
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "go install $(2)@$(3)"; \
	GOBIN=$$tmp go install $(2)@$(3); \
	mkdir -p $(dir $(1)); mv "$$tmp/$$(basename $(2))" $(1)
endef
