set -u
E="-isystem .gpu-carry/include"
make -s -j16 BUILD=build/gpu DEPS_STAMP= EXTRA_CFLAGS="$E" build/gpu/libcudapool.so >/dev/null 2>&1 || { echo buildfail; exit 3; }
make -s -j16 BUILD=build/gpu DEPS_STAMP= gpu >/dev/null 2>&1 || { echo gpubuildfail; exit 4; }
rm -rf /tmp/b && mkdir -p /tmp/b && tar --exclude=./build -cf - . | (cd /tmp/b && tar xf -)
sed -i 's/  return cp_arena_count(pool) > 1 \&\&/  return false \&\& cp_arena_count(pool) > 1 \&\&/' /tmp/b/core/pool.c
grep -c "return false &&" /tmp/b/core/pool.c
(cd /tmp/b && make -s -j16 BUILD=build/gpu DEPS_STAMP= EXTRA_CFLAGS="$E" build/gpu/libcudapool.so >/dev/null 2>&1) || { echo bbuildfail; exit 5; }
B=build/gpu/gpu/bench/alloc_bench
for v in "nowait build/gpu/libcudapool.so 8" "wait /tmp/b/build/gpu/libcudapool.so 8" "nowait build/gpu/libcudapool.so 1" "nowait build/gpu/libcudapool.so 8" "wait /tmp/b/build/gpu/libcudapool.so 8"; do
  set -- $v; echo "== $1 arenas=$3"
  env LD_PRELOAD=$2 CUDAPOOL_STATS=1 CUDAPOOL_STATS_FORMAT=json CUDAPOOL_ARENAS=$3 $B threads 2>&1 | grep -E "^threads|num_barriers" | sed -E 's/.*"reserved_bytes":\{[^}]*"peak":([0-9]+)\}.*"segments":\{[^}]*"peak":([0-9]+)\}.*"num_alloc":([0-9]+).*"num_barriers":([0-9]+).*/reserved_peak=\1 segments=\2 allocs=\3 barriers=\4/' | sed -E 's/ async_pairs_per_s=[0-9]+ seconds=0.50//'
done
