# tests/fakes/nvtx/: a fake NVTX tool (build/fakenvtx/libnvtx_inject.so),
# the injection library NVTX_INJECTION64_PATH names in the integration tests
# of CUDAPOOL_NVTX (tests/integration/runtime/nvtx.c); it logs every heap,
# region, mark and range call to the file NVTX_FAKE_LOG names.
FAKENVTX_LIB := $(BUILD)/fakenvtx/libnvtx_inject.so

$(FAKENVTX_LIB): tests/fakes/nvtx/nvtx_inject.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS_BASE) $(CUDA_INC) -shared -Wl,-z,defs -o $@ $< $(LDFLAGS_BASE)

ALL_TARGETS += $(FAKENVTX_LIB)
