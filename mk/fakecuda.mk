# tests/fakecuda/: the fake CUDA driver (build/fakecuda/libcuda.so.1, host
# memory, the driver's error codes, call counters), a thin runtime over it
# (build/fakecuda/rt/libcudart.so.13, for one process with both layers), two
# small libraries for the dlsym tests, and the driver-level test programs
# tests/drvprogs/*.c, built into $(BUILD)/progs/ next to the runtime ones so
# that tests/it_run.c finds them. The integration tests that run them are
# tests/shim_it_driver.c and tests/shim_it_mt_driver.c (mk/fakecudart.mk
# builds every tests/shim_it_*.c).
#
# A real statically linked runtime (libcudart_static.a) cannot run on this
# fake: it needs the driver's private tables (cuGetExportTable), which no
# fake can provide. tests/drvprogs/drv_static.c performs its lookup sequence
# instead; scripts/gpu-check driver runs nvcc's static binaries on the GPU.
FAKECU_DIR  := $(BUILD)/fakecuda
FAKECU_SRCS := tests/fakecuda/state.c tests/fakecuda/mem.c tests/fakecuda/streams.c tests/fakecuda/proc.c
FAKECU_OBJS := $(FAKECU_SRCS:%.c=$(BUILD)/%.o)
FAKECU_LIB  := $(FAKECU_DIR)/libcuda.so.1
FAKECU_LINK := $(FAKECU_DIR)/libcuda.so
THINRT_LIB  := $(FAKECU_DIR)/rt/libcudart.so.13
THINRT_LINK := $(FAKECU_DIR)/rt/libcudart.so
DRVNEXT_LIB := $(FAKECU_DIR)/libdrvnext.so
DRVTARGET_LIB := $(FAKECU_DIR)/libdrvtarget.so
FAKECU_CFLAGS := $(CFLAGS_BASE) -fvisibility=default $(CUDA_INC)

$(BUILD)/tests/fakecuda/%.o: tests/fakecuda/%.c $(wildcard tests/fakecuda/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(FAKECU_CFLAGS) -c $< -o $@

# -Bsymbolic: the fake's own addresses (cuGetProcAddress's table, fakecu_entry)
# stay its own when a preloaded library defines the same names.
$(FAKECU_LIB): $(FAKECU_OBJS) tests/fakecuda/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_BASE) -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
	  -Wl,--version-script=tests/fakecuda/exports.map -Wl,-z,defs -o $@ $(FAKECU_OBJS)

$(FAKECU_LINK): $(FAKECU_LIB)
	ln -sf libcuda.so.1 $@

# Its dlopen("libcuda.so.1") searches its own RUNPATH: the fake next door.
$(THINRT_LIB): tests/fakecuda/thinrt.c tests/fakecuda/thinrt.map | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(FAKECU_CFLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,-rpath,'$$ORIGIN/..' \
	  -Wl,--version-script=tests/fakecuda/thinrt.map -Wl,-z,defs -o $@ $< -ldl $(LDFLAGS_BASE)

$(THINRT_LINK): $(THINRT_LIB)
	ln -sf libcudart.so.13 $@

$(DRVTARGET_LIB): tests/fakecuda/drvtarget.c
	@mkdir -p $(dir $@)
	$(CC) $(FAKECU_CFLAGS) -shared -o $@ $< $(LDFLAGS_BASE)

# libdrvnext needs libdrvtarget, found next to it ($ORIGIN).
$(DRVNEXT_LIB): tests/fakecuda/drvnext.c $(DRVTARGET_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FAKECU_CFLAGS) -shared -o $@ $< -L$(FAKECU_DIR) -Wl,--no-as-needed -ldrvtarget -Wl,--as-needed -Wl,-rpath,'$$ORIGIN' -ldl \
	  $(LDFLAGS_BASE)

# Programs: the driver is found through the program's RUNPATH, as a
# static-runtime binary finds the system's libcuda.so.1. DRV_LINK_<name>
# adds what one program links.
DRV_PROGS_SRCS := $(wildcard tests/drvprogs/*.c)
DRV_PROGS_BINS := $(DRV_PROGS_SRCS:tests/drvprogs/%.c=$(BUILD)/progs/%)
DRV_LINK_drv_linked := -L$(FAKECU_DIR) -lcuda
DRV_LINK_drv_mixed  := -L$(FAKECU_DIR)/rt -lcudart -Wl,-rpath,$(abspath $(FAKECU_DIR)/rt)
DRV_LINK_drv_next   := -rdynamic

$(BUILD)/progs/drv_%: tests/drvprogs/drv_%.c $(wildcard tests/drvprogs/*.h) tests/pool_probe.h include/cudapool.h \
                      tests/fakecuda/fakecu.h $(FAKECU_LINK) $(THINRT_LINK) $(DRVNEXT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CUDA_INC) -Ishim -Itests/fakecuda $< -o $@ $(DRV_LINK_drv_$*) \
	  -Wl,-rpath,$(abspath $(FAKECU_DIR)) -ldl $(LDFLAGS_BASE)

ALL_TARGETS += $(FAKECU_LIB) $(FAKECU_LINK) $(THINRT_LIB) $(THINRT_LINK) $(DRVNEXT_LIB) $(DRVTARGET_LIB) \
               $(DRV_PROGS_BINS)
