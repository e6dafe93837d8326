# docblocks: tests/docs/run-blocks runs every command block of README.md and
# docs/USAGE.md marked `<!-- runs-without-gpu -->`, as printed, from the
# repository root (every other one must say why: `<!-- no-run: WHY -->`);
# a script in TEST_BINS ending with "docblocks: N passed,
# N failed". The blocks name build/ (the paths a reader types), so it runs in
# the default build only, not again under the sanitizer builds.
DOCBLOCKS_RUNNER := tests/docs/run-blocks
ifeq ($(BUILD),build)
TEST_BINS += $(DOCBLOCKS_RUNNER)
endif
