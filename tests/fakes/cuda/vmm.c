/* vmm.c: the fake driver's virtual memory management, what expandable
 * segments use: cuDeviceGetAttribute (VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
 * 1, or 0 with FAKECU_NO_VMM=1), cuDeviceCanAccessPeer,
 * cuMemGetAllocationGranularity (2 MiB), cuMemAddressReserve/Free,
 * cuMemCreate/Release, cuMemMap/Unmap and cuMemSetAccess.
 *
 * A reservation is host address space mapped PROT_NONE; a mapped page is
 * made readable and writable only by cuMemSetAccess, so a pool that touched
 * a page it never mapped (or made accessible) faults here as on the GPU. An
 * unmapped page is dropped (MADV_DONTNEED), so its bytes are gone. Physical
 * memory (cuMemCreate) counts in fk.used like cuMemAlloc's and fails the same
 * way (capacity, FAKECU_FAIL_ALLOC_AFTER); it is freed when released and
 * unmapped, as natively.
 *
 * Error checks, CUDA_ERROR_INVALID_VALUE unless said: sizes and addresses
 * not multiples of the granularity; a map outside a reservation, over a
 * mapped page, or of a released handle; an unmap or access change of a range
 * not wholly mapped; freeing a reservation that still has pages mapped
 * (counted in fakecu_vmm_errors, since the driver's answer there is not
 * documented); a second release of a handle. Every error also counts in
 * fakecu_vmm_errors, so a test can assert the pool made none. */
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fakecu.h"
#include "fk.h"

#define PAGE ((size_t)2 << 20)
#define MAX_RESERVATIONS 64

typedef struct handle {
  size_t size;
  int device;
  int refs; /* 1 until released, plus one per mapping */
} handle_t;

typedef struct page {
  UT_hash_handle hh;
  uintptr_t addr;
  handle_t *h;
  bool accessible;
} page_t;

static struct {
  uintptr_t base[MAX_RESERVATIONS];
  size_t size[MAX_RESERVATIONS];
  page_t *pages; /* by address */
  size_t mapped[FK_MAX_DEVICES];
  long errors;
} vm;

#define ENTER() fk_enter(__func__)

static CUresult fail(CUresult rc) {
  vm.errors++;
  return fk_leave(rc);
}

static bool vmm_off(void) {
  const char *e = getenv("FAKECU_NO_VMM");
  return e && e[0] == '1';
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  ENTER();
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  if (!pi || dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  if (attrib != CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
    return fk_leave(CUDA_ERROR_NOT_SUPPORTED);
  *pi = !vmm_off();
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  ENTER();
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  if (!can || dev < 0 || dev >= fk.ndev || peer < 0 || peer >= fk.ndev)
    return fk_leave(CUDA_ERROR_INVALID_DEVICE);
  *can = dev != peer;
  return fk_leave(CUDA_SUCCESS);
}

static bool prop_ok(const CUmemAllocationProp *p) {
  return p && p->type == CU_MEM_ALLOCATION_TYPE_PINNED && p->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
         p->location.id >= 0 && p->location.id < fk.ndev;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  ENTER();
  (void)option;
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  if (!g || !prop_ok(prop)) return fail(CUDA_ERROR_INVALID_VALUE);
  *g = PAGE;
  return fk_leave(CUDA_SUCCESS);
}

static int reservation_of(uintptr_t p, size_t n) {
  for (int i = 0; i < MAX_RESERVATIONS; i++)
    if (vm.size[i] && p >= vm.base[i] && p - vm.base[i] <= vm.size[i] && n <= vm.size[i] - (p - vm.base[i]))
      return i;
  return -1;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fail(rc);
  if (!ptr || !size || size % PAGE || (alignment && alignment % PAGE) || addr || flags)
    return fail(CUDA_ERROR_INVALID_VALUE);
  int slot = 0;
  while (slot < MAX_RESERVATIONS && vm.size[slot]) slot++;
  if (slot == MAX_RESERVATIONS) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  /* Over-reserve by a page to align the start. */
  char *m = mmap(NULL, size + PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY);
  uintptr_t base = ((uintptr_t)m + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
  if (base > (uintptr_t)m) munmap(m, base - (uintptr_t)m);
  munmap((char *)base + size, (uintptr_t)m + PAGE - base);
  vm.base[slot] = base;
  vm.size[slot] = size;
  *ptr = (CUdeviceptr)base;
  return fk_leave(CUDA_SUCCESS);
}

static page_t *page_at(uintptr_t a) {
  page_t *p;
  HASH_FIND_PTR(vm.pages, &a, p);
  return p;
}

static bool all_mapped(uintptr_t p, size_t n) {
  if (!n || p % PAGE || n % PAGE) return false;
  for (uintptr_t a = p; a < p + n; a += PAGE)
    if (!page_at(a)) return false;
  return true;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  ENTER();
  if (!fk.initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  int i = reservation_of((uintptr_t)ptr, size);
  if (i < 0 || vm.base[i] != (uintptr_t)ptr || vm.size[i] != size) return fail(CUDA_ERROR_INVALID_VALUE);
  for (uintptr_t a = (uintptr_t)ptr; vm.pages && a < (uintptr_t)ptr + size; a += PAGE)
    if (page_at(a)) return fail(CUDA_ERROR_INVALID_VALUE);
  munmap((void *)(uintptr_t)ptr, size);
  vm.size[i] = 0;
  return fk_leave(CUDA_SUCCESS);
}

static void drop_ref(handle_t *h) {
  if (--h->refs > 0) return;
  fk.used[h->device] -= h->size;
  free(h);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *out, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fail(rc);
  if (!out || !size || size % PAGE || !prop_ok(prop) || flags) return fail(CUDA_ERROR_INVALID_VALUE);
  if ((rc = fk_capture_unsafe())) return fail(rc);
  int dev = prop->location.id;
  if (fk.fail_after == 0 || size > fk.capacity - fk.used[dev]) return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
  handle_t *h = malloc(sizeof *h);
  if (!h) return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
  *h = (handle_t){.size = size, .device = dev, .refs = 1};
  fk.used[dev] += size;
  if (fk.fail_after > 0) fk.fail_after--;
  *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return fk_leave(CUDA_SUCCESS);
}

/* Handles are host pointers: a released one is gone, so a test that
 * releases twice is caught by ASan; here only refs are checked. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ENTER();
  handle_t *h = (handle_t *)(uintptr_t)handle;
  if (!h || h->refs < 1) return fail(CUDA_ERROR_INVALID_VALUE);
  drop_ref(h);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fail(rc);
  handle_t *h = (handle_t *)(uintptr_t)handle;
  uintptr_t p = (uintptr_t)ptr;
  if (!h || h->refs < 1 || offset || flags || size != h->size || p % PAGE || reservation_of(p, size) < 0)
    return fail(CUDA_ERROR_INVALID_VALUE);
  for (uintptr_t a = p; a < p + size; a += PAGE)
    if (page_at(a)) return fail(CUDA_ERROR_INVALID_VALUE);
  for (uintptr_t a = p; a < p + size; a += PAGE) {
    page_t *pg = calloc(1, sizeof *pg);
    if (!pg) abort();
    pg->addr = a;
    pg->h = h;
    h->refs++;
    HASH_ADD_PTR(vm.pages, addr, pg);
  }
  vm.mapped[h->device] += size;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  ENTER();
  if (!fk.initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  if (!desc || !count || !all_mapped((uintptr_t)ptr, size)) return fail(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; i++)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= fk.ndev || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return fail(CUDA_ERROR_INVALID_VALUE);
  mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE);
  for (uintptr_t a = (uintptr_t)ptr; a < (uintptr_t)ptr + size; a += PAGE) page_at(a)->accessible = true;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  ENTER();
  if (!fk.initialized) return fail(CUDA_ERROR_NOT_INITIALIZED);
  uintptr_t p = (uintptr_t)ptr;
  if (!all_mapped(p, size)) return fail(CUDA_ERROR_INVALID_VALUE);
  madvise((void *)p, size, MADV_DONTNEED);
  mprotect((void *)p, size, PROT_NONE);
  for (uintptr_t a = p; a < p + size; a += PAGE) {
    page_t *pg = page_at(a);
    HASH_DEL(vm.pages, pg);
    vm.mapped[pg->h->device] -= PAGE;
    drop_ref(pg->h);
    free(pg);
  }
  return fk_leave(CUDA_SUCCESS);
}

/* For memset/memcpy: [p, p+n) is mapped and accessible (lock held). */
bool fk_vmm_accessible(uintptr_t p, size_t n) {
  if (!vm.pages || !n) return false;
  for (uintptr_t a = p & ~(uintptr_t)(PAGE - 1); a < p + n; a += PAGE) {
    page_t *pg = page_at(a);
    if (!pg || !pg->accessible) return false;
  }
  return true;
}

void fakecu_vmm_stats(int device, size_t *mapped_bytes, int *reservations, long *errors) {
  fk_lock_only();
  if (mapped_bytes) *mapped_bytes = device >= 0 && device < FK_MAX_DEVICES ? vm.mapped[device] : 0;
  if (reservations) {
    *reservations = 0;
    for (int i = 0; i < MAX_RESERVATIONS; i++) *reservations += vm.size[i] != 0;
  }
  if (errors) *errors = vm.errors;
  fk_unlock_only();
}
