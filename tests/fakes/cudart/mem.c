/* mem.c: "device" memory served from host memory, and the table of live
 * allocations that decides every pointer question (which device, whole
 * allocation, valid free or cudaErrorInvalidValue).
 *
 * Invariants: fc.allocs is sorted by base and its ranges are disjoint;
 * fc.used[d] is the sum of `charged` over device-side allocations of d and
 * never exceeds fc.capacity; allocations of FC_MMAP_MIN bytes or more are
 * mmap(MAP_NORESERVE) so tests can "allocate" gigabytes without touching
 * host pages. cudaFree waits for the device as natively (a device-wide host
 * synchronisation, see clock.c). */
#include "fake.h"

#include "shared_mem.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FC_MMAP_MIN ((size_t)1 << 20)

static size_t lower_bound(const void *p) {
  size_t lo = 0, hi = fc.nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)fc.allocs[mid].base < (uintptr_t)p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

fc_alloc *fc_alloc_exact(const void *p) {
  size_t i = lower_bound(p);
  return i < fc.nallocs && fc.allocs[i].base == p ? &fc.allocs[i] : NULL;
}

fc_alloc *fc_alloc_containing(const void *p) {
  size_t i = lower_bound((const char *)p + 1);
  if (i == 0) return NULL;
  fc_alloc *a = &fc.allocs[i - 1];
  return (uintptr_t)p - (uintptr_t)a->base < a->size ? a : NULL;
}

_Static_assert(FC_SHM_DEVICES == FC_MAX_DEVICES, "the shared file has a column per device");

/* This process's row of the shared file (shared_mem.h), or NULL (none
 * free, or a forked child still on its parent's). */
static fc_shm_proc *own_row(void) { return fc.shared_pid == getpid() ? fc.shared_proc : NULL; }

/* With FAKECUDA_SHARED_MEM: charge every process's counter, or fail when
 * the device (all processes together) has not that much left. The file's
 * second row holds each device's peak of that counter (what a monitor
 * sampling the device would see at most, read by the tests). */
static bool shared_charge(int dev, size_t charged) {
  if (!fc.shared_used) return true;
  uint64_t used = atomic_load(&fc.shared_used[dev]);
  do {
    if (charged > fc.capacity - (used < fc.capacity ? used : fc.capacity)) return false;
  } while (!atomic_compare_exchange_weak(&fc.shared_used[dev], &used, used + charged));
  _Atomic uint64_t *peak = &fc.shared_used[FC_MAX_DEVICES + dev];
  uint64_t seen = atomic_load(peak);
  while (seen < used + charged && !atomic_compare_exchange_weak(peak, &seen, used + charged)) {
  }
  fc_shm_proc *r = own_row();
  if (r) atomic_fetch_add(&r->bytes[dev], charged);
  return true;
}

static void shared_uncharge(int dev, size_t charged) {
  if (!fc.shared_used || !charged) return;
  atomic_fetch_sub(&fc.shared_used[dev], charged);
  fc_shm_proc *r = own_row();
  if (r) atomic_fetch_sub(&r->bytes[dev], charged);
}

/* A held process's memory given back, as a driver does late (shared_mem.h):
 * 0, or -1 when no held row has that pid. */
static int release_process(int pid) {
  if (!fc.shared_used || pid <= 0) return -1;
  fc_shm *m = (fc_shm *)(void *)fc.shared_used;
  for (int i = 0; i < FC_SHM_PROCS; i++) {
    fc_shm_proc *r = &m->procs[i];
    if (atomic_load(&r->pid) != (uint32_t)pid || !atomic_load(&r->held)) continue;
    for (int d = 0; d < FC_SHM_DEVICES; d++) atomic_fetch_sub(&fc.shared_used[d], atomic_exchange(&r->bytes[d], 0));
    atomic_store(&r->held, 0);
    atomic_store(&r->pid, 0);
    return 0;
  }
  return -1;
}

int fakecuda_release_process(int pid) {
  fc_enter(__func__);
  int rc = release_process(pid);
  fc_leave(cudaSuccess);
  return rc;
}

/* FAKECUDA_EXIT_PIPE=R,W: the process's exit stops where a driver would
 * still hold its memory (after every other library's end): one byte 'e'
 * written to fd W, then fd R read until it closes. What a test needs to act
 * in that window without sleeping. */
static void wait_at_exit(void) {
  const char *e = getenv("FAKECUDA_EXIT_PIPE");
  int r, w;
  if (!e || sscanf(e, "%d,%d", &r, &w) != 2) return;
  char c = 'e';
  if (write(w, &c, 1) != 1) return;
  while (read(r, &c, 1) > 0) {
  }
}

/* A driver takes a process's device memory back as it dies: what this
 * process still holds leaves the shared counter at its exit. */
__attribute__((destructor)) static void shared_uncharge_at_exit(void) {
  wait_at_exit();
  if (!fc.shared_used || fc.shared_pid != getpid()) return;
  /* Held: it stays counted, and listed, until fakecuda_release_process. */
  if (fc.shared_proc && atomic_load(&fc.shared_proc->held)) return;
  pthread_mutex_lock(&fc.lock);
  for (size_t i = 0; i < fc.nallocs; i++) {
    shared_uncharge(fc.allocs[i].device, fc.allocs[i].charged);
    fc.allocs[i].charged = 0; /* a free in a later destructor uncharges nothing */
  }
  if (fc.shared_proc) atomic_store(&fc.shared_proc->pid, 0);
  pthread_mutex_unlock(&fc.lock);
}

cudaError_t fc_alloc_new(size_t size, enum fc_alloc_kind kind, int dev, void **out) {
  if (size > SIZE_MAX - 2 * FC_MMAP_MIN) return cudaErrorMemoryAllocation;
  size_t charged = (size + FC_ALIGN - 1) & ~(size_t)(FC_ALIGN - 1);
  int on_device = kind != FC_HOST;
  if (on_device && charged > fc.capacity - fc.used[dev]) return cudaErrorMemoryAllocation;
  if (on_device && !shared_charge(dev, charged)) return cudaErrorMemoryAllocation;
  fc_alloc a = {.size = size, .charged = on_device ? charged : 0, .device = dev, .kind = kind};
  if (charged >= FC_MMAP_MIN) {
    a.maplen = (charged + 4095) & ~(size_t)4095;
    void *m =
        mmap(NULL, a.maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return shared_uncharge(dev, a.charged), cudaErrorMemoryAllocation;
    a.base = m;
  } else {
    a.base = aligned_alloc(FC_ALIGN, charged);
    if (!a.base) return shared_uncharge(dev, a.charged), cudaErrorMemoryAllocation;
  }
  if (fc.nallocs == fc.capallocs) {
    size_t cap = fc.capallocs ? 2 * fc.capallocs : 256;
    fc_alloc *na = realloc(fc.allocs, cap * sizeof *na);
    if (!na) abort();
    fc.allocs = na;
    fc.capallocs = cap;
  }
  size_t i = lower_bound(a.base);
  memmove(&fc.allocs[i + 1], &fc.allocs[i], (fc.nallocs - i) * sizeof a);
  fc.allocs[i] = a;
  fc.nallocs++;
  fc.used[dev] += a.charged;
  *out = a.base;
  return cudaSuccess;
}

void fc_alloc_release(fc_alloc *a) {
  if (a->pool) fc_mempool_released(a);
  fc.used[a->device] -= a->charged;
  shared_uncharge(a->device, a->charged);
  if (a->maplen)
    munmap(a->base, a->maplen);
  else
    free(a->base);
  size_t i = (size_t)(a - fc.allocs);
  memmove(&fc.allocs[i], &fc.allocs[i + 1], (fc.nallocs - i - 1) * sizeof *a);
  fc.nallocs--;
}

void fc_alloc_drop_device(int dev) {
  for (size_t i = fc.nallocs; i-- > 0;)
    if (fc.allocs[i].device == dev) fc_alloc_release(&fc.allocs[i]);
}

#define ENTER() fc_enter(__func__)

cudaError_t cudaMalloc(void **p, size_t size) {
  ENTER();
  if (!p) return fc_leave(cudaErrorInvalidValue);
  cudaError_t err = fc_capture_unsafe();
  if (err) return fc_leave(err);
  if (size == 0) {
    *p = NULL;
    return fc_leave(cudaSuccess);
  }
  if (fc.fail_after == 0) return fc_leave(cudaErrorMemoryAllocation);
  if (fc.fail_after > 0) fc.fail_after--;
  return fc_leave(fc_alloc_new(size, FC_DEVICE, fc_cur_device(), p));
}

static int refuse_frees; /* fakecuda_refuse_frees; under the fake's lock */

void fakecuda_refuse_frees(int on) {
  fc_enter(__func__);
  refuse_frees = on;
  fc_leave(cudaSuccess);
}

static cudaError_t free_kind(void *p, int host) {
  /* Seen on the H200: cudaFree(NULL) during a strict capture fails too. */
  cudaError_t err = fc_capture_unsafe();
  if (err) return err;
  if (!p) return cudaSuccess;
  fc_alloc *a = fc_alloc_exact(p);
  if (!a || (a->kind == FC_HOST) != host) return cudaErrorInvalidValue;
  if (!host && refuse_frees) return cudaErrorCudartUnloading;
  fc_clock_sync_device(a->device);
  fc_alloc_release(a);
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  ENTER();
  return fc_leave(free_kind(p, 0));
}

cudaError_t cudaFreeHost(void *p) {
  ENTER();
  return fc_leave(free_kind(p, 1));
}

cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags) {
  ENTER();
  if (!p || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
    return fc_leave(cudaErrorInvalidValue);
  cudaError_t err = fc_capture_unsafe();
  if (err) return fc_leave(err);
  return fc_leave(fc_alloc_new(size, FC_MANAGED, fc_cur_device(), p));
}

cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
  ENTER();
  if (!p || !pitch) return fc_leave(cudaErrorInvalidValue);
  cudaError_t err = fc_capture_unsafe();
  if (err) return fc_leave(err);
  size_t pt = (width + FC_ALIGN - 1) & ~(size_t)(FC_ALIGN - 1);
  if (width == 0 || height == 0) {
    *p = NULL;
    *pitch = pt;
    return fc_leave(cudaSuccess);
  }
  if (height > SIZE_MAX / pt) return fc_leave(cudaErrorMemoryAllocation);
  err = fc_alloc_new(pt * height, FC_PITCH, fc_cur_device(), p);
  if (!err) *pitch = pt;
  return fc_leave(err);
}

static cudaError_t host_alloc(void **p, size_t size) {
  if (!p) return cudaErrorInvalidValue;
  cudaError_t err = fc_capture_unsafe();
  if (err) return err;
  if (size == 0) {
    *p = NULL;
    return cudaSuccess;
  }
  return fc_alloc_new(size, FC_HOST, fc_cur_device(), p);
}

cudaError_t cudaMallocHost(void **p, size_t size) {
  ENTER();
  return fc_leave(host_alloc(p, size));
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
  ENTER();
  if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
    return fc_leave(cudaErrorInvalidValue);
  return fc_leave(host_alloc(p, size));
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  ENTER();
  /* The driver's cuMemGetInfo rejects NULL outputs; the runtime passes that on. */
  if (!free_bytes || !total) return fc_leave(cudaErrorInvalidValue);
  int dev = fc_cur_device();
  *total = fc.capacity;
  size_t used = fc.shared_used ? (size_t)atomic_load(&fc.shared_used[dev]) : fc.used[dev];
  *free_bytes = used < fc.capacity ? fc.capacity - used : 0;
  return fc_leave(cudaSuccess);
}

/* Interior pointers describe the allocation they lie in, as natively. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr) {
  ENTER();
  if (!attr) return fc_leave(cudaErrorInvalidValue);
  memset(attr, 0, sizeof *attr);
  fc_alloc *a = ptr ? fc_alloc_containing(ptr) : NULL;
  if (!a) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = cudaInvalidDeviceId;
    attr->hostPointer = (void *)ptr;
    return fc_leave(cudaSuccess);
  }
  attr->device = a->device;
  attr->devicePointer = (void *)ptr;
  switch (a->kind) {
    case FC_MANAGED:
      attr->type = cudaMemoryTypeManaged;
      attr->hostPointer = (void *)ptr;
      break;
    case FC_HOST:
      attr->type = cudaMemoryTypeHost;
      attr->hostPointer = (void *)ptr;
      break;
    default: attr->type = cudaMemoryTypeDevice; break;
  }
  return fc_leave(cudaSuccess);
}
