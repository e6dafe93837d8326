/* nvtx.c: the NVTX domain, heaps and regions of nvtx.h.
 *
 * The heap table is an array sorted by base address: segments are few and
 * change rarely (a new one is a cudaMalloc), while every block handed out
 * looks its segment up (a binary search). The NVTX functions are the
 * header's own (static to this library: -fvisibility=hidden and the
 * header's visibility pragma); without a tool each is a load and a
 * compare, and this module calls none while off. */
#include "state/nvtx.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

typedef struct heap {
  int device;
  unsigned epoch; /* the device's reset count when it was registered */
  uintptr_t base;
  size_t size;
  nvtxMemHeapHandle_t handle;
} heap_t;

static bool nvtx_on; /* written once at start, before any pool exists */
static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static heap_t *heaps; /* sorted by base, none overlapping */
static size_t n_heaps, cap_heaps;

void cp_nvtx_decide(cp_nvtx_t setting, const char *injection, FILE *verbose) {
  bool attached = injection != NULL && injection[0] != '\0';
  nvtx_on = setting == CP_NVTX_ON || (setting == CP_NVTX_AUTO && attached);
  if (verbose)
    fprintf(verbose, "cudapool: NVTX %s (CUDAPOOL_NVTX=%s, %s)\n", nvtx_on ? "on" : "off",
            setting == CP_NVTX_ON ? "1" : setting == CP_NVTX_OFF ? "0" : "auto",
            attached ? "a tool is attached: NVTX_INJECTION64_PATH is set" : "no tool: NVTX_INJECTION64_PATH unset");
}

bool cp_nvtx_on(void) { return nvtx_on; }

static void create_domain(void) { domain = nvtxDomainCreateA("cudapool"); }

void cp_nvtx_prepare(void) {
  if (nvtx_on) pthread_once(&domain_once, create_domain);
}

/* ---- heaps ----------------------------------------------------------------------- */

/* With heaps_lock held: the index of the first heap whose end lies past addr. */
static size_t first_ending_after(uintptr_t addr) {
  size_t lo = 0, hi = n_heaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (heaps[mid].base + heaps[mid].size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void unregister_at(size_t i) {
  nvtxMemHeapUnregister(domain, heaps[i].handle);
  memmove(&heaps[i], &heaps[i + 1], (n_heaps - i - 1) * sizeof heaps[0]);
  n_heaps--;
}

void cp_nvtx_segment_added(int device, unsigned epoch, uintptr_t base, size_t size) {
  if (!nvtx_on || size == 0) return;
  pthread_mutex_lock(&heaps_lock);
  size_t i = first_ending_after(base);
  /* Left over from a reset this module missed: that memory is gone. */
  while (i < n_heaps && heaps[i].base < base + size) unregister_at(i);
  if (n_heaps == cap_heaps) {
    size_t cap = cap_heaps ? cap_heaps * 2 : 64;
    heap_t *grown = realloc(heaps, cap * sizeof *grown);
    if (!grown) { /* the tool then sees the segment as one plain allocation */
      pthread_mutex_unlock(&heaps_lock);
      return;
    }
    heaps = grown;
    cap_heaps = cap;
  }
  nvtxMemVirtualRangeDesc_t range = {.size = size, .ptr = (const void *)base};
  nvtxMemHeapDesc_t desc = {
      .extCompatID = NVTX_EXT_COMPATID_MEM,
      .structSize = sizeof desc,
      .usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR,
      .type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
      .typeSpecificDescSize = sizeof range,
      .typeSpecificDesc = &range,
      .messageType = NVTX_MESSAGE_TYPE_ASCII,
      .message = {.ascii = "cudapool segment"},
  };
  nvtxMemHeapHandle_t handle = nvtxMemHeapRegister(domain, &desc);
  memmove(&heaps[i + 1], &heaps[i], (n_heaps - i) * sizeof heaps[0]);
  heaps[i] = (heap_t){.device = device, .epoch = epoch, .base = base, .size = size, .handle = handle};
  n_heaps++;
  pthread_mutex_unlock(&heaps_lock);
}

void cp_nvtx_segment_removed(uintptr_t base) {
  if (!nvtx_on) return;
  pthread_mutex_lock(&heaps_lock);
  size_t i = first_ending_after(base);
  if (i < n_heaps && heaps[i].base == base) unregister_at(i);
  pthread_mutex_unlock(&heaps_lock);
}

void cp_nvtx_device_reset(int device, unsigned epoch) {
  if (!nvtx_on) return;
  pthread_mutex_lock(&heaps_lock);
  /* Not newer than the reset, counting with wrap-around. */
  for (size_t i = n_heaps; i-- > 0;)
    if (heaps[i].device == device && (int)(heaps[i].epoch - epoch) <= 0) unregister_at(i);
  pthread_mutex_unlock(&heaps_lock);
}

/* ---- regions --------------------------------------------------------------------- */

void cp_nvtx_block_handed_out(uintptr_t addr, size_t requested) {
  if (!nvtx_on) return;
  pthread_mutex_lock(&heaps_lock);
  size_t i = first_ending_after(addr);
  if (i < n_heaps && heaps[i].base <= addr) {
    nvtxMemVirtualRangeDesc_t range = {.size = requested, .ptr = (const void *)addr};
    nvtxMemRegionHandle_t handle;
    nvtxMemRegionsRegisterBatch_t batch = {
        .extCompatID = NVTX_EXT_COMPATID_MEM,
        .structSize = sizeof batch,
        .regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
        .heap = heaps[i].handle,
        .regionCount = 1,
        .regionDescElementSize = sizeof range,
        .regionDescElements = &range,
        .regionHandleElementsOut = &handle,
    };
    nvtxMemRegionsRegister(domain, &batch);
  }
  pthread_mutex_unlock(&heaps_lock);
}

void cp_nvtx_block_freed(uintptr_t addr) {
  if (!nvtx_on) return;
  /* Only blocks of a registered heap have a region (not an expandable
   * segment's, nor one made before a reset this module handled). */
  pthread_mutex_lock(&heaps_lock);
  size_t i = first_ending_after(addr);
  bool registered = i < n_heaps && heaps[i].base <= addr;
  pthread_mutex_unlock(&heaps_lock);
  if (!registered) return;
  nvtxMemRegionRef_t ref = {.pointer = (const void *)addr};
  nvtxMemRegionsUnregisterBatch_t batch = {
      .extCompatID = NVTX_EXT_COMPATID_MEM,
      .structSize = sizeof batch,
      .refType = NVTX_MEM_REGION_REF_TYPE_POINTER,
      .refCount = 1,
      .refElementSize = sizeof ref,
      .refElements = &ref,
  };
  nvtxMemRegionsUnregister(domain, &batch);
}

/* ---- marks and ranges ------------------------------------------------------------ */

static nvtxEventAttributes_t event_of(const char *text) {
  nvtxEventAttributes_t attr;
  memset(&attr, 0, sizeof attr);
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = text;
  return attr;
}

void cp_nvtx_mark_barrier(void) {
  if (!nvtx_on) return;
  nvtxEventAttributes_t attr = event_of("cudapool barrier");
  nvtxDomainMarkEx(domain, &attr);
}

void cp_nvtx_mark_out_of_memory(size_t requested) {
  if (!nvtx_on) return;
  char text[96], size[32];
  cp_format_size_human(requested, size, sizeof size);
  snprintf(text, sizeof text, "cudapool out of memory: asked %s", size);
  nvtxEventAttributes_t attr = event_of(text);
  nvtxDomainMarkEx(domain, &attr);
}

void cp_nvtx_range_push(const char *what) {
  if (!nvtx_on) return;
  nvtxEventAttributes_t attr = event_of(what);
  nvtxDomainRangePushEx(domain, &attr);
}

void cp_nvtx_range_pop(void) {
  if (nvtx_on) nvtxDomainRangePop(domain);
}
