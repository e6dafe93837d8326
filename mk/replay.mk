# tools/replay/: cudapool-replay, the trace replayer, and the trace recorder's
# benchmark. The recorder itself (common/trace.c) is linked into libcudapool.so
# by mk/shim.mk; here it is also linked into its ThreadSanitizer program and
# the benchmark.
REPLAY_SRCS := $(wildcard tools/replay/*.c)
REPLAY_OBJS := $(REPLAY_SRCS:%.c=$(BUILD)/%.o)
REPLAY_LIB_OBJS := $(filter-out $(BUILD)/tools/replay/main.o,$(REPLAY_OBJS))
REPLAY_BIN  := $(BUILD)/cudapool-replay
# cp_parse_size: the replayer reads sizes exactly as the CUDAPOOL_* options do.
REPLAY_SHIM_OBJS := $(COMMON_LIB)
TRACE_OBJ := $(COMMON_LIB)

$(BUILD)/tools/replay/%.o: tools/replay/%.c tools/replay/replay.h $(wildcard core/*.h) include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore -Icommon -c $< -o $@

$(REPLAY_BIN): $(REPLAY_OBJS) $(REPLAY_SHIM_OBJS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS_BASE) -o $@ $^ -lz

# Tests: tests/unit/replay/*.c, one Criterion binary (parser, loader, replay,
# the command line, the plot script).
REPLAY_TEST_SRCS := $(wildcard tests/unit/replay/*.c)
REPLAY_TEST_BIN  := $(BUILD)/tests/unit_replay_tests
$(REPLAY_TEST_BIN): $(REPLAY_TEST_SRCS) $(LSAN_SCOPE) $(wildcard tests/support/*.h) $(REPLAY_LIB_OBJS) \
                    $(REPLAY_SHIM_OBJS) $(CORE_LIB) $(REPLAY_BIN)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore -Icommon -Itools/replay $(TEST_INC) $(REPLAY_TEST_SRCS) \
	  $(REPLAY_LIB_OBJS) \
	  $(REPLAY_SHIM_OBJS) $(CORE_LIB) -o $@ $(CRITERION_LINK) -lz $(LDFLAGS_BASE)

# The recorder's unit test (tests/unit/shim/trace.c, in the shim's unit
# binary of mk/shim.mk) reads what it recorded back through the loader and
# replays it: that binary links the replayer's objects too.
SHIM_UNIT_EXTRA      += $(REPLAY_LIB_OBJS)
SHIM_UNIT_EXTRA_LIBS += -lz
ifneq ($(SHIM_UNIT_BIN),)
$(SHIM_UNIT_BIN): $(REPLAY_LIB_OBJS)
endif

TRACE_BENCH_BIN := $(BUILD)/bench/trace_bench
$(TRACE_BENCH_BIN): bench/trace_bench.c $(TRACE_OBJ) common/trace.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icommon $< $(TRACE_OBJ) -o $@ -lz $(LDFLAGS_BASE)

# The recorder's threads again as a plain program: Criterion cannot start
# under ThreadSanitizer (Snaipe/Criterion#274), so this is what TSan runs.
TRACE_TSAN_BIN := $(BUILD)/tests/trace_threads_tsan
$(TRACE_TSAN_BIN): tests/unit/shim/trace_threads_tsan.c $(TRACE_OBJ) common/trace.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icommon $(TEST_INC) $< $(TRACE_OBJ) -o $@ -lz $(LDFLAGS_BASE)

# The replayer's peak memory against the trace's length (streamed: flat).
REPLAY_MEM_BENCH_BIN := $(BUILD)/bench/replay_mem_bench
$(REPLAY_MEM_BENCH_BIN): bench/replay_mem_bench.c
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $< -o $@ -lz $(LDFLAGS_BASE)

ALL_TARGETS += $(REPLAY_BIN) $(REPLAY_TEST_BIN) $(TRACE_BENCH_BIN) $(TRACE_TSAN_BIN) $(REPLAY_MEM_BENCH_BIN)
TEST_BINS += $(REPLAY_TEST_BIN) $(TRACE_TSAN_BIN)
TSAN_TEST_BINS += $(TRACE_TSAN_BIN)
BENCH_CMDS += $(TRACE_BENCH_BIN) $(REPLAY_MEM_BENCH_BIN)

# The line parser and loader under libFuzzer. `make fuzz` (mk/fuzz.mk) runs
# this one too, for FUZZ_TIME seconds, before the options fuzzer; new inputs
# stay in $(BUILD)/fuzz/trace-corpus, crashes land in $(BUILD)/fuzz.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 20
FUZZ_TRACE_BIN := $(BUILD)/fuzz/fuzz_trace_parse
FUZZ_TRACE_SRCS := tests/fuzz/fuzz_trace_parse.c tools/replay/parse.c tools/replay/load.c
$(FUZZ_TRACE_BIN): $(FUZZ_TRACE_SRCS) tools/replay/replay.h
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror \
	  -fno-omit-frame-pointer \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -Iinclude -Icore -Icommon -Itools/replay $(FUZZ_TRACE_SRCS) -o $@ -lz
FUZZ_TARGETS += $(FUZZ_TRACE_BIN)

.PHONY: fuzz fuzz-trace
fuzz: fuzz-trace
fuzz-trace: $(FUZZ_TRACE_BIN)
	@mkdir -p $(BUILD)/fuzz/trace-corpus
	cd $(BUILD)/fuzz && ./fuzz_trace_parse -max_total_time=$(FUZZ_TIME) -max_len=8192 \
	  -dict=$(abspath tests/fuzz/trace.dict) -print_final_stats=1 trace-corpus \
	  $(abspath tests/fuzz/trace_seeds)
