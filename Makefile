# cudapool build. Everything lands under $(BUILD) (default build/).
#   make               build the library, tools and test programs
#   make test          build and run every test (installs uthash/Criterion if missing)
#   make test-sanitize the tests again under ASan+UBSan, the threaded ones under TSan
#   make bench         core benchmarks on the simulated device
#   make demo          the bundled demo workload natively and under cudapool
#   make wheel         a pip wheel with the library, the launcher and the tools inside
#   make install PREFIX=/usr/local [DESTDIR=...]   make uninstall (the same)
#   make V=1 ...       show every command in full (default: one short line each)
# Each component adds its targets from mk/<component>.mk.

BUILD     ?= build
PREFIX    ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CC        ?= cc
SAN       ?=
OPT       ?= -O2

# Quiet by default: a recipe prefixed with $(call say,TAG,$@) prints
# "  TAG     target" instead of the command; V=1 prints the commands as make
# does. Errors and warnings print either way.
V ?= 0
ifeq ($(V),1)
Q :=
else
Q := @
say = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

CFLAGS_BASE  := -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -fPIC \
                -fvisibility=hidden -pthread
LDFLAGS_BASE := -pthread
CFLAGS_BASE  += $(EXTRA_CFLAGS)
# The preloaded library is linked with link-time optimisation: a cached
# cudaMalloc + cudaFree crosses interpose, serve, device, tcache and pool,
# and inlining across them took the pair from 33 to 27 ns through the fake
# runtime (docs/BENCHMARKS.md). Fat objects: everything else links the same
# objects' ordinary code (-fno-lto, which the library's link leaves out:
# anywhere on a command line it wins), as before. Not under sanitizers, nor
# where the compiler cannot link with it (the H200 machine's gcc has no
# lto-wrapper, and small test links still pass there): the probe asks for it.
LTO_WORKS := $(shell test -x "$$($(CC) -print-prog-name=lto-wrapper 2>/dev/null)" && echo 1)
ifeq ($(SAN)$(LTO_WORKS),1)
LTO_CFLAGS  := -flto=auto -ffat-lto-objects
LTO_LDFLAGS := -flto=auto $(OPT)
else
LTO_LDFLAGS := -fno-lto
endif
LDFLAGS_BASE += -fno-lto
ifneq ($(SAN),)
CFLAGS_BASE  += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_BASE += -fsanitize=$(SAN)
endif
CUDA_INC := -isystem $(CUDA_HOME)/include
# The public header, for the core, the shim, the tools and the tests.
CFLAGS_BASE += -Iinclude

# A preloaded library built with sanitizers needs their runtimes preloaded
# first; tests that preload libcudapool.so read this from the environment.
SAN_PRELOAD := $(strip $(foreach s,asan ubsan tsan,$(if $(findstring $(subst asan,address,$(subst ubsan,undefined,$(subst tsan,thread,$(s)))),$(SAN)),$(shell $(CC) -print-file-name=lib$(s).so))))
export CUDAPOOL_TEST_SAN_PRELOAD := $(SAN_PRELOAD)
export CUDAPOOL_TEST_BUILD := $(abspath $(BUILD))
# The sanitizers of that build: a make the tests run (tests/unit/shim/install.c)
# must never rebuild it without them.
export CUDAPOOL_TEST_SAN := $(SAN)

DEPS_STAMP := $(BUILD)/.deps-ok

# Helpers shared by the tests (tests/support/, see tests/README.md): every
# test build searches it for headers.
TEST_INC := -Itests/support
# Every Criterion test binary links this: it scopes LeakSanitizer's one
# suppression (a leak inside libcriterion's runner) to the runner process.
LSAN_SCOPE     := tests/support/lsan_scope.c
CRITERION_LINK := $(LSAN_SCOPE) -lcriterion

# The version has one home, include/cudapool.h (CUDAPOOL_VERSION_MAJOR and
# co): the library's file name and SONAME, cudapool.pc and the report take
# it from there, and tests hold python/cudapool's __version__ to it.
version_part = $(shell sed -n \
  's/^\#define CUDAPOOL_VERSION_$(1) \([0123456789][0123456789]*\)$$/\1/p' include/cudapool.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION       := $(VERSION_MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
ifneq ($(words $(subst ., ,$(VERSION))),3)
$(error include/cudapool.h: cannot read CUDAPOOL_VERSION_MAJOR/MINOR/PATCH (got "$(VERSION)"))
endif

# Filled by the fragments.
ALL_TARGETS :=
TEST_BINS :=
TSAN_TEST_BINS :=
BENCH_CMDS :=

.PHONY: all test test-sanitize test-tsan lsan-selftest bench demo clean deps
all: build-all

include mk/core.mk
include mk/common.mk
-include mk/shim.mk
-include mk/fakecudart.mk
-include mk/fakecuda.mk
-include mk/fakenvtx.mk
-include mk/fakenvml.mk
-include mk/replay.mk
-include mk/live.mk
-include mk/gpu.mk
-include mk/fuzz.mk
-include mk/python.mk
-include mk/docblocks.mk
# Last: it installs what the others built.
include mk/install.mk

# A planted skip must show in scripts/run-tests' closing line
# (tests/unit/shim/run_tests.c runs it; make test does not).
SKIP_SELFTEST_BIN := $(BUILD)/tests/planted_skip
$(SKIP_SELFTEST_BIN): tests/selftest/planted_skip.c $(LSAN_SCOPE) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $< -o $@ $(CRITERION_LINK) $(LDFLAGS_BASE)
ALL_TARGETS += $(SKIP_SELFTEST_BIN)

# A planted hang must be killed and named by scripts/run-tests (run_tests.c too).
HANG_SELFTEST_BIN := $(BUILD)/tests/planted_hang
$(HANG_SELFTEST_BIN): tests/selftest/planted_hang.c $(LSAN_SCOPE) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $< -o $@ $(CRITERION_LINK) $(LDFLAGS_BASE)
ALL_TARGETS += $(HANG_SELFTEST_BIN)

build-all: $(ALL_TARGETS)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps
	@mkdir -p $(dir $@)
	$(Q)scripts/deps
	@touch $@

test: build-all $(TEST_BINS)
	$(Q)scripts/run-tests $(TEST_BINS)

# Sanitizer builds live in their own folders so they never mix with build/.
test-sanitize:
	@echo "== ASan+UBSan: build/asan"
	$(Q)$(MAKE) --no-print-directory BUILD=build/asan SAN=address,undefined test lsan-selftest
	@echo "== ThreadSanitizer: build/tsan"
	$(Q)$(MAKE) --no-print-directory BUILD=build/tsan SAN=thread test-tsan

# A planted leak must fail scripts/run-tests under ASan (see tests/support/lsan_scope.c).
LSAN_SELFTEST_BIN := $(BUILD)/tests/planted_leak
$(LSAN_SELFTEST_BIN): tests/selftest/planted_leak.c $(LSAN_SCOPE)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $< -o $@ $(CRITERION_LINK) $(LDFLAGS_BASE)
lsan-selftest: $(LSAN_SELFTEST_BIN)
	@if scripts/run-tests $(LSAN_SELFTEST_BIN) >$(BUILD)/lsan-selftest.log 2>&1; then \
	  echo "lsan-selftest: a planted leak passed scripts/run-tests" >&2; exit 1; fi
	@grep -q 'planted_leak (LeakSanitizer report)' $(BUILD)/lsan-selftest.log
	@echo "lsan-selftest: a planted leak fails the run, as it must"

test-tsan: build-all $(TSAN_TEST_BINS)
	$(Q)scripts/run-tests $(TSAN_TEST_BINS)

bench: build-all
	@set -e; $(foreach c,$(BENCH_CMDS),$(c);)

clean:
	rm -rf build
