# tests/fakes/cudart/: the fake CUDA runtime (host memory, native error
# codes, call counters, held events), the test programs linked against it
# (tests/programs/runtime/), and the shim's integration tests
# (tests/integration/) that run the programs with and without the shim.
FAKECUDART_DIR  := $(BUILD)/fakecudart
FAKECUDART_SRCS := $(wildcard tests/fakes/cudart/*.c)
FAKECUDART_OBJS := $(FAKECUDART_SRCS:%.c=$(BUILD)/%.o)
FAKECUDART_LIB  := $(FAKECUDART_DIR)/libcudart.so.13
FAKECUDART_LINK := $(FAKECUDART_DIR)/libcudart.so

# __CUDA_API_VERSION_INTERNAL makes the toolkit header declare both the plain
# and the _ptsz/_ptds entry points, as libcudart's own build does; the
# version script, not visibility, decides what is exported.
$(BUILD)/tests/fakes/cudart/%.o: tests/fakes/cudart/%.c $(wildcard tests/fakes/cudart/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -fvisibility=default -D__CUDA_API_VERSION_INTERNAL $(CUDA_INC) \
	  -c $< -o $@

$(FAKECUDART_LIB): $(FAKECUDART_OBJS) tests/fakes/cudart/exports.map
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) -shared $(LDFLAGS_BASE) -Wl,-soname,libcudart.so.13 \
	  -Wl,--version-script=tests/fakes/cudart/exports.map -Wl,-z,defs -o $@ $(FAKECUDART_OBJS)

$(FAKECUDART_LINK): $(FAKECUDART_LIB)
	$(call say,LN,$@)ln -sf libcudart.so.13 $@

# A fake libcuda.so.1 with green contexts and stream waits only, over the fake
# runtime (tests/fakes/cudart/green/libcuda.c), for programs that link it as well.
FAKEGREEN_DIR  := $(FAKECUDART_DIR)/green
FAKEGREEN_LIB  := $(FAKEGREEN_DIR)/libcuda.so.1
FAKEGREEN_LINK := $(FAKEGREEN_DIR)/libcuda.so

$(FAKEGREEN_LIB): tests/fakes/cudart/green/libcuda.c tests/fakes/cudart/fakecuda.h $(FAKECUDART_LINK)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS_BASE) -fvisibility=default $(CUDA_INC) -Itests/fakes/cudart -shared $< \
	  -Wl,-soname,libcuda.so.1 -L$(FAKECUDART_DIR) -lcudart -Wl,-rpath,$(abspath $(FAKECUDART_DIR)) \
	  -Wl,-z,defs $(LDFLAGS_BASE) -o $@

$(FAKEGREEN_LINK): $(FAKEGREEN_LIB)
	$(call say,LN,$@)ln -sf libcuda.so.1 $@

# Test programs: plain C against the toolkit headers, linked to the fake.
# PROG_CFLAGS_<name> adds flags for one program.
PROGS_SRCS := $(wildcard tests/programs/runtime/*.c)
PROGS_BINS := $(PROGS_SRCS:tests/programs/runtime/%.c=$(BUILD)/progs/%)
PROGS_LINK := -L$(FAKECUDART_DIR) -lcudart -Wl,-rpath,$(abspath $(FAKECUDART_DIR)) -ldl
PROG_CFLAGS_ptds := -DCUDA_API_PER_THREAD_DEFAULT_STREAM
PROG_CFLAGS_ptsz_threads := -DCUDA_API_PER_THREAD_DEFAULT_STREAM
PROG_CFLAGS_sites := -rdynamic
PROG_CFLAGS_live_extras := -rdynamic
# PROG_LINK_<name> replaces PROGS_LINK for one program. reload is linked to
# no libcudart: it reaches the runtime only through a plugin it dlopens from
# its own folder (tests/programs/runtime/plugin/).
RELOAD_PLUGIN   := $(BUILD)/progs/libreload_plugin.so
PROG_LINK_reload := -ldl
# green_ctx and capture_corners also link the fake libcuda beside the runtime
# (green contexts, the driver's stream waits).
PROG_LINK_green_ctx := -L$(FAKEGREEN_DIR) -lcuda -Wl,-rpath,$(abspath $(FAKEGREEN_DIR)) $(PROGS_LINK)
PROG_LINK_capture_corners := $(PROG_LINK_green_ctx)
$(BUILD)/progs/green_ctx $(BUILD)/progs/capture_corners: $(FAKEGREEN_LINK)

$(BUILD)/progs/%: tests/programs/runtime/%.c $(wildcard tests/programs/runtime/*.h) tests/support/pool_probe.h \
                  include/cudapool.h $(FAKECUDART_LINK)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(PROG_CFLAGS_$*) $(CUDA_INC) -Icommon -Itests/fakes/cudart \
	  $(TEST_INC) $< -o $@ \
	  $(or $(PROG_LINK_$*),$(PROGS_LINK)) $(LDFLAGS_BASE)

$(BUILD)/progs/reload: $(RELOAD_PLUGIN)
$(RELOAD_PLUGIN): tests/programs/runtime/plugin/reload_plugin.c $(FAKECUDART_LINK)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(CUDA_INC) -shared $< -o $@ -L$(FAKECUDART_DIR) -lcudart \
	  -Wl,-rpath,$(abspath $(FAKECUDART_DIR)) -Wl,-z,defs $(LDFLAGS_BASE)

# An nvcc-built program (-cudart shared) proves the fake serves what nvcc's
# generated host code calls. Not sanitized: its runs preload the sanitizer
# runtimes the fake needs.
ifneq ($(wildcard $(NVCC)),)
PROGS_BINS += $(BUILD)/progs/kernel
$(BUILD)/progs/kernel: tests/programs/runtime/kernel.cu $(FAKECUDART_LINK)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) -cudart shared -o $@ $< -L$(FAKECUDART_DIR) -Xlinker \
	  -rpath,$(abspath $(FAKECUDART_DIR))
endif

# Integration tests: tests/integration/<layer>/*.c (runtime/ over the fake
# runtime, driver/ over the fake driver of mk/fakecuda.mk), the threaded ones
# (*_mt.c) in their own binary so they also run under ThreadSanitizer.
SHIM_IT_HELPERS := tests/support/it_run.c tests/support/it_json.c
SHIM_IT_HDRS    := tests/support/it_run.h tests/support/it_check.h tests/support/it_info.h
SHIM_IT_MT_SRCS := $(wildcard tests/integration/*/*_mt.c)
SHIM_IT_SRCS    := $(filter-out $(SHIM_IT_MT_SRCS),$(wildcard tests/integration/*/*.c))
SHIM_IT_BIN     := $(BUILD)/tests/integration_tests
SHIM_IT_MT_BIN  := $(BUILD)/tests/integration_mt_tests
# Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274:
# "Could not initialize inheritable arena"). The test drivers are not
# threaded: the programs they run are, and those are built with TSan.
SHIM_IT_CFLAGS  := $(filter-out -fsanitize=thread,$(CFLAGS_BASE))
SHIM_IT_LDFLAGS := $(filter-out -fsanitize=thread,$(LDFLAGS_BASE))

$(SHIM_IT_BIN): $(SHIM_IT_SRCS) $(LSAN_SCOPE) $(SHIM_IT_HELPERS) $(SHIM_IT_HDRS) include/cudapool.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(SHIM_IT_CFLAGS) -Icommon $(TEST_INC) $(SHIM_IT_SRCS) $(SHIM_IT_HELPERS) -o $@ \
	  $(CRITERION_LINK) $(SHIM_IT_LDFLAGS)

$(SHIM_IT_MT_BIN): $(SHIM_IT_MT_SRCS) $(LSAN_SCOPE) $(SHIM_IT_HELPERS) $(SHIM_IT_HDRS) include/cudapool.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(SHIM_IT_CFLAGS) -Icommon $(TEST_INC) $(SHIM_IT_MT_SRCS) $(SHIM_IT_HELPERS) -o \
	  $@ $(CRITERION_LINK) \
	  $(SHIM_IT_LDFLAGS)

ALL_TARGETS += $(FAKECUDART_LIB) $(FAKECUDART_LINK) $(PROGS_BINS) $(RELOAD_PLUGIN)
ifneq ($(SHIM_IT_SRCS),)
ALL_TARGETS += $(SHIM_IT_BIN)
TEST_BINS += $(SHIM_IT_BIN)
endif
ifneq ($(SHIM_IT_MT_SRCS),)
ALL_TARGETS += $(SHIM_IT_MT_BIN)
TEST_BINS += $(SHIM_IT_MT_BIN)
TSAN_TEST_BINS += $(SHIM_IT_MT_BIN)
endif

# The shim's cached pair through the fake runtime, for make bench.
SHIM_PAIR_BENCH := $(BUILD)/bench/shim_pair
$(SHIM_PAIR_BENCH): bench/shim_pair.c bench/bench_util.h $(FAKECUDART_LINK) $(SHIM_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(CUDA_INC) $< -o $@ $(PROGS_LINK) $(LDFLAGS_BASE)
ALL_TARGETS += $(SHIM_PAIR_BENCH)
BENCH_CMDS += $(SHIM_PAIR_BENCH)

# What CUDAPOOL_STACKS costs an allocation (the module built in), for make bench.
STACKS_BENCH := $(BUILD)/bench/stacks_bench
# Built with frame pointers: one of the walks it measures follows them.
$(STACKS_BENCH): bench/stacks_bench.c bench/bench_util.h shim/state/stacks.c shim/state/pyframes.c \
                 shim/state/pyframes_raw.c shim/state/pylayout.c shim/state/pylinetable.c shim/state/pyframes_raw.h shim/state/pylayout.h shim/state/pylinetable.h \
                 shim/state/stackwalk.c shim/state/stacks.h shim/state/pyframes.h shim/state/stackwalk.h \
                 common/options.h $(COMMON_LIB) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -fno-omit-frame-pointer -Icommon -Ishim -Ishim/state $< \
	  shim/state/stacks.c shim/state/pyframes.c shim/state/pyframes_raw.c shim/state/pylayout.c shim/state/pylinetable.c shim/state/stackwalk.c $(COMMON_LIB) -o $@ -ldl -lz $(LDFLAGS_BASE)
ALL_TARGETS += $(STACKS_BENCH)
BENCH_CMDS += $(STACKS_BENCH)
