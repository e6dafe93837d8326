/* cuda_vmm.c: the page interface of the core's backend table (backend.h)
 * over CUDA's virtual memory management, for expandable segments.
 *
 * Always the driver's calls (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemUnmap, cuMemAddressFree), whichever flavour the rest
 * of the backend uses: the runtime has no such calls. They are made in the
 * device's primary context (pushed when another is current), the context
 * the runtime itself uses. The page is the minimum granularity of pinned
 * device memory (2 MiB on the H200), or CUDAPOOL_EXPANDABLE_PAGE rounded up
 * to a power of two (the granularity, with one warning, when that unit is
 * not under the device's memory); 0, so ordinary segments, when libcuda
 * lacks a call (the fake runtime has no libcuda at all) or the device says
 * it cannot (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED).
 *
 * One physical allocation per page, released as soon as it is mapped: the
 * mapping keeps it alive, and unmapping the page frees it, so no handle is
 * kept. Access is read-write for the device and for every device that
 * cuDeviceCanAccessPeer says can reach it (cudaMalloc memory is reachable
 * by peers once the program enables peer access; this keeps that true).
 * The core unmaps only pages whose device work has completed (pages.c), so
 * unmap does not wait.
 *
 * Called by the core with the pool lock held; no state of its own. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda_vmm.h"
#include "backend/driver.h"
#include "parse.h"

static bool have_calls(void) {
  return cp_drv_ready() && cp_drv.cuDeviceGetAttribute && cp_drv.cuMemGetAllocationGranularity &&
         cp_drv.cuMemAddressReserve && cp_drv.cuMemAddressFree && cp_drv.cuMemCreate && cp_drv.cuMemRelease &&
         cp_drv.cuMemMap && cp_drv.cuMemUnmap && cp_drv.cuMemSetAccess;
}

static CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

static void warn_page_too_large(int device, size_t total, size_t granularity, size_t option) {
  static atomic_bool said;
  if (atomic_exchange(&said, true)) return;
  char value[32], memory[32], unit[32];
  if (cp_format_size_exact(option, value, sizeof value) == 0) strcpy(value, "?");
  if (cp_format_size_exact(total, memory, sizeof memory) == 0) strcpy(memory, "?");
  if (cp_format_size_exact(granularity, unit, sizeof unit) == 0) strcpy(unit, "?");
  fprintf(stderr,
          "cudapool: warning: CUDAPOOL_EXPANDABLE_PAGE=%s is not under the memory of device %d, %s "
          "(accepted: a size under it once rounded up to a power of two); using the default (the "
          "device's granularity, %s)\n",
          value, device, memory, unit);
}

/* A device's page once known (it never changes): map and unmap need it. */
static _Atomic size_t known_page[CP_MAX_DEVICES];

static _Atomic size_t page_option;

void cp_vmm_set_page_option(size_t bytes) { atomic_store_explicit(&page_option, bytes, memory_order_relaxed); }

size_t cp_vmm_page_size(void *ctx, int device) {
  (void)ctx;
  if (device < 0 || device >= CP_MAX_DEVICES) return 0;
  size_t known = atomic_load_explicit(&known_page[device], memory_order_relaxed);
  if (known) return known;
  if (!have_calls()) return 0;
  int token = cp_api_driver.enter(device), supported = 0;
  size_t page = 0;
  CUmemAllocationProp prop = device_memory(device);
  if (cp_drv.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  (CUdevice)device) != CUDA_SUCCESS ||
      !supported ||
      cp_drv.cuMemGetAllocationGranularity(&page, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    page = 0;
  size_t free_bytes = 0, total = 0;
  size_t option = atomic_load_explicit(&page_option, memory_order_relaxed);
  if (page && option &&
      (!cp_drv.cuMemGetInfo_v2 || cp_drv.cuMemGetInfo_v2(&free_bytes, &total) != CUDA_SUCCESS))
    total = 0;
  cp_api_driver.leave(token);
  /* CUDAPOOL_EXPANDABLE_PAGE: a larger unit, one physical allocation each
   * (fewer, larger mappings), a power of two and so a multiple of the
   * granularity, itself a power of two. */
  size_t granularity = page;
  while (page && page < option && page <= SIZE_MAX / 2) page *= 2;
  /* A unit the device cannot hold would fail every mapping (each failure an
   * out-of-memory line): the granularity instead, said once. */
  if (page > granularity && total && page >= total) {
    warn_page_too_large(device, total, granularity, option);
    page = granularity;
  }
  if (page) atomic_store_explicit(&known_page[device], page, memory_order_relaxed);
  return page;
}

int cp_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *out) {
  (void)ctx;
  int token = cp_api_driver.enter(device);
  CUdeviceptr p = 0;
  CUresult rc = cp_drv.cuMemAddressReserve(&p, size, 0, 0, 0);
  cp_api_driver.leave(token);
  if (rc != CUDA_SUCCESS) return rc == CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : EIO;
  *out = (uintptr_t)p;
  return 0;
}

void cp_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)ctx;
  int token = cp_api_driver.enter(device);
  cp_drv.cuMemAddressFree((CUdeviceptr)addr, size);
  cp_api_driver.leave(token);
}

/* The device itself and its peers that can reach its memory. */
static int access_list(int device, CUmemAccessDesc *desc, int cap) {
  int n = 0, count = 0;
  if (!cp_drv.cuDeviceGetCount || cp_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS) count = 0;
  desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc[n].location.id = device;
  desc[n++].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int d = 0; d < count && n < cap && cp_drv.cuDeviceCanAccessPeer; d++) {
    int can = 0;
    if (d == device || cp_drv.cuDeviceCanAccessPeer(&can, (CUdevice)d, (CUdevice)device) != CUDA_SUCCESS ||
        !can)
      continue;
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = d;
    desc[n++].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return n;
}

/* The bytes of the pages the driver unmapped (a page it refused stays
 * mapped, its memory held). */
static size_t unmap_pages(uintptr_t addr, size_t size, size_t page) {
  size_t unmapped = 0;
  for (size_t off = 0; off < size; off += page)
    if (cp_drv.cuMemUnmap((CUdeviceptr)(addr + off), page) == CUDA_SUCCESS) unmapped += page;
  return unmapped;
}

int cp_vmm_map(void *ctx, int device, uintptr_t addr, size_t size) {
  size_t page = cp_vmm_page_size(ctx, device);
  if (page == 0 || size % page) return EIO;
  int token = cp_api_driver.enter(device);
  CUmemAllocationProp prop = device_memory(device);
  CUresult rc = CUDA_SUCCESS;
  size_t done = 0;
  for (; done < size && rc == CUDA_SUCCESS; done += page) {
    CUmemGenericAllocationHandle h;
    if ((rc = cp_drv.cuMemCreate(&h, page, &prop, 0)) != CUDA_SUCCESS) break;
    rc = cp_drv.cuMemMap((CUdeviceptr)(addr + done), page, 0, h, 0);
    cp_drv.cuMemRelease(h); /* the mapping holds the memory now */
    if (rc != CUDA_SUCCESS) break;
  }
  if (rc == CUDA_SUCCESS) {
    CUmemAccessDesc desc[CP_MAX_DEVICES];
    int n = access_list(device, desc, CP_MAX_DEVICES);
    rc = cp_drv.cuMemSetAccess((CUdeviceptr)addr, size, desc, (size_t)n);
    /* A peer the driver refuses: the device's own access is what matters. */
    if (rc != CUDA_SUCCESS && n > 1) rc = cp_drv.cuMemSetAccess((CUdeviceptr)addr, size, desc, 1);
  }
  /* Nothing has used the pages mapped so far in this call. */
  if (rc != CUDA_SUCCESS) unmap_pages(addr, done, page);
  cp_api_driver.leave(token);
  if (rc == CUDA_SUCCESS) return 0;
  return rc == CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : EIO;
}

size_t cp_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size) {
  size_t page = cp_vmm_page_size(ctx, device);
  if (page == 0) return 0;
  int token = cp_api_driver.enter(device);
  size_t unmapped = unmap_pages(addr, size, page);
  cp_api_driver.leave(token);
  return unmapped;
}
