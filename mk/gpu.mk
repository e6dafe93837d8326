# GPU programs, built by nvcc with the shared CUDA runtime (-cudart shared) so
# that libcudapool.so can interpose them:
#   $(BUILD)/demo/legacy_app    the demo workload; part of `make` (ALL_TARGETS)
#   $(BUILD)/gpu/tests/NAME     tests/gpu/NAME.cu   } `make gpu`; run on a GPU
#   $(BUILD)/gpu/bench/NAME     bench/gpu/NAME.cu   } by scripts/gpu-check
# `make demo` runs scripts/demo (natively and under cudapool, or on the
# simulated runtime when there is no GPU).
# Without nvcc ($(NVCC), default $(CUDA_HOME)/bin/nvcc) nothing here is built
# and `make` carries on; `make gpu` and `make demo` say why.

NVCC_FOUND := $(shell command -v $(NVCC) 2>/dev/null)
# Tests and benchmarks: Hopper machine code only (the H200 runs them).
NVCC_ARCH ?= -arch=sm_90
# The demo also carries PTX so it runs (JIT-compiled) on any GPU from sm_75.
DEMO_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
NVCCFLAGS ?= -O2 -std=c++17 -lineinfo -Xcompiler -Wall,-Wextra
# RUNPATH, not RPATH: LD_LIBRARY_PATH still wins, which is how scripts/demo
# points a program at the simulated runtime.
NVCC_LDFLAGS := -cudart shared -Xlinker --enable-new-dtags -Xlinker -rpath=$(CUDA_HOME)/lib64

DEMO_BIN       := $(BUILD)/demo/legacy_app
GPU_TEST_BINS  := $(patsubst tests/gpu/%.cu,$(BUILD)/gpu/tests/%,$(wildcard tests/gpu/*.cu))
GPU_BENCH_BINS := $(patsubst bench/gpu/%.cu,$(BUILD)/gpu/bench/%,$(wildcard bench/gpu/*.cu))
GPU_COMMON_HDR := tests/gpu/gpu_common.cuh

.PHONY: gpu

ifneq ($(NVCC_FOUND),)

$(DEMO_BIN): demo/legacy_app.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(DEMO_ARCH) $< -o $@ $(NVCC_LDFLAGS)

$(BUILD)/gpu/tests/%: tests/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@ $(NVCC_LDFLAGS)

$(BUILD)/gpu/bench/%: bench/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@ $(NVCC_LDFLAGS)

ALL_TARGETS += $(DEMO_BIN)

gpu: $(GPU_TEST_BINS) $(GPU_BENCH_BINS) $(DEMO_BIN)

else

gpu:
	@echo "make gpu: no nvcc at $(NVCC) (set NVCC or CUDA_HOME): GPU programs not built" >&2
	@exit 1

endif

# scripts/demo builds what it needs (the shim, the demo, and the simulated
# runtime when there is no GPU), runs the demo and explains what it found.
demo:
	@BUILD=$(BUILD) MAKE="$(MAKE)" scripts/demo
