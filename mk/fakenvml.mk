# tests/fakes/nvml/: a fake libnvidia-ml.so.1 (build/fakenvml/), found by
# the shim's dlopen through LD_LIBRARY_PATH in the shared-limit tests
# (tests/integration/runtime/shared_mt.c); it lists the fake runtime's
# processes from FAKECUDA_SHARED_MEM's accounting.
FAKENVML_LIB := $(BUILD)/fakenvml/libnvidia-ml.so.1

$(FAKENVML_LIB): tests/fakes/nvml/nvml.c tests/fakes/cudart/shared_mem.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(CFLAGS_BASE) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,-z,defs -o $@ $< $(LDFLAGS_BASE)

ALL_TARGETS += $(FAKENVML_LIB)
# The shared-limit tests need it beside the binary that runs them.
$(SHIM_IT_MT_BIN): | $(FAKENVML_LIB)
