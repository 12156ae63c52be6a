# SHIFT-Go build and test entry points. `make test` is what CI (.ci/run) runs.
#
# Variables (override on the command line or in the environment):
#   GO                Go command (default: go)
#   TEST_TIMEOUT      per-package go test timeout (default: 20m)
#   GOTESTFLAGS       extra flags for go test in `test` and `vm-test` (e.g. -count=1)
#   BENCHFLAGS        flags for `bench` (default: -benchmem -count=1)
#   STATICCHECK       staticcheck module@version run by `lint` through `go run`
#   PROVIDER_DIR      libibverbs' provider directory for `install-plugin`
#                     (default /usr/lib/<multiarch>/libibverbs, as Debian's libibverbs1 has it)
#   DESTDIR           staging root for `install-plugin`
# The real-kernel tier (internal/vmtest) also reads SHIFT_VM, SHIFT_VM_CACHE, SHIFT_VM_ACCEL,
# SHIFT_VM_KERNEL_PKG, SHIFT_VM_TIMEOUT and SHIFT_VM_REPORT; see internal/vmtest/env.go.

SHELL        := bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
TEST_TIMEOUT ?= 20m
GOTESTFLAGS  ?=
BENCHFLAGS   ?= -benchmem -count=1
STATICCHECK  ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BUILD_DIR    := .build
VM_REPORT    := $(BUILD_DIR)/vm-report.txt
# The race tier: every package but the simulation (one goroutine, stepped), the VM tier and
# the plugin (their code runs in other processes: a guest, a C program), and, for time, the
# emulated kernel library and the demo (89 s and 38 s under -race on the 2-core machine).
RACE_SKIP    := -e '/internal/sim$$' -e '/internal/vmtest$$' -e '/provider/plugin' -e '/mlx5/emu/kernelso$$' -e '/internal/demo$$'
RACE_TEST    = $(GO) test -race -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) $$($(GO) list ./... | grep -v $(RACE_SKIP))

# The plugin: a c-shared library with asynchronous preemption off by default (no SIGURG on
# the application's threads) and the soname libibverbs-style lookups use; the preload object
# is plain C. internal/tooltest builds them with the same flags for the tests.
PLUGIN       := bin/libmlx5-shift-rdmav34.so
PRELOAD      := bin/libmlx5-shift-preload.so
PLUGIN_LDFLAGS := -s -w -X runtime.godebugDefault=asyncpreemptoff=1 -extldflags -Wl,-soname,libmlx5-shift-rdmav34.so
EMU_KERNEL   := bin/libmlx5-emu-kernel.so
KERNEL_LDFLAGS := -s -w -X runtime.godebugDefault=asyncpreemptoff=1 -extldflags -Wl,-soname,libmlx5-emu-kernel.so
PRELOAD_CFLAGS := -O2 -Wall -fPIC -shared -fvisibility=hidden -Wl,--version-script=provider/plugin/preload/preload.map -Wl,-soname,libmlx5-shift-preload.so
CC           ?= gcc
MULTIARCH    := $(shell $(CC) -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PROVIDER_DIR ?= /usr/lib/$(MULTIARCH)/libibverbs

.PHONY: all deps build test race vm-test hil bench generate lint demo clean plugin emu-kernel install-plugin uninstall-plugin

all: build

## deps: check Go >= 1.26; install missing Debian packages as root, list them otherwise
deps:
	@GO=$(GO) scripts/deps.sh

## build: compile every package and the commands into bin/
build:
	$(GO) build ./...
	@cmds=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./cmd/... 2>/dev/null || true); \
	if [ -n "$$cmds" ]; then mkdir -p bin && $(GO) build -o bin/ $$cmds && ls bin; fi

## plugin: libmlx5-shift (bin/libmlx5-shift-rdmav34.so) and its preload object
## (bin/libmlx5-shift-preload.so)
plugin:
	@mkdir -p bin
	$(GO) build -buildmode=c-shared -ldflags='$(PLUGIN_LDFLAGS)' -o $(PLUGIN) ./provider/plugin
	@rm -f bin/libmlx5-shift-rdmav34.h
	$(CC) $(PRELOAD_CFLAGS) -o $(PRELOAD) provider/plugin/preload/preload.c -ldl
	@ls -l $(PLUGIN) $(PRELOAD)

## emu-kernel: the emulated kernel library (bin/libmlx5-emu-kernel.so): LD_PRELOAD it to run
## a program on Debian's own libmlx5 over emulated ConnectX devices (shiftctl emu up -identity connectx)
emu-kernel:
	@mkdir -p bin
	$(GO) build -buildmode=c-shared -ldflags='$(KERNEL_LDFLAGS)' -o $(EMU_KERNEL) ./mlx5/emu/kernelso
	@rm -f bin/libmlx5-emu-kernel.h
	@ls -l $(EMU_KERNEL)

## install-plugin: install the plugin and the preload object into libibverbs' provider
## directory and register the driver (/etc/libibverbs.d/mlx5-shift.driver); root
install-plugin: plugin
	install -d $(DESTDIR)$(PROVIDER_DIR) $(DESTDIR)/etc/libibverbs.d
	install -m 0644 $(PLUGIN) $(PRELOAD) $(DESTDIR)$(PROVIDER_DIR)/
	echo "driver mlx5-shift" > $(DESTDIR)/etc/libibverbs.d/mlx5-shift.driver
	@echo "installed: select it with RDMAV_DRIVERS=mlx5-shift (and, for programs that link libmlx5,"
	@echo "  LD_PRELOAD=$(PROVIDER_DIR)/libmlx5-shift-preload.so); see README.md"

## uninstall-plugin: remove what install-plugin installed
uninstall-plugin:
	rm -f $(DESTDIR)$(PROVIDER_DIR)/libmlx5-shift-rdmav34.so $(DESTDIR)$(PROVIDER_DIR)/libmlx5-shift-preload.so \
		$(DESTDIR)/etc/libibverbs.d/mlx5-shift.driver

## test: vet and test everything, including the real-kernel VM tier (a normal Go test); the
## simulation (internal/sim) runs after the other packages, alone: its minutes of CPU beside
## them starved the timing-bound tests of the emulated NICs (TestNetnsRoCEv2Flapping,
## TestManyQPsBothSides) on the 2-core machine; then the race tier (see race)
test: deps
	@mkdir -p $(BUILD_DIR); rm -f $(VM_REPORT)
	$(GO) vet ./...
	@start=$$(date +%s); rc=0; \
	SHIFT_VM_REPORT=$(CURDIR)/$(VM_REPORT) $(GO) test -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) \
		$$($(GO) list ./... | grep -v '/internal/sim$$') 2>&1 | tee $(BUILD_DIR)/test.log || rc=$$?; \
	$(GO) test -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) ./internal/sim 2>&1 | tee -a $(BUILD_DIR)/test.log || rc=$$?; \
	echo "== go test summary: $$(grep -c '^ok ' $(BUILD_DIR)/test.log || true) ok," \
	     "$$(grep -c '^FAIL[[:space:]]' $(BUILD_DIR)/test.log || true) FAIL," \
	     "$$(grep -c 'no test files' $(BUILD_DIR)/test.log || true) without tests," \
	     "$$(( $$(date +%s) - start ))s"; \
	rstart=$$(date +%s); \
	$(RACE_TEST) 2>&1 | grep -v 'no test files' | tee $(BUILD_DIR)/race.log || rc=$$?; \
	echo "== race tier (go test -race): $$(grep -c '^ok ' $(BUILD_DIR)/race.log || true) ok," \
	     "$$(grep -c '^FAIL[[:space:]]' $(BUILD_DIR)/race.log || true) FAIL," \
	     "$$(( $$(date +%s) - rstart ))s"; \
	if [ -s $(VM_REPORT) ]; then echo "== real-kernel tier (internal/vmtest):"; cat $(VM_REPORT); \
	elif grep -q 'internal/vmtest.*(cached)' $(BUILD_DIR)/test.log; then \
		echo "== real-kernel tier: result from the go test cache; 'make vm-test' re-runs it"; \
	else echo "== real-kernel tier: did not run (skipped or failed; see above)"; fi; \
	exit $$rc

## hil: the hardware-in-the-loop matrix on real ConnectX ports (SHIFT_HIL_DEVICES, as root):
## the provider's end-to-end bodies, SHIFT failover under real link downs and flapping, the
## withheld doorbell, the link probe, and the unmodified programs through libmlx5-shift;
## writes out/hil/report.md (machine, devices and firmware, results, logged figures)
hil: deps
	@test -n "$${SHIFT_HIL_DEVICES:-}" || { echo "make hil: set SHIFT_HIL_DEVICES to 2 or 4 mlx5 devices" \
		"(host A default[,backup], host B default[,backup]); see README"; exit 2; }
	@mkdir -p out/hil
	-$(GO) test -json -count=1 -timeout 30m -run 'TestHIL' ./provider ./failover ./fence ./probe ./provider/plugin > out/hil/test.json
	$(GO) run ./internal/hiltest/cmd/hilreport -o out/hil/report.md < out/hil/test.json

## race: the race tier alone: the packages of RACE_SKIP's complement under go test -race
race: deps
	$(RACE_TEST)

## vm-test: the real-kernel tier alone, verbose, never cached; a missing prerequisite fails
vm-test:
	SHIFT_VM=1 $(GO) test -count=1 -v -timeout $(TEST_TIMEOUT) $(GOTESTFLAGS) ./internal/vmtest/

## bench: run every benchmark (no tests)
bench:
	$(GO) test -run '^$$' -bench . $(BENCHFLAGS) -timeout $(TEST_TIMEOUT) ./...

## generate: regenerate generated code (ABI types from the uapi headers, eBPF objects)
generate:
	$(GO) generate ./...

## lint: gofmt must list nothing, go vet, staticcheck (skipped if it cannot be fetched)
lint:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt -l lists:"; echo "$$out"; exit 1; fi; echo "gofmt: clean"
	$(GO) vet ./...
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then \
		echo "staticcheck ./... ($(STATICCHECK))"; $(GO) run $(STATICCHECK) ./...; \
	else echo "lint: staticcheck ($(STATICCHECK)) unavailable here (no module proxy?); skipped"; fi

## demo: the main job: two emulated hosts x two NICs, verified WRITE/WRITE_IMM + SEND traffic,
## the default NIC failing at 5 s and back at 10 s, without SHIFT (plain provider), with it,
## and with it reading link events;
## plot and per-interval table (out/demo/timeline.{svg,png,csv}), a live progress line on a
## terminal, and the verdict lines last;
## then, as root with perftest, unmodified ib_write_bw through the plugin with host A's default
## rail pulled, plain vs SHIFT (out/demo/tools/timeline.{svg,png,csv}), or one line saying why not
demo:
	@GO=$(GO) scripts/deps.sh demo
	@$(MAKE) --no-print-directory plugin >/dev/null 2>&1 || echo "demo: the plugin did not build (it needs gcc and libibverbs-dev); the unmodified-program part will say so"
	$(GO) run ./cmd/shiftctl demo -out out/demo -plugin bin

## clean: remove build outputs and the go test cache (the VM kernel cache is kept: see SHIFT_VM_CACHE)
clean:
	rm -rf bin $(BUILD_DIR)
	$(GO) clean -testcache
