# gvisorgen — see README.md. Tools are built once into a cache outside the repo.
GO        ?= go
# -trimpath keeps the checkout's folder out of Go's build cache keys (and the binaries): a fresh clone elsewhere (CI
# clones one per run) then reuses the compiled packages instead of compiling the module and its test binaries again.
# -ldflags=-w: no DWARF, which nobody reads here (stack traces use the symbol table): linking a test binary that holds
# CUE, kustomize and the Kubernetes API takes 4 s instead of 6, and make test links a dozen of them (58 s against 62).
export GOFLAGS += -trimpath -ldflags=-w
CACHE     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gvisorgen
TOOLBIN   := $(CACHE)/bin
KUSTOMIZE_VERSION := v5.8.2
CUE_VERSION       := v0.17.1
KUBE_SCORE_VERSION := v1.20.0
TRIVY_VERSION      := v0.74.0
KUSTOMIZE := $(TOOLBIN)/kustomize-$(KUSTOMIZE_VERSION)
CUE       := $(TOOLBIN)/cue-$(CUE_VERSION)
KUBE_SCORE := $(TOOLBIN)/kube-score-$(KUBE_SCORE_VERSION)
TRIVY      := $(TOOLBIN)/trivy-$(TRIVY_VERSION)
BIN       := .bin/gvisorgen
# How many cluster suites make e2e-together runs at once: auto (ci/phase/jobs.go decides from what a process costs
# here), all, or a number.
E2E_JOBS  ?= auto

.PHONY: all build generate check vet test test-heavy test-node test-node-e2e e2e e2e-cluster e2e-flux e2e-argocd e2e-agents e2e-together test-kms bench schemas docs fmt lint scan scan-all clean
all: generate

build:
	$(GO) build -o $(BIN) ./cmd/gvisorgen

## generate: write overlays/ and generated/ for every target
generate: build
	$(BIN) generate

## check: fail when overlays/ or generated/ are stale
check: build
	$(BIN) check

## vet: evaluate and validate every target without writing
vet: build
	$(BIN) vet

# Whole tests make test leaves to make test-heavy (the CLI scripts' share is heavyScripts in
# cmd/gvisorgen/main_test.go): fleets evaluated both ways, the fuzz seeds and the kill test of a real generate (its
# windows are covered step by step in make test by internal/tree's TestKilledAtEveryStep), tens of seconds of CPU.
# The README's quick start, run as written in a copy of the repository (TestQuickStart), links a fresh gvisorgen.
# TestValuesAgreeWithVet evaluates every values file of the shared corpus once (internal/schema).
HEAVY_TESTS := TestMemoSameAsFresh|TestParallelSameAsSerial|FuzzValuesFile|TestKillDuringWrite|TestQuickStart|TestValuesAgreeWithVet
HEAVY_PKGS := ./cmd/gvisorgen ./internal/gen ./internal/docs ./internal/schema

## test: lint, unit, golden, CLI and kustomize-parity tests (the inner loop; make test-heavy has the slowest cases)
# NODE: the values schema's patterns are also run in ECMA-262 (ci/nodejs.sh installs node when missing).
test: $(KUSTOMIZE) $(CUE) lint
	NODE=$$(sh ci/nodejs.sh) && export NODE && \
	KUSTOMIZE=$(KUSTOMIZE) CUE=$(CUE) $(GO) test -count=1 -skip '^($(HEAVY_TESTS))$$' ./...
	# the node and cluster suites build only under their tags: vet them too
	$(GO) vet -tags nodetest ./ci/node && $(GO) vet -tags clustertest ./ci/cluster

## test-heavy: what make test leaves out to stay an inner loop (.ci/run runs it): the CLI scripts that run gvisorgen most, HEAVY_TESTS (the kill test of a real generate among them), every benchmark once
test-heavy: $(KUSTOMIZE) $(CUE)
	# -timeout: explicit, go test's default 10 minutes per package is no bound for a CPU-bound suite on a loaded
	# machine (cmd/gvisorgen and internal/gen passed it beside the cluster suites on 2 cores, 2026-12-07)
	GVISORGEN_TEST_HEAVY=1 KUSTOMIZE=$(KUSTOMIZE) CUE=$(CUE) \
		$(GO) test -count=1 -timeout 30m -run '^(TestScripts|$(HEAVY_TESTS))$$' $(HEAVY_PKGS)
	# every benchmark once, so that make bench's cannot rot
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench . -benchtime 1x ./internal/...

## lint: actionlint on the workflows, shellcheck on the scripts (installs both when missing)
lint:
	sh ci/lint.sh

## test-node: the installer scripts against real busybox and containerd (apt + go install)
test-node:
	sh ci/node/setup.sh
	sh ci/node/test.sh

## test-node-e2e: a simulated node: the installer restarts real containerd 1.6, 1.7 and 2.4.2, a runsc CRI pod starts
test-node-e2e:
	sh ci/node/setup.sh
	sh ci/node/e2e-setup.sh
	bash ci/node/e2e.sh

## test-kms: gvisorgen push signing with an AWS KMS key through the sigstore KMS plugin kmsplugin/sigstore-kms-awskms (its own module: gvisorgen links no cloud SDK) against local-kms, an AWS KMS API server built from its module
test-kms:
	cd kmsplugin && $(GO) vet ./... && $(GO) test -count=1 ./...

## e2e: every generated object against a real kube-apiserver + etcd (built once, cached), and the mutation suite
e2e:
	sh ci/k8s/build.sh
	sh ci/apiserver/test.sh

## e2e-cluster: the product on a real single-node cluster (kubelet; containerd 1.6, 1.7 and 2.4.2, one cluster each): GKE-style admission, install, restricted smoke, overhead, re-run, readiness probe, upgrade, uninstall, broken artifact
e2e-cluster:
	sh ci/cluster/setup.sh
	sh ci/cluster/e2e.sh

## e2e-flux: Flux's own source-controller and kustomize-controller (built, cached) reconcile the committed e2e target from a served git repository into fresh clusters (containerd 1.6 and 2.4.2): first sync, version bump, a commit the server rejects, drift reverted, removal
e2e-flux:
	sh ci/cluster/setup.sh
	sh ci/cluster/e2e-flux.sh

## e2e-argocd: Argo CD's own application-controller, repo-server and applicationset-controller (built, cached) sync the committed e2e target from a served git repository into a fresh cluster (containerd 2.4.2): first sync Healthy after the installer, Synced across comparisons, selfHeal, a bump, a forbidden kind refused, removal through the finalizer, the ApplicationSet, its diff against gvisorgen diff
e2e-argocd: $(KUSTOMIZE)
	sh ci/cluster/setup.sh
	KUSTOMIZE=$(KUSTOMIZE) sh ci/cluster/e2e-argocd.sh

## e2e-together: e2e-cluster, e2e-argocd, e2e-flux and e2e-agents side by side, as CI runs them (each suite on clusters of its own): all four at once where a process is cheap (they mostly wait), one per core where it is dear (they are CPU-bound: ci/phase/jobs.go), longest first; what they share is set up and built first (gvisorgen, tlsmirror and the suites' test binary once), every line is prefixed with its suite's name
e2e-together: $(KUSTOMIZE)
	sh ci/cluster/setup.sh
	sh ci/flux/build.sh && sh ci/registry/build.sh && sh ci/agentsandbox/build.sh && sh ci/argocd/build.sh
	$(GO) build -o .bin/phase ./ci/phase
	sh ci/cluster/binaries.sh .bin/e2e
	# built, not go run: go run dies on SIGTERM without passing it on, which would orphan the suites
	GVZ_CLUSTER_BIN=$(CURDIR)/.bin/e2e .bin/phase together -jobs $(E2E_JOBS) cluster='sh ci/cluster/e2e.sh' \
		argocd='KUSTOMIZE=$(KUSTOMIZE) sh ci/cluster/e2e-argocd.sh' flux='sh ci/cluster/e2e-flux.sh' agents='sh ci/cluster/e2e-agents.sh'

## e2e-agents: SIG Apps' agent-sandbox controller (built, cached) on a sandbox class of a fresh cluster (containerd 2.4.2): a warm pool Pending until the class's gate opens, then under gVisor; a claim adopting a warm sandbox; suspend and resume; a gVisor bump with a sandbox running across it
e2e-agents:
	sh ci/cluster/setup.sh
	sh ci/cluster/e2e-agents.sh

## scan: kube-score on the committed generated/ and smoke/ (make check keeps them fresh); every finding must be justified in ci/scan/accepted.tsv (docs/security.md)
scan: $(KUBE_SCORE)
	$(GO) run ./ci/scan -kube-score $(KUBE_SCORE)

## scan-all: scan plus trivy config (built from its Go module: a heavy cold build, see docs/testing.md)
scan-all: $(KUBE_SCORE) $(TRIVY)
	$(GO) run ./ci/scan -kube-score $(KUBE_SCORE) -trivy $(TRIVY)

## bench: gvisorgen vs cue export + kustomize build vs helm template; writes BENCHMARKS.md
bench:
	GO=$(GO) bash ci/bench/run.sh

## schemas: regenerate cue/cue.mod/gen (cue get go / cue get crd), repair it and prune it to what cue/*.cue uses
schemas: $(CUE)
	CUE=$(CUE) sh ci/schemas.sh

## docs: write docs/values.md from the values schema
docs:
	$(GO) run ./ci/docsgen > docs/values.md.tmp && mv docs/values.md.tmp docs/values.md

fmt:
	gofmt -w cmd internal ci
	$(CUE) fmt ./cue/...

# Tools are versioned by file name; a half-finished install never looks done.
$(KUSTOMIZE):
	mkdir -p $(TOOLBIN)/tmp-kustomize
	GOBIN=$(TOOLBIN)/tmp-kustomize $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(TOOLBIN)/tmp-kustomize/kustomize $@ && rmdir $(TOOLBIN)/tmp-kustomize

$(CUE):
	mkdir -p $(TOOLBIN)/tmp-cue
	GOBIN=$(TOOLBIN)/tmp-cue $(GO) install cuelang.org/go/cmd/cue@$(CUE_VERSION)
	mv $(TOOLBIN)/tmp-cue/cue $@ && rmdir $(TOOLBIN)/tmp-cue

$(KUBE_SCORE):
	mkdir -p $(TOOLBIN)/tmp-kube-score
	GOBIN=$(TOOLBIN)/tmp-kube-score $(GO) install github.com/zegl/kube-score/cmd/kube-score@$(KUBE_SCORE_VERSION)
	mv $(TOOLBIN)/tmp-kube-score/kube-score $@ && rmdir $(TOOLBIN)/tmp-kube-score

# trivy builds only with Go's JSON v2 experiment (its own release builds set it).
$(TRIVY):
	mkdir -p $(TOOLBIN)/tmp-trivy
	GOEXPERIMENT=jsonv2 GOBIN=$(TOOLBIN)/tmp-trivy $(GO) install github.com/aquasecurity/trivy/cmd/trivy@$(TRIVY_VERSION)
	mv $(TOOLBIN)/tmp-trivy/trivy $@ && rmdir $(TOOLBIN)/tmp-trivy

clean:
	rm -rf .bin
