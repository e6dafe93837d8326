# core/: the pool, the size index, the simulated device. No CUDA headers.
CORE_SRCS := $(wildcard core/*.c)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/%.o)
CORE_LIB  := $(BUILD)/libcpcore.a

$(BUILD)/core/%.o: core/%.c $(wildcard core/*.h) include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(LTO_CFLAGS) -c $< -o $@

$(CORE_LIB): $(CORE_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

# Core unit tests: one Criterion binary from tests/unit/core/*.c (the
# *_tsan.c there are plain programs, below).
CORE_TEST_SRCS := $(filter-out %_tsan.c,$(wildcard tests/unit/core/*.c))
CORE_TEST_BIN  := $(BUILD)/tests/unit_core_tests
$(CORE_TEST_BIN): $(CORE_TEST_SRCS) $(LSAN_SCOPE) $(wildcard tests/support/*.h) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore $(TEST_INC) $(CORE_TEST_SRCS) $(CORE_LIB) -o $@ \
	  $(CRITERION_LINK) $(LDFLAGS_BASE)

# The threaded churn again as a plain program: Criterion cannot start under
# ThreadSanitizer (Snaipe/Criterion#274), so this is what TSan runs.
CORE_TSAN_BIN := $(BUILD)/tests/core_threads_tsan
$(CORE_TSAN_BIN): tests/unit/core/threads_tsan.c tests/support/core_churn.h $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore $(TEST_INC) $< $(CORE_LIB) -o $@ $(LDFLAGS_BASE)

# The coverage oracle (issue 31), a plain program for the same reason.
CORE_ORACLE_BIN := $(BUILD)/tests/core_oracle_tsan
$(CORE_ORACLE_BIN): tests/unit/core/oracle_tsan.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore $(TEST_INC) $< $(CORE_LIB) -o $@ $(LDFLAGS_BASE)

CORE_BENCH_BIN := $(BUILD)/bench/core_bench
$(CORE_BENCH_BIN): bench/core_bench.c bench/bench_util.h $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore $< $(CORE_LIB) -o $@ $(LDFLAGS_BASE)

ALL_TARGETS += $(CORE_LIB) $(CORE_TEST_BIN) $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN) $(CORE_BENCH_BIN)
TEST_BINS += $(CORE_TEST_BIN) $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN)
TSAN_TEST_BINS += $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN)
BENCH_CMDS += $(CORE_BENCH_BIN)
