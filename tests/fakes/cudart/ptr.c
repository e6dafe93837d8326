/* ptr.c: calls that act on, or hand out, a whole allocation through a
 * pointer: the stream-ordered free (cudaFreeAsync and its per-thread-stream
 * variant) and the IPC export (cudaIpcGetMemHandle), plus the test hook that
 * reads a handle back (fakecuda_ipc_base, fakecuda.h).
 *
 * cudaFreeAsync(p, stream): the stream is looked up first (a bogus handle
 * gives cudaErrorInvalidResourceHandle), then p must start a live device
 * allocation (NULL, interior, freed and host pointers: cudaErrorInvalidValue),
 * then the capture rules of capture.c apply as to any stream work. On a
 * capturing stream the free is recorded into the capture (a free node), not
 * run: the allocation stays live; the graph's contents are not modelled, so
 * whether p is a graph allocation is not checked. Elsewhere the memory is
 * released when the stream reaches the free: the fake waits for the stream
 * (clock.c: the host then knows its earlier work complete) and releases the
 * allocation. Work on other streams that is not ordered before the free
 * still uses freed memory: the program's race, natively too.
 *
 * cudaIpcGetMemHandle(handle, p): p may be any address inside a live device
 * allocation (GPU-FACTS.md: an interior pointer exports the whole
 * allocation); the handle names that allocation's base and size. Anything
 * else (NULL, host, managed, freed memory, a NULL handle) gives
 * cudaErrorInvalidValue and leaves the handle untouched. */
#include "fake.h"
#include "fakecuda.h"

#include <string.h>

/* Declared by no header under __CUDA_API_VERSION_INTERNAL. */
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

static cudaError_t free_async(void *p, cudaStream_t stream, int ptsz) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  fc_alloc *a = p ? fc_alloc_exact(p) : NULL;
  if (!a || a->kind == FC_HOST) return cudaErrorInvalidValue;
  int captured;
  err = fc_submit(s, NULL, &captured);
  if (err || captured) return err;
  fc_clock_sync_stream(s);
  fc_alloc_release(a);
  return cudaSuccess;
}

#define ENTER() fc_enter(__func__)

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
  ENTER();
  return fc_leave(free_async(devPtr, hStream, 0));
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream) {
  ENTER();
  return fc_leave(free_async(devPtr, hStream, 1));
}

/* ---- IPC ------------------------------------------------------------------------ */

#define IPC_MAGIC "fakecuda-ipc-v1"

typedef struct ipc_handle {
  char magic[16];
  uint64_t base, size;
  int32_t device;
} ipc_handle;

_Static_assert(sizeof(ipc_handle) <= sizeof(cudaIpcMemHandle_t), "an IPC handle holds the record");

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
  ENTER();
  fc_alloc *a = devPtr ? fc_alloc_containing(devPtr) : NULL;
  if (!handle || !a || (a->kind != FC_DEVICE && a->kind != FC_PITCH)) return fc_leave(cudaErrorInvalidValue);
  ipc_handle h = {.magic = IPC_MAGIC, .base = (uintptr_t)a->base, .size = a->size, .device = a->device};
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  return fc_leave(cudaSuccess);
}

void *fakecuda_ipc_base(const void *handle, size_t *size) {
  ipc_handle h;
  if (!handle) return NULL;
  memcpy(&h, handle, sizeof h);
  if (memcmp(h.magic, IPC_MAGIC, sizeof IPC_MAGIC) != 0) return NULL;
  if (size) *size = (size_t)h.size;
  return (void *)(uintptr_t)h.base;
}
