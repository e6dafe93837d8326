# core/: the pool and the size index; no CUDA headers. Every core/*.c goes
# into libcudapool.so (mk/shim.mk links CORE_OBJS). core/testing/ holds the
# test doubles (the simulated device, the invariant checker): a library of
# its own, linked by the tests, benchmarks and tools only, never by the
# product; scripts/check-testing-symbols (in TEST_BINS) proves it.
CORE_SRCS := $(wildcard core/*.c)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/%.o)
CORE_PRODUCT_LIB := $(BUILD)/libcpcore.a
CORE_TESTING_SRCS := $(wildcard core/testing/*.c)
CORE_TESTING_OBJS := $(CORE_TESTING_SRCS:%.c=$(BUILD)/%.o)
CORE_TESTING_LIB  := $(BUILD)/libcptesting.a
# What the tests, benchmarks and tools link: the testing library first, as
# it calls into the core.
CORE_LIB := $(CORE_TESTING_LIB) $(CORE_PRODUCT_LIB)

$(BUILD)/core/%.o: core/%.c $(wildcard core/*.h) include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(LTO_CFLAGS) -c $< -o $@

$(BUILD)/core/testing/%.o: core/testing/%.c $(wildcard core/testing/*.h) $(wildcard core/*.h) \
                           include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icore -c $< -o $@

$(CORE_PRODUCT_LIB): $(CORE_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(CORE_TESTING_LIB): $(CORE_TESTING_OBJS)
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

# No symbol of core/testing in libcudapool.so nor in the objects linked into
# it (it reads $(BUILD) from CUDAPOOL_TEST_BUILD, which make test exports).
CORE_SYMBOLS_CHECK := scripts/check-testing-symbols

ALL_TARGETS += $(CORE_LIB) $(CORE_TEST_BIN) $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN) $(CORE_BENCH_BIN)
TEST_BINS += $(CORE_TEST_BIN) $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN) $(CORE_SYMBOLS_CHECK)
TSAN_TEST_BINS += $(CORE_TSAN_BIN) $(CORE_ORACLE_BIN)
BENCH_CMDS += $(CORE_BENCH_BIN)
