# agentrt: make demo, make test. See README.md.
GO      ?= go
BIN     := bin
BUILD   := build
AGENTRT := $(BIN)/agentrt
# Debian packages the build needs: clang + wasi-libc for C guests, rustc +
# cargo + the wasm32-wasi standard library for Rust guests (rustc links wasm
# with lld), wabt for hand-written wasm fixtures, bubblewrap for the native
# tools sandbox, git for the tool tests and the repo-report example,
# openssh-client for the approval tests (votes signed by ssh-keygen -Y sign,
# keys held by ssh-agent).
APT_PKGS := clang lld wasi-libc libclang-rt-dev-wasm32 rustc cargo libstd-rust-dev-wasm32 wabt bubblewrap git openssh-client chromium
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
TEST_TIMEOUT ?= 25m
# The guest SDK is a module of its own (guest-sdk/go.mod), outside ./...;
# the main module replaces it with ./guest-sdk, so its packages are named
# by import path.
SDK := github.com/agentrt/agentrt/guest-sdk/...

.PHONY: all deps build examples demo test test-cluster check bench bench-peers ui fuzz clean

all: build

## deps: check the C, Rust and wasm toolchains, installing them with apt-get when run as root.
deps:
	@missing=""; \
	for t in clang wasm-ld wat2wasm bwrap git ssh-keygen ssh-agent chromium; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -f /usr/include/wasm32-wasi/stdio.h ] || missing="$$missing wasi-libc"; \
	ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || missing="$$missing libclang-rt-dev-wasm32"; \
	rust=""; for r in $$(command -v rustc) /usr/bin/rustc; do \
	  [ -x "$$r" ] && ls "$$($$r --print sysroot)"/lib/rustlib/wasm32-wasi*/lib/libstd-*.rlib >/dev/null 2>&1 && rust="$$r"; \
	done; [ -n "$$rust" ] || missing="$$missing rustc(wasm32-wasi)"; \
	[ -n "$$rust" ] && { [ -x "$$(dirname $$rust)/cargo" ] || command -v cargo >/dev/null 2>&1; } || missing="$$missing cargo"; \
	if [ -n "$$missing" ]; then \
	  echo "deps: missing:$$missing"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "deps: installing $(APT_PKGS) with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS) >/dev/null || exit 1; \
	  else \
	    echo "deps: install them with: sudo apt-get install $(APT_PKGS)"; exit 1; \
	  fi; \
	fi
	@$(GO) version >/dev/null || { echo "deps: the go command (Go 1.26) is required"; exit 1; }
	@cc=$$($(GO) env CC); command -v $${cc%% *} >/dev/null 2>&1 || { echo "deps: the C compiler $$cc (cgo, for the wasmtime engine) is missing: apt-get install gcc, or set CC=clang"; exit 1; }

## build: the agentrt CLI in bin/.
build:
	$(GO) build -o $(AGENTRT) ./cmd/agentrt

## examples: every example agent, built from source into build/.
examples: build deps
	@mkdir -p $(BUILD)
	$(AGENTRT) build examples/crawler -o $(BUILD)/crawler.wasm
	$(AGENTRT) build examples/wordfreq-c -o $(BUILD)/wordfreq-c.wasm
	$(AGENTRT) build examples/wordfreq-rust -o $(BUILD)/wordfreq-rust.wasm
	$(AGENTRT) build examples/repo-report -o $(BUILD)/repo-report.wasm
	$(AGENTRT) build examples/research-agent -o $(BUILD)/research-agent.wasm
	$(AGENTRT) build examples/mcp-notes -o $(BUILD)/mcp-notes.wasm
	$(AGENTRT) build examples/team -o $(BUILD)/team.wasm
	for c in fetch count write; do $(AGENTRT) build examples/team/$$c -o $(BUILD)/team-$$c.wasm || exit 1; done
	CGO_ENABLED=0 $(GO) build -o $(BIN)/mcp-notes-server ./examples/mcp-notes/server

## demo: run the crawler example on the embedded store, show its journal, replay and verify it;
## then the research agent against the fake model provider on loopback (no network, no API key);
## then the mcp-notes agent with its notes MCP server, launched under the sandbox, and the research
## agent in its MCP mode with the same server; then the team planner in a cell daemon, with three
## sub-agents of different powers and a rolled-back step.
demo: examples
	$(GO) build -o $(BIN)/siteserver ./examples/crawler/siteserver
	$(GO) build -o $(BIN)/fakellm ./cmd/fakellm
	@sh examples/demo.sh

## test: the whole test suite, then the concurrent parts (the store's
## committer, concurrent runs, parallel verification, the cell daemon) again under the race detector,
## then engine neutrality (build tag wasmtime, cgo): the cross-engine replay tests,
## and the host and replay suites again with every run on wasmtime.
test: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v /journal/jetstore) $(SDK)
	@# The dashboard's tests (TestUI*: pages rendered, a headless Chromium)
	@# run once, in the first pass: they add little concurrency of their own
	@# and are slow under the race detector (a browser, and guests compiled
	@# with the detector's overhead).
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestUI' $$($(GO) list ./journal/... | grep -v /journal/jetstore) ./host/ ./host/caps/... ./host/cell/
	@# The JetStream store's tests run alone: their 3-server clusters live in
	@# the test process, and starved of CPU by the packages beside them a
	@# server misses its raft heartbeats and is taken for offline.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./journal/jetstore/...
	@# The tag changes only the host package (the wasmtime engine is built
	@# in): its packages below (host/cell, host/caps/...) run here as in the
	@# first pass, on wazero, so this pass names the packages whose tests
	@# the tag changes; the last pass runs host/caps/... on wasmtime.
	$(GO) test -tags wasmtime -count=1 -timeout $(TEST_TIMEOUT) ./host/ ./replay/... ./examples/repo-report/ ./examples/wordfreq-rust/
	$(GO) test -tags wasmtime -count=1 -timeout $(TEST_TIMEOUT) -run 'TestScripts/engine' ./cmd/agentrt/
	AGENTRT_TEST_ENGINE=wasmtime $(GO) test -tags wasmtime -count=1 -timeout $(TEST_TIMEOUT) ./host/ ./host/caps/... ./replay/

## test-cluster: the cluster fault matrix, which make test leaves out: JetStream servers stopped
## under writers (R1: the server restarted; R3: the journal stream's leader stopped, back after 2 s),
## fenced commits, racing appends and a renewed lease going through, then the fencing and lease
## conformance tests on the store that lived through it; and a crawl on a cell on R3 whose journal
## stream's leader is stopped mid-run, and completes. About a minute.
test-cluster:
	AGENTRT_TEST_CLUSTER=1 $(GO) test -count=1 -p 1 -timeout 10m -run 'TestFault' ./journal/jetstore/ ./host/cell/

## check: gofmt, go vet (host and wasip1) and cross-compilation for every platform we claim
## (pure Go, CGO_ENABLED=0); on linux/amd64 also vet and build with the tag wasmtime (cgo,
## native only: cross-compiling the tagged build needs a C cross toolchain and is not claimed).
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./... $(SDK)
	@if [ "$$($(GO) env GOOS)/$$($(GO) env GOARCH)" = linux/amd64 ]; then \
	  echo "vet and build -tags wasmtime (cgo)"; \
	  CGO_ENABLED=1 $(GO) vet -tags wasmtime ./... && CGO_ENABLED=1 $(GO) build -tags wasmtime ./... || exit 1; \
	fi
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... $(SDK) ./examples/crawler/ ./examples/repo-report/ ./examples/research-agent/ ./examples/mcp-notes/
	@for p in $(PLATFORMS); do \
	  echo "build $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build ./... $(SDK) || exit 1; \
	done

## bench: measure the durable path against its floors; writes bench/results.json and bench/results.md.
bench: deps
	$(GO) run -tags wasmtime ./bench/cmd/agentrt-bench -out bench/results.json

## bench-peers: agentrt beside DBOS Transact Go (v1.8.0) on PostgreSQL at the same durability: 100-step
## workflows and agents one at a time (in process, whole processes) and 16 and 64 at once (in process,
## through agentrt cell serve). Installs Debian's postgresql with apt-get when run as root and it is
## missing; starts its own server on loopback in a temporary folder. Writes bench/peers.json. Not
## part of make test or CI. See bench/README.md.
bench-peers: build
	@if ! command -v pg_ctl >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "bench-peers: installing postgresql with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || exit 1; \
	  else \
	    echo "bench-peers: PostgreSQL is missing: sudo apt-get install postgresql"; exit 1; \
	  fi; \
	fi
	cd bench/peers && $(GO) run ./cmd/peers-bench -agentrt $(CURDIR)/$(AGENTRT) -out $(CURDIR)/bench/peers.json

## ui: the dashboard's tests, in headless Chromium too, keeping its screenshots in build/ui/;
## and the p95 of a timeline page of a 100 000-call journal (goal: under 200 ms).
ui: deps
	AGENTRT_ARTIFACTS=$(CURDIR)/$(BUILD)/ui $(GO) test -count=1 -run 'TestUI|TestAgentCannotReachTheDashboard' ./host/cell/
	$(GO) test -count=1 -run '^$$' -bench UIJournalPage100k -benchtime 100x ./host/cell/

## fuzz: run each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for p in ./abi ./internal/guestabi ./journal ./journal/badgerstore ./host ./replay; do \
	  for f in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
	  done; \
	done

clean:
	rm -rf $(BIN) $(BUILD) .demo
