/* ptr.c: the fake driver's calls that act on or describe a whole allocation
 * through a pointer: cuMemFreeAsync (and _ptsz), cuMemGetAddressRange_v2,
 * cuPointerGetAttribute(s), cuIpcGetMemHandle, and the test hook that reads
 * an IPC handle back (fakecu_ipc_base, fakecu.h).
 *
 * - cuMemFreeAsync(p, stream): the stream is looked up first
 *   (CUDA_ERROR_INVALID_HANDLE), then p must start a live allocation
 *   (CUDA_ERROR_INVALID_VALUE: 0, interior, freed), then the capture rules
 *   of streams.c apply as to any stream work. On a capturing stream the free
 *   is recorded (a free node), not run: the allocation stays live; whether p
 *   is a graph allocation is not checked (graphs are not modelled).
 *   Elsewhere it is released at once (work completes when submitted here).
 * - Any address inside a live allocation describes that whole allocation,
 *   as natively: cuMemGetAddressRange_v2 (NULL outputs ignored;
 *   CUDA_ERROR_NOT_FOUND outside every allocation), the RANGE_START_ADDR and
 *   RANGE_SIZE attributes, and cuIpcGetMemHandle, whose handle names the
 *   allocation's base and size.
 * - Attributes modelled: CONTEXT, MEMORY_TYPE (device), DEVICE_POINTER,
 *   HOST_POINTER (none for device memory), BUFFER_ID (the allocation's base:
 *   unique among live allocations, not over the process's life as natively),
 *   DEVICE_ORDINAL, RANGE_START_ADDR, RANGE_SIZE; any other gives
 *   CUDA_ERROR_INVALID_VALUE. cuPointerGetAttribute fails with
 *   CUDA_ERROR_INVALID_VALUE for a pointer in no allocation;
 *   cuPointerGetAttributes then succeeds and writes each attribute's zero
 *   value (its documented "default NULL values"). */
#include "fk.h"

#include <string.h>

#include "fakecu.h"

#define ENTER() fk_enter(__func__)

static CUresult free_async(CUdeviceptr dptr, CUstream h, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  fk_stream *s;
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  fk_alloc *a = dptr ? fk_alloc_exact((uintptr_t)dptr) : NULL;
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  if ((rc = fk_submit(s)) || s->cap) return rc;
  fk_alloc_release(a);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  ENTER();
  return fk_leave(free_async(dptr, hStream, 0));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  ENTER();
  return fk_leave(free_async(dptr, hStream, 1));
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fk_leave(rc);
  fk_alloc *a = fk_alloc_containing((uintptr_t)dptr, 1);
  if (!a) return fk_leave(CUDA_ERROR_NOT_FOUND);
  if (pbase) *pbase = (CUdeviceptr)(uintptr_t)a->base;
  if (psize) *psize = a->size;
  return fk_leave(CUDA_SUCCESS);
}

/* ---- pointer attributes ------------------------------------------------------- */

/* The size of an attribute's value; 0 for attributes not modelled. */
static size_t attribute_size(CUpointer_attribute attr) {
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void *);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: return sizeof(size_t);
    default: return 0;
  }
}

/* One attribute of ptr, inside allocation a. */
static CUresult attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr, const fk_alloc *a) {
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a->ctx->handle; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = (uintptr_t)a->base; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a->ctx->device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)a->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->size; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute_, CUdeviceptr ptr) {
  ENTER();
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  fk_alloc *a = fk_alloc_containing((uintptr_t)ptr, 1);
  if (!data || !a) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  return fk_leave(attribute(data, attribute_, ptr, a));
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr) {
  ENTER();
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  if (numAttributes && (!attributes || !data)) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < numAttributes; i++)
    if (!data[i] || !attribute_size(attributes[i])) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  fk_alloc *a = fk_alloc_containing((uintptr_t)ptr, 1);
  for (unsigned i = 0; i < numAttributes; i++) {
    /* A pointer in no allocation, and a device allocation's host pointer:
     * the default NULL value, no error. */
    if (!a || attribute(data[i], attributes[i], ptr, a) != CUDA_SUCCESS)
      memset(data[i], 0, attribute_size(attributes[i]));
  }
  return fk_leave(CUDA_SUCCESS);
}

/* ---- IPC ---------------------------------------------------------------------- */

#define IPC_MAGIC "fakecu-ipc-v1"

typedef struct ipc_handle {
  char magic[16];
  uint64_t base, size;
  int32_t device;
} ipc_handle;

_Static_assert(sizeof(ipc_handle) <= sizeof(CUipcMemHandle), "an IPC handle holds the record");

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  ENTER();
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return fk_leave(rc);
  fk_alloc *a = dptr ? fk_alloc_containing((uintptr_t)dptr, 1) : NULL;
  if (!pHandle || !a) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  ipc_handle h = {.magic = IPC_MAGIC, .base = (uintptr_t)a->base, .size = a->size, .device = a->ctx->device};
  memset(pHandle, 0, sizeof *pHandle);
  memcpy(pHandle, &h, sizeof h);
  return fk_leave(CUDA_SUCCESS);
}

/* Not counted, no lock: it only reads the caller's bytes. */
unsigned long long fakecu_ipc_base(const void *handle, size_t *size) {
  ipc_handle h;
  if (!handle) return 0;
  memcpy(&h, handle, sizeof h);
  if (memcmp(h.magic, IPC_MAGIC, sizeof IPC_MAGIC) != 0) return 0;
  if (size) *size = (size_t)h.size;
  return h.base;
}
