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
