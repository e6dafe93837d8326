# common/: what the preloaded library and the tools share, as one static
# library (libcpcommon.a): the option table and its parsers, the exit
# report's writer, the trace recorder and its file rules, cudapool's own
# threads, and the live-stats segment's layout. It uses nothing from shim/
# and of core/ only the header-only core/util.h (scripts/check-layers holds
# it to that), so the replayer, cudapool-stats and the unit tests link it
# without the shim.
COMMON_SRCS := $(wildcard common/*.c)
COMMON_OBJS := $(COMMON_SRCS:%.c=$(BUILD)/%.o)
COMMON_LIB  := $(BUILD)/libcpcommon.a

$(BUILD)/common/%.o: common/%.c $(wildcard common/*.h) include/cudapool.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS_BASE) $(LTO_CFLAGS) -Icommon -Icore -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(COMMON_LIB)
