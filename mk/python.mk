# python/: the cudapool Python module (pure ctypes, nothing to build). Its
# tests (tests/python/test_cudapool.py, python3's unittest) run through
# tests/python/run, a script in TEST_BINS that ends with the closing line
# "python_tests: N passed, N failed" scripts/run-tests reads. They run child
# Pythons with $(BUILD)/libcudapool.so preloaded on the fake runtime, so they
# need both built (build-all, which make test builds first). Under
# test-sanitize they run again on build/asan: the children preload
# $(CUDAPOOL_TEST_SAN_PRELOAD) first, as tests/support/it_run.c does, with
# LeakSanitizer off for the uninstrumented interpreter. Not in TSAN_TEST_BINS:
# nothing in them is threaded. Without python3 they are left out, and say so.
PYTHON ?= python3
PY_TEST_RUNNER := tests/python/run
ifneq ($(shell command -v $(PYTHON) 2>/dev/null),)
TEST_BINS += $(PY_TEST_RUNNER)
else
$(info python tests: $(PYTHON) not found, tests/python left out)
endif
export PYTHON

# The wheel (scripts/make-wheel): the package with the library, the launcher
# and the tools inside, tagged for the glibc the binaries need. make wheel
# writes it to $(BUILD)/dist; tests/python/test_wheel.py installs it into a
# fresh venv and runs python -m cudapool through it.
WHEEL_STAMP := $(BUILD)/dist/.wheel
$(WHEEL_STAMP): scripts/make-wheel $(SHIM_LIB) $(REPLAY_BIN) $(LIVE_BIN) scripts/cudapool scripts/cudapool-plot \
                $(wildcard python/cudapool/*.py) python/README.md include/cudapool.h
	@mkdir -p $(dir $@)
	$(call say,WHEEL,$(BUILD)/dist)rm -f $(BUILD)/dist/cudapool-*.whl && scripts/make-wheel $(BUILD) $(BUILD)/dist >/dev/null
	@touch $@
.PHONY: wheel
wheel: $(WHEEL_STAMP)
	@ls $(BUILD)/dist/cudapool-*.whl
ALL_TARGETS += $(WHEEL_STAMP)
