# fuzz: libFuzzer over the option parsers, the option loader and the report
# formatters (tests/fuzz/fuzz_options.c). Not part of make test: it needs
# clang and runs for FUZZ_TIME seconds. New inputs that grow coverage stay in
# $(BUILD)/fuzz/corpus for the next run; a crash leaves crash-* in $(BUILD)/fuzz.
#   make fuzz                 20 s
#   make fuzz FUZZ_TIME=600   longer
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 20
FUZZ_DIR   := $(BUILD)/fuzz
FUZZ_BIN   := $(FUZZ_DIR)/fuzz_options
FUZZ_SRCS  := tests/fuzz/fuzz_options.c common/options.c common/parse.c common/report.c
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer

$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard common/*.h)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(FUZZ_CC) $(FUZZ_FLAGS) -Iinclude -Icommon $(FUZZ_SRCS) -o $@

.PHONY: fuzz
fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	cd $(FUZZ_DIR) && ./fuzz_options -max_total_time=$(FUZZ_TIME) -max_len=8192 \
	  -dict=$(abspath tests/fuzz/options.dict) -print_final_stats=1 corpus
