/* nvtx_regions.c: the NVTX tool side of nvtx_regions.h.
 *
 * Push/pop ranges are a thread's own nesting: they become the thread's
 * regions (cp_regions_push/pop), mixed with its cudapool_push_tag levels in
 * one stack. Start/end ranges may end on another thread: they become
 * cp_regions_start/end ranges. A range's name is its ASCII message, its
 * registered string, or its wide message with every character outside
 * ASCII as '?'; a range with no text is "(nvtx)". Domains are ignored:
 * regions are one name space. */
#include "state/nvtx_regions.h"

#include <dlfcn.h>
#include <limits.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "state/nvtx.h"
#include "state/regions.h"
#include "state/shim.h"

#define UNNAMED "(nvtx)"

static const char *ascii_of(const wchar_t *w, char *buf, size_t cap) {
  if (!w) return UNNAMED;
  size_t n = 0;
  for (; w[n] && n + 1 < cap; n++) buf[n] = w[n] > 0 && w[n] < 0x7f ? (char)w[n] : '?';
  buf[n] = '\0';
  return n ? buf : UNNAMED;
}

static const char *name_of(const nvtxEventAttributes_t *a, char *buf, size_t cap) {
  if (!a) return UNNAMED;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii && a->message.ascii[0] ? a->message.ascii : UNNAMED;
    case NVTX_MESSAGE_TYPE_UNICODE: return ascii_of(a->message.unicode, buf, cap);
    /* register_string's handles are their text. */
    case NVTX_MESSAGE_TYPE_REGISTERED: return a->message.registered ? (const char *)a->message.registered : UNNAMED;
    default: return UNNAMED;
  }
}

/* The thread's NVTX push levels open now (its cudapool_push_tag levels
 * are not NVTX's to count). */
static __thread int nvtx_level;

/* nvtxRangePush's answer: the level of the range opened, from 0. */
static int push_named(const char *name) {
  if (cp_regions_push(name && name[0] ? name : UNNAMED) != 0) return -1;
  return nvtx_level++;
}

static int push_a(const char *message) { return push_named(message); }

static int push_w(const wchar_t *message) {
  char buf[CP_REGION_NAME_MAX];
  return push_named(ascii_of(message, buf, sizeof buf));
}

static int push_ex(const nvtxEventAttributes_t *a) {
  char buf[CP_REGION_NAME_MAX];
  return push_named(name_of(a, buf, sizeof buf));
}

static int domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  (void)d;
  return push_ex(a);
}

/* nvtxRangePop's answer: the level of the range closed, or -1 without one. */
static int pop(void) {
  if (cp_regions_pop() != 0) return -1;
  return nvtx_level > 0 ? --nvtx_level : 0;
}

static int domain_pop(nvtxDomainHandle_t d) {
  (void)d;
  return pop();
}

static nvtxRangeId_t start_a(const char *message) {
  return cp_regions_start(message && message[0] ? message : UNNAMED);
}

static nvtxRangeId_t start_w(const wchar_t *message) {
  char buf[CP_REGION_NAME_MAX];
  return cp_regions_start(ascii_of(message, buf, sizeof buf));
}

static nvtxRangeId_t start_ex(const nvtxEventAttributes_t *a) {
  char buf[CP_REGION_NAME_MAX];
  return cp_regions_start(name_of(a, buf, sizeof buf));
}

static nvtxRangeId_t domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  (void)d;
  return start_ex(a);
}

static void end(nvtxRangeId_t id) { cp_regions_end(id); }

static void domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  (void)d;
  end(id);
}

/* A registered string's handle is a copy of its text, kept for the
 * process's life (programs register a few names once). */
static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *text) {
  (void)d;
  return (nvtxStringHandle_t)(text ? strdup(text) : NULL);
}

static void put(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
  if (table && id < size && table[id]) *table[id] = fn;
}

/* What an NVTX client calls once, at its first NVTX call, when
 * NVTX_INJECTION64_PATH names this library. Refused (0: the client
 * unloads it and its calls stay no-ops) when this library was not
 * preloaded: a child that lost LD_PRELOAD but kept the variable. */
CP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  if (dlsym(RTLD_DEFAULT, "InitializeInjectionNvtx2") != (void *)InitializeInjectionNvtx2) return 0;
  const NvtxExportTableCallbacks *cb = get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
  NvtxFunctionTable t = NULL;
  unsigned size = 0;
  if (!cb) return 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &size)) {
    put(t, size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)push_a);
    put(t, size, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer)push_w);
    put(t, size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)push_ex);
    put(t, size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
    put(t, size, NVTX_CBID_CORE_RangeStartA, (NvtxFunctionPointer)start_a);
    put(t, size, NVTX_CBID_CORE_RangeStartW, (NvtxFunctionPointer)start_w);
    put(t, size, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)start_ex);
    put(t, size, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)end);
  }
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size)) {
    put(t, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
    put(t, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
    put(t, size, NVTX_CBID_CORE2_DomainRangeStartEx, (NvtxFunctionPointer)domain_start);
    put(t, size, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)domain_end);
    put(t, size, NVTX_CBID_CORE2_DomainRegisterStringA, (NvtxFunctionPointer)register_string);
  }
  return 1;
}

static bool own_path(char *self) {
  Dl_info info;
  return dladdr((void *)InitializeInjectionNvtx2, &info) && info.dli_fname && realpath(info.dli_fname, self);
}

bool cp_nvtx_regions_is_self(const char *injection) {
  char self[PATH_MAX], named[PATH_MAX];
  return injection && injection[0] && own_path(self) && realpath(injection, named) && strcmp(self, named) == 0;
}

void cp_nvtx_regions_start(bool wanted, const char *injection, FILE *verbose) {
  const char *why = NULL;
  char self[PATH_MAX];
  if (!wanted)
    why = "CUDAPOOL_NVTX_REGIONS=0";
  else if (cp_secure_exec())
    why = "privileged program (secure execution)";
  else if (injection && injection[0])
    why = "a tool is attached: NVTX_INJECTION64_PATH is set";
  else if (cp_nvtx_on())
    why = "CUDAPOOL_NVTX is on";
  else if (!own_path(self))
    why = "this library's path is unknown";
  else if (setenv("NVTX_INJECTION64_PATH", self, 0) != 0)
    why = "NVTX_INJECTION64_PATH cannot be set";
  if (verbose)
    fprintf(verbose, "cudapool: NVTX ranges as regions %s%s%s\n", why ? "off (" : "on", why ? why : "",
            why ? ")" : "");
}
