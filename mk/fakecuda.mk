# tests/fakes/cuda/: the fake CUDA driver (build/fakecuda/libcuda.so.1, host
# memory, the driver's error codes, call counters), a thin runtime over it
# (build/fakecuda/rt/libcudart.so.13, for one process with both layers), two
# small libraries for the dlsym tests, and the driver-level test programs
# tests/programs/driver/*.c, built into $(BUILD)/progs/ next to the runtime
# ones so that tests/support/it_run.c finds them. The integration tests that
# run them are tests/integration/driver/*.c (mk/fakecudart.mk builds every
# tests/integration/*/*.c).
#
# A real statically linked runtime (libcudart_static.a) cannot run on this
# fake: it needs the driver's private tables (cuGetExportTable), which no
# fake can provide. tests/programs/driver/drv_static.c performs its lookup sequence
# instead; scripts/gpu-check driver runs nvcc's static binaries on the GPU.
FAKECU_DIR  := $(BUILD)/fakecuda
FAKECU_SRCS := tests/fakes/cuda/state.c tests/fakes/cuda/mem.c tests/fakes/cuda/streams.c tests/fakes/cuda/proc.c tests/fakes/cuda/ptr.c \
               tests/fakes/cuda/pool.c tests/fakes/cuda/vmm.c tests/fakes/cuda/work.c
FAKECU_OBJS := $(FAKECU_SRCS:%.c=$(BUILD)/%.o)
FAKECU_LIB  := $(FAKECU_DIR)/libcuda.so.1
FAKECU_LINK := $(FAKECU_DIR)/libcuda.so
THINRT_LIB  := $(FAKECU_DIR)/rt/libcudart.so.13
THINRT_LINK := $(FAKECU_DIR)/rt/libcudart.so
DRVNEXT_LIB := $(FAKECU_DIR)/libdrvnext.so
DRVTARGET_LIB := $(FAKECU_DIR)/libdrvtarget.so
FAKECU_CFLAGS := $(CFLAGS_BASE) -fvisibility=default $(CUDA_INC)

$(BUILD)/tests/fakes/cuda/%.o: tests/fakes/cuda/%.c $(wildcard tests/fakes/cuda/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(FAKECU_CFLAGS) -c $< -o $@

# -Bsymbolic: the fake's own addresses (cuGetProcAddress's table, fakecu_entry)
# stay its own when a preloaded library defines the same names.
$(FAKECU_LIB): $(FAKECU_OBJS) tests/fakes/cuda/exports.map
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) -shared $(LDFLAGS_BASE) -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
	  -Wl,--version-script=tests/fakes/cuda/exports.map -Wl,-z,defs -o $@ $(FAKECU_OBJS)

$(FAKECU_LINK): $(FAKECU_LIB)
	$(call say,LN,$@)ln -sf libcuda.so.1 $@

# Its dlopen("libcuda.so.1") searches its own RUNPATH: the fake next door.
$(THINRT_LIB): tests/fakes/cuda/thinrt.c tests/fakes/cuda/thinrt.map | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(FAKECU_CFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,-rpath,'$$ORIGIN/..' \
	  -Wl,--version-script=tests/fakes/cuda/thinrt.map -Wl,-z,defs -o $@ $< -ldl $(LDFLAGS_BASE)

$(THINRT_LINK): $(THINRT_LIB)
	$(call say,LN,$@)ln -sf libcudart.so.13 $@

$(DRVTARGET_LIB): tests/fakes/cuda/drvtarget.c
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(FAKECU_CFLAGS) -shared -o $@ $< $(LDFLAGS_BASE)

# libdrvnext needs libdrvtarget, found next to it ($ORIGIN).
$(DRVNEXT_LIB): tests/fakes/cuda/drvnext.c $(DRVTARGET_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(FAKECU_CFLAGS) -shared -o $@ $< -L$(FAKECU_DIR) -Wl,--no-as-needed \
	  -ldrvtarget -Wl,--as-needed -Wl,-rpath,'$$ORIGIN' -ldl \
	  $(LDFLAGS_BASE)

# Programs: the driver is found through the program's RUNPATH, as a
# static-runtime binary finds the system's libcuda.so.1. DRV_LINK_<name>
# adds what one program links.
DRV_PROGS_SRCS := $(wildcard tests/programs/driver/*.c)
DRV_PROGS_BINS := $(DRV_PROGS_SRCS:tests/programs/driver/%.c=$(BUILD)/progs/%)
DRV_LINK_drv_linked := -L$(FAKECU_DIR) -lcuda
DRV_LINK_drv_suballoc := -L$(FAKECU_DIR) -lcuda
DRV_LINK_drv_work := -L$(FAKECU_DIR) -lcuda
DRV_LINK_drv_mixed  := -L$(FAKECU_DIR)/rt -lcudart -Wl,-rpath,$(abspath $(FAKECU_DIR)/rt)
DRV_LINK_drv_next   := -rdynamic

$(BUILD)/progs/drv_%: tests/programs/driver/drv_%.c $(wildcard tests/programs/driver/*.h) tests/support/pool_probe.h \
                      include/cudapool.h tests/fakes/cuda/fakecu.h $(FAKECU_LINK) $(THINRT_LINK) $(DRVNEXT_LIB)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(CUDA_INC) -Icommon -Itests/fakes/cuda $(TEST_INC) $< -o $@ \
	  $(DRV_LINK_drv_$*) \
	  -Wl,-rpath,$(abspath $(FAKECU_DIR)) -ldl $(LDFLAGS_BASE)

ALL_TARGETS += $(FAKECU_LIB) $(FAKECU_LINK) $(THINRT_LIB) $(THINRT_LINK) $(DRVNEXT_LIB) $(DRVTARGET_LIB) \
               $(DRV_PROGS_BINS)
