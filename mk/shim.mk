# shim/: libcudapool.so, the LD_PRELOAD library: every shim/<layer>/*.c
# (shim/README.md says the layers), with common/ and core/.
SHIM_SRCS := $(wildcard shim/*/*.c)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(BUILD)/%.o)
# The library is libcudapool.so.X.Y.Z with SONAME libcudapool.so.X, reached
# through libcudapool.so.X -> libcudapool.so.X.Y.Z and libcudapool.so ->
# libcudapool.so.X, here as once installed (mk/install.mk). LD_PRELOAD takes
# any of the three; a program linked with -lcudapool needs libcudapool.so.X,
# and the dynamic loader then counts a preloaded copy as that one (same
# SONAME) instead of loading a second allocator.
SHIM_LIB         := $(BUILD)/libcudapool.so
SHIM_SONAME      := libcudapool.so.$(VERSION_MAJOR)
SHIM_REAL_NAME   := libcudapool.so.$(VERSION)

$(BUILD)/shim/%.o: shim/%.c $(wildcard shim/*/*.h) $(wildcard common/*.h) $(wildcard core/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(LTO_CFLAGS) $(CUDA_INC) -Icore -Icommon -Ishim -I$(BUILD)/gen -c $< -o $@

# The base names (no _v2, _ptsz, _ptds) of every driver entry point the
# build's CUDA headers know, sorted for strcmp: what cuGetProcAddress may be
# asked for without the shim missing work (backend/driver_names.c). From
# cuda.h's declarations and the names its macros rename them to, and the
# PFN_ typedefs of cudaTypedefs.h and the interop headers' (cudaGL, cudaEGL,
# cudaVDPAU, cudaProfiler), which a runtime looks up too.
CUDA_NAME_SRCS := $(CUDA_HOME)/include/cuda.h $(wildcard $(CUDA_HOME)/include/cuda*Typedefs.h)
$(BUILD)/gen/cuda_names.h: $(CUDA_NAME_SRCS)
	@mkdir -p $(dir $@)
	$(call say,GEN,$@){ echo '/* Generated from $(CUDA_NAME_SRCS) by mk/shim.mk: do not edit. */'; \
	  { tr '\n' ' ' < $< | grep -o 'CUDAAPI[[:space:]]*cu[A-Za-z0-9_]*[[:space:]]*(' | sed 's/CUDAAPI[[:space:]]*//; s/[[:space:]]*(//'; \
	    sed -n -E 's/^[[:space:]]*#[[:space:]]*define[[:space:]]+cu[A-Za-z0-9_]+[[:space:]]+(__CUDA_API_PT(SZ|DS)\()?(cu[A-Za-z0-9_]+).*/\3/p' $<; \
	    cat $(filter-out $<,$^) /dev/null | grep -o 'PFN_cu[A-Za-z0-9_]*' | sed 's/^PFN_//'; } \
	  | sed -E 's/(_v[0-9]+)?(_pt(sz|ds))?$$//' | LC_ALL=C sort -u | sed 's/.*/"&",/'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/shim/backend/driver_names.o: $(BUILD)/gen/cuda_names.h

# Unversioned exports (anonymous version node): they interpose libcudart's
# versioned references such as cudaMalloc@libcudart.so.13. -z nodelete: once
# loaded the library stays mapped (dlclose of a dlopened copy unloads
# nothing), since its threads (live stats, SIGTERM reporter, trace writer)
# run its code until the process ends and its pools hold device memory.
$(BUILD)/$(SHIM_REAL_NAME): $(SHIM_OBJS) $(COMMON_OBJS) $(CORE_OBJS) shim/exports.map
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) -shared $(filter-out -fno-lto,$(LDFLAGS_BASE)) $(LTO_LDFLAGS) \
	  -Wl,--version-script=shim/exports.map -Wl,-z,defs -Wl,-z,nodelete \
	  -Wl,-soname,$(SHIM_SONAME) -o $@ $(SHIM_OBJS) $(COMMON_OBJS) $(CORE_OBJS) -ldl -lz

# Relative links, so that the build folder can move. make sees a link's
# target's time, so neither is redone while the library is unchanged.
$(BUILD)/$(SHIM_SONAME): $(BUILD)/$(SHIM_REAL_NAME)
	$(call say,LN,$@)ln -sfn $(SHIM_REAL_NAME) $@
$(SHIM_LIB): $(BUILD)/$(SHIM_SONAME)
	$(call say,LN,$@)ln -sfn $(SHIM_SONAME) $@

# Unit tests of the modules that need no CUDA at run time (common/: options,
# parse, report, the trace recorder; the launcher script): one Criterion
# binary from tests/unit/shim/*.c (the *_tsan.c there are plain programs,
# mk/replay.mk), linked with libcpcommon.a. The recorder's test
# reads its files back with the replayer: mk/replay.mk adds the replayer's
# objects to SHIM_UNIT_EXTRA (and -lz to SHIM_UNIT_EXTRA_LIBS).
# shim/state/nvtx.c needs no CUDA either: its test (nvtx_heaps.c) drives it
# with the fake NVTX tool.
SHIM_UNIT_SRCS := $(filter-out %_tsan.c,$(wildcard tests/unit/shim/*.c))
SHIM_UNIT_BIN  := $(BUILD)/tests/unit_shim_tests
# The stack walkers' test (tests/unit/shim/stackwalk.c) builds the module in.
SHIM_UNIT_EXTRA      += shim/state/stackwalk.c
SHIM_UNIT_EXTRA_LIBS += -ldl
SHIM_UNIT_MODULES := shim/state/nvtx.c
$(SHIM_UNIT_BIN): $(SHIM_UNIT_SRCS) $(SHIM_UNIT_MODULES) shim/state/nvtx.h $(LSAN_SCOPE) $(COMMON_LIB) $(CORE_LIB) $(wildcard tests/support/*.h) \
                 $(wildcard shim/entry/*.h) $(BUILD)/gen/cuda_names.h shim/state/stackwalk.c shim/state/stackwalk.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(CUDA_INC) -DCP_CUDA_HOME='"$(CUDA_HOME)"' -Icore -Icommon -Ishim -I$(BUILD)/gen -Itools/replay $(TEST_INC) \
	  $(SHIM_UNIT_SRCS) $(SHIM_UNIT_MODULES) \
	  $(SHIM_UNIT_EXTRA) $(COMMON_LIB) $(CORE_LIB) -o $@ $(CRITERION_LINK) $(SHIM_UNIT_EXTRA_LIBS) $(LDFLAGS_BASE)

ALL_TARGETS += $(SHIM_LIB)
ifneq ($(SHIM_UNIT_SRCS),)
ALL_TARGETS += $(SHIM_UNIT_BIN)
TEST_BINS += $(SHIM_UNIT_BIN)
endif

# Python frames (tests/unit/pyframes/*.c): shim/state/pyframes*.c and
# pylayout.c in a program that embeds the python3 on PATH, which runs Python
# code calling back into the test through ctypes, with and without the GIL;
# and the layout row of that Python's version against offsetof() in its
# own internal headers (Py_BUILD_CORE). Built where python3-config and the
# internal headers are installed (scripts/deps installs python3-dev).
PY_CONFIG  ?= python3-config
PY_INCLUDES := $(shell $(PY_CONFIG) --includes 2>/dev/null)
PY_HEADER_DIR := $(patsubst -I%,%,$(firstword $(PY_INCLUDES)))
ifneq ($(wildcard $(PY_HEADER_DIR)/internal/pycore_code.h),)
PY_EMBED_LDFLAGS := $(shell $(PY_CONFIG) --embed --ldflags 2>/dev/null)
PYFRAMES_TEST_SRCS := $(wildcard tests/unit/pyframes/*.c)
PYFRAMES_MODULES   := shim/state/pyframes.c shim/state/pyframes_raw.c shim/state/pylayout.c shim/state/pylinetable.c
PYFRAMES_TEST_BIN  := $(BUILD)/tests/unit_pyframes_tests
# Its own LeakSanitizer scope (lsan_python.c, among the sources): the
# embedded Python's leaks are not ours.
$(PYFRAMES_TEST_BIN): $(PYFRAMES_TEST_SRCS) $(PYFRAMES_MODULES) $(PYFRAMES_MODULES:.c=.h) shim/state/pylayout.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Ishim -Ishim/state $(TEST_INC) $(subst -I,-isystem ,$(PY_INCLUDES)) -rdynamic \
	  $(PYFRAMES_TEST_SRCS) $(PYFRAMES_MODULES) -o $@ -lcriterion $(PY_EMBED_LDFLAGS) -ldl $(LDFLAGS_BASE)
ALL_TARGETS += $(PYFRAMES_TEST_BIN)
TEST_BINS += $(PYFRAMES_TEST_BIN)
endif
