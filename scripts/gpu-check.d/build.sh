# build.sh: the build section every mode starts with: the shim, then the nvcc
# programs the mode asks for (gpu: make gpu; static: make gpu-driver).
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh)

# shim_built: whether the shim built, so that runs under it can be made.
shim_built() { [ "$have_shim" = 1 ]; }

# section_build BUILDS: the shim, then each of BUILDS (build_NAME).
section_build() {
  local b
  begin_section build build.log build
  have_shim=0
  run "build shim" 240 "$WORK/build-shim.out" \
    make -j16 BUILD="$BUILD" DEPS_STAMP= EXTRA_CFLAGS="-isystem .gpu-carry/include" "$BUILD/libcudapool.so"
  if [ "$rc" = 0 ] && [ -f "$SHIM" ]; then
    have_shim=1
    record PASS "build shim" "$BUILD/libcudapool.so"
  else
    record FAIL "build shim" "$(why_failed "$WORK/build-shim.out") (see build.log); runs under the shim will fail"
  fi
  for b in $1; do
    "build_$b"
  done
}

# built NAME OUTFILE NPROG WHAT: the row of a make of programs just run.
built() {
  if [ "$rc" = 0 ]; then
    record PASS "$1" "$3 programs $4"
  else
    record FAIL "$1" "$(why_failed "$2"); $3 built (see build.log)"
  fi
}

build_gpu() {
  run "build gpu programs" 300 "$WORK/build-gpu.out" make -j16 BUILD="$BUILD" DEPS_STAMP= NVCC="$NVCC" gpu
  built "build gpu programs" "$WORK/build-gpu.out" \
    "$(find "$TESTS" "$BENCH" "$DEMO" -maxdepth 1 -type f -perm -u+x 2>/dev/null | wc -l)" \
    "(tests/gpu, bench/gpu, demo) with $(basename "$NVCC") -arch=sm_90"
}

build_static() {
  run "build static-runtime programs" 240 "$WORK/build-static.out" \
    make -j16 BUILD="$BUILD" DEPS_STAMP= NVCC="$NVCC" gpu-driver
  built "build static-runtime programs" "$WORK/build-static.out" \
    "$(find "$STATIC" -mindepth 2 -maxdepth 2 -type f -perm -u+x 2>/dev/null | wc -l)" \
    "(tests/gpu, alloc_bench, cublas_ws) with nvcc's default static runtime"
}
