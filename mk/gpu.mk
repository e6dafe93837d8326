# GPU programs, built by nvcc with the shared CUDA runtime (-cudart shared) so
# that libcudapool.so can interpose them:
#   $(BUILD)/demo/legacy_app    the demo workload; part of `make` (ALL_TARGETS)
#   $(BUILD)/gpu/tests/NAME     tests/gpu/NAME.cu   } `make gpu`; run on a GPU
#   $(BUILD)/gpu/bench/NAME     bench/gpu/NAME.cu   } by scripts/gpu-check
#   $(BUILD)/gpu/static/...     the same tests, alloc_bench and a cuBLAS program
#                               built with nvcc's default static runtime, for
#                               `make gpu-driver` and scripts/gpu-check driver
#                               (cudapool serves them at the driver level)
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

# Static runtime: nvcc's default, no -cudart flag. cublas_ws links libcublas
# (shared), which carries a runtime of its own.
GPU_STATIC_DIR  := $(BUILD)/gpu/static
GPU_STATIC_BINS := $(patsubst tests/gpu/%.cu,$(GPU_STATIC_DIR)/tests/%,$(wildcard tests/gpu/*.cu)) \
                   $(GPU_STATIC_DIR)/bench/alloc_bench $(GPU_STATIC_DIR)/tests/cublas_ws

.PHONY: gpu gpu-driver

ifneq ($(NVCC_FOUND),)

$(DEMO_BIN): demo/legacy_app.cu include/cudapool.h
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(DEMO_ARCH) -Iinclude $< -o $@ $(NVCC_LDFLAGS)

$(BUILD)/gpu/tests/%: tests/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@ $(NVCC_LDFLAGS)

$(BUILD)/gpu/bench/%: bench/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@ $(NVCC_LDFLAGS)

$(GPU_STATIC_DIR)/tests/%: tests/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@

$(GPU_STATIC_DIR)/bench/%: bench/gpu/%.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@

$(GPU_STATIC_DIR)/tests/cublas_ws: tests/gpu/driver/cublas_ws.cu $(GPU_COMMON_HDR)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Itests/gpu $< -o $@ -lcublas \
	  -Xlinker --enable-new-dtags -Xlinker -rpath=$(CUDA_HOME)/lib64

ALL_TARGETS += $(DEMO_BIN)

gpu: $(GPU_TEST_BINS) $(GPU_BENCH_BINS) $(DEMO_BIN)

gpu-driver: $(GPU_STATIC_BINS)

else

gpu gpu-driver:
	@echo "make $@: no nvcc at $(NVCC) (set NVCC or CUDA_HOME): GPU programs not built" >&2
	@exit 1

endif

# scripts/demo builds what it needs (the shim, the demo, and the simulated
# runtime when there is no GPU), runs the demo and explains what it found.
demo:
	@BUILD=$(BUILD) MAKE="$(MAKE)" scripts/demo
