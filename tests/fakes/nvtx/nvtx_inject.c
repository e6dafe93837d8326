/* nvtx_inject.c: a fake NVTX tool, the injection library that
 * NVTX_INJECTION64_PATH names for the integration tests (a real tool, such
 * as compute-sanitizer, loads its own the same way).
 *
 * It implements the two entry points an NVTX v3 client looks up:
 * InitializeInjectionNvtx2 (the core: domains, marks, ranges) and
 * InitializeInjectionNvtxExtension (the memory extension: heaps and
 * regions), and appends one line per call to the file NVTX_FAKE_LOG names
 * (nothing without it), in the order the calls came:
 *   domain NAME
 *   heap+ H base=0x... size=N       H: 1, 2, ... in registration order
 *   heap- H
 *   region+ heap=H addr=0x... size=N
 *   region- addr=0x...
 *   mark TEXT / push TEXT / pop
 * Each line is one write() under a lock, so threads never interleave. */
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -2; /* -2: not opened yet; -1: no log */
static uintptr_t next_heap = 1;

static void say(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  pthread_mutex_lock(&lock);
  if (log_fd == -2) {
    const char *path = getenv("NVTX_FAKE_LOG");
    log_fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  }
  if (log_fd >= 0 && write(log_fd, line, (size_t)n) != n) {
    /* A short write shows as a broken line the test reports. */
  }
  pthread_mutex_unlock(&lock);
}

static const char *text_of(const nvtxEventAttributes_t *a) {
  return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii ? a->message.ascii : "?";
}

/* ---- core ---------------------------------------------------------------------- */

static nvtxDomainHandle_t domain_create(const char *name) {
  say("domain %s", name ? name : "?");
  return (nvtxDomainHandle_t)(uintptr_t)0xd0;
}

static void domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  (void)d;
  say("mark %s", text_of(a));
}

static int domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  (void)d;
  say("push %s", text_of(a));
  return 0;
}

static int domain_pop(nvtxDomainHandle_t d) {
  (void)d;
  say("pop");
  return 0;
}

static void put(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
  if (table && id < size && table[id]) *table[id] = fn;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable t = NULL;
  unsigned size = 0;
  if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size)) return 0;
  put(t, size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
  put(t, size, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)domain_mark);
  put(t, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
  put(t, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
  return 1;
}

/* ---- memory extension ---------------------------------------------------------- */

static nvtxMemHeapHandle_t heap_register(nvtxDomainHandle_t d, const nvtxMemHeapDesc_t *desc) {
  (void)d;
  const nvtxMemVirtualRangeDesc_t *r = desc->typeSpecificDesc;
  pthread_mutex_lock(&lock);
  uintptr_t h = next_heap++;
  pthread_mutex_unlock(&lock);
  say("heap+ %lu base=%#lx size=%zu", (unsigned long)h, (unsigned long)(uintptr_t)r->ptr, r->size);
  return (nvtxMemHeapHandle_t)h;
}

static void heap_unregister(nvtxDomainHandle_t d, nvtxMemHeapHandle_t heap) {
  (void)d;
  say("heap- %lu", (unsigned long)(uintptr_t)heap);
}

static void regions_register(nvtxDomainHandle_t d, const nvtxMemRegionsRegisterBatch_t *b) {
  (void)d;
  const nvtxMemVirtualRangeDesc_t *r = b->regionDescElements;
  for (size_t i = 0; i < b->regionCount; i++) {
    say("region+ heap=%lu addr=%#lx size=%zu", (unsigned long)(uintptr_t)b->heap,
        (unsigned long)(uintptr_t)r[i].ptr, r[i].size);
    if (b->regionHandleElementsOut) b->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)r[i].ptr;
  }
}

static void regions_unregister(nvtxDomainHandle_t d, const nvtxMemRegionsUnregisterBatch_t *b) {
  (void)d;
  for (size_t i = 0; i < b->refCount; i++)
    say("region- addr=%#lx", (unsigned long)(uintptr_t)b->refElements[i].pointer);
}

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
  if (!info || info->moduleId != NVTX_EXT_MODULEID_MEM || info->segmentsCount < 1) return 1;
  nvtxExtModuleSegment_t *seg = &info->segments[0];
  intptr_t *slot = seg->functionSlots;
  if (seg->slotCount <= NVTX3EXT_CBID_nvtxMemRegionsUnregister) return 0;
  slot[NVTX3EXT_CBID_nvtxMemHeapRegister] = (intptr_t)heap_register;
  slot[NVTX3EXT_CBID_nvtxMemHeapUnregister] = (intptr_t)heap_unregister;
  slot[NVTX3EXT_CBID_nvtxMemRegionsRegister] = (intptr_t)regions_register;
  slot[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = (intptr_t)regions_unregister;
  return 1;
}
