# tools/live/: cudapool-stats, the live counters of running processes
# (`cudapool stats PID`, `cudapool top`). It prints through the exit
# report's own code (common/report.c, common/parse.c) and reads the segment
# described by common/live_layout.h.
LIVE_SRCS := $(wildcard tools/live/*.c)
LIVE_OBJS := $(LIVE_SRCS:%.c=$(BUILD)/%.o)
LIVE_BIN  := $(BUILD)/cudapool-stats

$(BUILD)/tools/live/%.o: tools/live/%.c $(wildcard tools/live/*.h) common/live_layout.h common/budget_layout.h common/report.h \
                         include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) -Icommon -Itools/live -c $< -o $@

$(LIVE_BIN): $(LIVE_OBJS) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(LDFLAGS_BASE) -o $@ $^

ALL_TARGETS += $(LIVE_BIN)

# Installed beside the launcher, which finds it there (mk/install.mk).
INSTALL_PROGRAMS += $(LIVE_BIN)
