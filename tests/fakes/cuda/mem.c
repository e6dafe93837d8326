/* mem.c: the fake driver's "device" memory, served from host memory:
 * cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2, cuMemGetInfo_v2 and
 * memset/memcpy to check contents.
 *
 * Invariants: fk.allocs is sorted by base and its ranges are disjoint;
 * fk.used[d] is the sum of `charged` over d's allocations and never exceeds
 * fk.capacity; allocations of 1 MiB or more are mmap(MAP_NORESERVE) so tests
 * can "allocate" gigabytes. A call that may not run during a strict capture
 * (capture.c's rule 1 in the fake runtime) fails before it looks at its
 * pointer, so cuMemFree(ptr) and cuMemFree(ptr|1) answer alike there. */
#include "fk.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FK_MMAP_MIN ((size_t)1 << 20)

static size_t lower_bound(uintptr_t p) {
  size_t lo = 0, hi = fk.nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)fk.allocs[mid].base < p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The live allocation holding [p, p + n), NULL if none. */
fk_alloc *fk_alloc_containing(uintptr_t p, size_t n) {
  size_t i = lower_bound(p + 1);
  if (i == 0) return NULL;
  fk_alloc *a = &fk.allocs[i - 1];
  uintptr_t off = p - (uintptr_t)a->base;
  return off < a->size && n <= a->size - off ? a : NULL;
}

CUresult fk_alloc_new(fk_ctx *ctx, size_t size, CUdeviceptr *out) {
  int dev = ctx->device;
  if (size > SIZE_MAX - 2 * FK_MMAP_MIN) return CUDA_ERROR_OUT_OF_MEMORY;
  if (fk.fail_after == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t charged = (size + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
  if (charged > fk.capacity - fk.used[dev]) return CUDA_ERROR_OUT_OF_MEMORY;
  fk_alloc a = {.size = size, .charged = charged, .ctx = ctx};
  if (charged >= FK_MMAP_MIN) {
    a.maplen = (charged + 4095) & ~(size_t)4095;
    void *m =
        mmap(NULL, a.maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    a.base = m;
  } else if (!(a.base = aligned_alloc(FK_ALIGN, charged))) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (fk.nallocs == fk.capallocs) {
    size_t cap = fk.capallocs ? 2 * fk.capallocs : 256;
    fk_alloc *na = realloc(fk.allocs, cap * sizeof *na);
    if (!na) abort();
    fk.allocs = na;
    fk.capallocs = cap;
  }
  size_t i = lower_bound((uintptr_t)a.base);
  memmove(&fk.allocs[i + 1], &fk.allocs[i], (fk.nallocs - i) * sizeof a);
  fk.allocs[i] = a;
  fk.nallocs++;
  fk.used[dev] += charged;
  if (fk.fail_after > 0) fk.fail_after--;
  *out = (CUdeviceptr)(uintptr_t)a.base;
  return CUDA_SUCCESS;
}

static void release(size_t i) {
  fk_alloc *a = &fk.allocs[i];
  if (a->pool) fk_mempool_released(a);
  fk.used[a->ctx->device] -= a->charged;
  if (a->maplen)
    munmap(a->base, a->maplen);
  else
    free(a->base);
  memmove(&fk.allocs[i], &fk.allocs[i + 1], (fk.nallocs - i - 1) * sizeof *a);
  fk.nallocs--;
}

/* The live allocation starting at p, NULL if none. */
fk_alloc *fk_alloc_exact(uintptr_t p) {
  size_t i = lower_bound(p);
  return i < fk.nallocs && (uintptr_t)fk.allocs[i].base == p ? &fk.allocs[i] : NULL;
}

void fk_alloc_release(fk_alloc *a) { release((size_t)(a - fk.allocs)); }

void fk_alloc_drop_ctx(fk_ctx *ctx) {
  for (size_t i = fk.nallocs; i-- > 0;)
    if (fk.allocs[i].ctx == ctx) release(i);
}

#define ENTER() fk_enter(__func__)
#define READY(c)                     \
  fk_ctx *c;                         \
  CUresult ready_rc_ = fk_ready(&c); \
  if (ready_rc_) return fk_leave(ready_rc_)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  ENTER();
  READY(c);
  if (!dptr || bytesize == 0) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  CUresult rc = fk_capture_unsafe();
  if (rc) return fk_leave(rc);
  return fk_leave(fk_alloc_new(c, bytesize, dptr));
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  ENTER();
  READY(c);
  if (!dptr || !pPitch || !WidthInBytes || !Height ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  CUresult rc = fk_capture_unsafe();
  if (rc) return fk_leave(rc);
  size_t pitch = (WidthInBytes + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1);
  if (Height > SIZE_MAX / pitch) return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
  rc = fk_alloc_new(c, pitch * Height, dptr);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return fk_leave(rc);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  ENTER();
  READY(c);
  (void)c;
  CUresult rc = fk_capture_unsafe();
  if (rc) return fk_leave(rc);
  if (!dptr) return fk_leave(CUDA_SUCCESS);
  size_t i = lower_bound((uintptr_t)dptr);
  if (i == fk.nallocs || (uintptr_t)fk.allocs[i].base != (uintptr_t)dptr)
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  release(i);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  ENTER();
  READY(c);
  if (!free_bytes || !total_bytes) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *total_bytes = fk.capacity;
  *free_bytes = fk.capacity - fk.used[c->device];
  return fk_leave(CUDA_SUCCESS);
}

/* Synchronous copies and sets run on the legacy stream of the context. */
static CUresult legacy_work(fk_ctx *c) { return fk_submit(&c->legacy); }

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  ENTER();
  READY(c);
  if (n && !fk_alloc_containing((uintptr_t)dst, n) && !fk_vmm_accessible((uintptr_t)dst, n))
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  CUresult rc = legacy_work(c);
  if (rc) return fk_leave(rc);
  if (n) memset((void *)(uintptr_t)dst, value, n);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  ENTER();
  READY(c);
  if (n && (!src || (!fk_alloc_containing((uintptr_t)dst, n) && !fk_vmm_accessible((uintptr_t)dst, n))))
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  CUresult rc = legacy_work(c);
  if (rc) return fk_leave(rc);
  if (n) memcpy((void *)(uintptr_t)dst, src, n);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  ENTER();
  READY(c);
  if (n && (!dst || (!fk_alloc_containing((uintptr_t)src, n) && !fk_vmm_accessible((uintptr_t)src, n))))
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  CUresult rc = legacy_work(c);
  if (rc) return fk_leave(rc);
  if (n) memcpy(dst, (const void *)(uintptr_t)src, n);
  return fk_leave(CUDA_SUCCESS);
}
