/* dlsym_hook.c: the two doors through which programs reach the driver's
 * entry points without linking libcuda: dlsym and cuGetProcAddress. A
 * statically linked runtime, CuPy, cuBLAS and XLA dlopen("libcuda.so.1") and
 * then either dlsym every entry point (XLA) or dlsym cuGetProcAddress_v2 once
 * and ask it for the rest (the runtime, shared or static).
 *
 * dlsym. A lookup by handle of a name cudapool serves (CP_DRV_SERVED in
 * driver.h: cuGetProcAddress_v2, cuGetProcAddress, cuMemAlloc_v2, ...; or
 * CP_DRV_WORK in driver_work.h: cuLaunchKernel, cuMemcpyHtoD_v2, ...) whose
 * answer is libcuda's own function returns cudapool's wrapper instead; every
 * other call behaves exactly as glibc's dlsym, because it *is* glibc's dlsym,
 * entered by a jump with the caller's return address still in place. That
 * matters: glibc resolves RTLD_NEXT after the calling object and RTLD_DEFAULT
 * in the calling object's scope (a library loaded RTLD_LOCAL sees its own
 * group), and finds the caller from the return address. So the exported
 * dlsym is a few instructions of assembly (x86-64, AArch64) that save the
 * arguments, ask cp_dlsym_route() which function should answer, restore them
 * and jump there: glibc's dlsym for everything but the served names. No C
 * function can promise that tail call (sanitizers and -O0 break it).
 * cp_dlsym_route may run before anything else of cudapool and before the
 * sanitizer runtimes are set up (ASan and TSan look their interceptors up
 * with dlsym while they initialise): it is not instrumented, touches only
 * static words, allocates nothing and takes no lock. It never calls dlsym
 * itself (the real one comes from dlvsym), so no lookup can recurse.
 *
 * cuGetProcAddress. The resolver asks the real one first, so the status, the
 * return code and the version chosen for (symbol, cudaVersion, flags) are
 * exactly the driver's; only a pointer to one of the served variants is
 * swapped for its wrapper. The variant is recognised by the pointer the
 * driver returned (it is the exported function of that name), so that
 * cuMemAlloc asked for with an old cudaVersion (the 32-bit cuMemAlloc) or
 * cuStreamSynchronize with the per-thread flag (cuStreamSynchronize_ptsz)
 * keeps its exact ABI. Should a driver hand out an internal address instead,
 * the (name, version, flags) rules below name the variant, for the CUDA
 * versions they were written from (cudaTypedefs.h of CUDA 13.0); later
 * versions are passed through untouched rather than guessed.
 *
 * The entry points that submit work (driver_work.h) are swapped the same
 * way, by pointer, for driver_work.c's wrappers, through both doors. Two
 * lookups would let work past unseen, and stop the learned order for the
 * process (cp_order_give_up): a cuGetProcAddress that finds a name the
 * build's CUDA headers do not know (a newer entry point; driver_names.c),
 * and one of a work entry point answered with an address that is none of
 * libcuda's exported functions. A lookup that fails never does.
 *
 * Nothing is swapped while the shim is disabled (CUDAPOOL_DISABLE). The
 * mapping does not look at cp_inside: a runtime initialising inside one of
 * the shim's own calls must still get the wrappers it will keep.
 *
 * Threads: the only state is the first unknown name, written once by the
 * thread that claims it (glibc's own dlsym is found and kept by
 * backend/real_dlsym.c). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "backend/driver.h"
#include "entry/driver_work.h"
#include "state/entry_stats.h"
#include "state/layer.h"
#include "state/order.h"

typedef cp_dlsym_fn dlsym_fn;

#define CP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

/* Only reached when no real dlsym exists: answer as a failed lookup. */
static void *no_dlsym(void *handle, const char *name) {
  (void)handle, (void)name;
  return NULL;
}

/* A lookup of a served name by handle: glibc answers (by handle, so from
 * here as from anywhere), then the driver table swaps libcuda's own entry
 * for the wrapper. dlerror() is left as glibc left it. */
static void *served_lookup(void *handle, const char *name) {
  void *fn = cp_real_dlsym(handle, name);
  if (fn) cp_entry_lookup(name, CP_DOOR_DLSYM);
  return fn ? cp_drv_hook(fn, name, NULL, 0, 0) : NULL;
}

static const char *const served_names[] = {
#define CP_SERVED_NAME(name) #name,
    CP_DRV_SERVED(CP_SERVED_NAME)
#undef CP_SERVED_NAME
};

/* strcmp may be a sanitizer interceptor not yet set up: compare by hand. */
CP_NO_SANITIZE static bool same(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

CP_NO_SANITIZE bool cp_drv_is_served_name(const char *name) {
  if (name[0] != 'c' || name[1] != 'u') return false;
  for (size_t i = 0; i < sizeof served_names / sizeof served_names[0]; i++)
    if (same(name, served_names[i])) return true;
  return false;
}

/* Memory entry points cudapool does not serve, looked up by handle through
 * served_lookup too (which hands them out unchanged) so that entry_stats.h
 * counts them. */
CP_NO_SANITIZE static bool watched_name(const char *name) {
  static const char *const prefixes[] = {"cuMem", "cuDeviceSetMemPool", "cuDeviceGetDefaultMemPool"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    const char *a = name, *p = prefixes[i];
    while (*p && *a == *p) a++, p++;
    if (!*p) return true;
  }
  return false;
}

CP_NO_SANITIZE __attribute__((used)) void *cp_dlsym_route(void *handle, const char *name) {
  dlsym_fn *real = cp_find_real_dlsym();
  if (!real) return (void *)no_dlsym;
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name ||
      !(cp_drv_is_served_name(name) || watched_name(name) || cp_drv_is_work_name(name)))
    return (void *)real;
  return (void *)served_lookup;
}

/* ---- cuGetProcAddress ------------------------------------------------------------ */

/* Rules, in order of preference: the first whose base matches, whose
 * minimum version the request meets and (per-thread ones) whose flag is
 * set names the variant. */
typedef struct rule {
  const char *base;
  int min_version;
  bool per_thread;
  const char *variant;
} rule_t;

static const rule_t rules[] = {
    {"cuMemAlloc", 3020, false, "cuMemAlloc_v2"},
    {"cuMemFree", 3020, false, "cuMemFree_v2"},
    {"cuMemAllocPitch", 3020, false, "cuMemAllocPitch_v2"},
    {"cuMemGetInfo", 3020, false, "cuMemGetInfo_v2"},
    {"cuStreamSynchronize", 7000, true, "cuStreamSynchronize_ptsz"},
    {"cuStreamSynchronize", 2000, false, "cuStreamSynchronize"},
    {"cuCtxSynchronize", 13000, false, "cuCtxSynchronize_v2"},
    {"cuCtxSynchronize", 2000, false, "cuCtxSynchronize"},
    {"cuStreamCreate", 2000, false, "cuStreamCreate"},
    {"cuStreamCreateWithPriority", 5050, false, "cuStreamCreateWithPriority"},
    {"cuStreamDestroy", 4000, false, "cuStreamDestroy_v2"},
    {"cuDevicePrimaryCtxReset", 11000, false, "cuDevicePrimaryCtxReset_v2"},
    {"cuDevicePrimaryCtxReset", 7000, false, "cuDevicePrimaryCtxReset"},
    {"cuDevicePrimaryCtxRelease", 11000, false, "cuDevicePrimaryCtxRelease_v2"},
    {"cuDevicePrimaryCtxRelease", 7000, false, "cuDevicePrimaryCtxRelease"},
    {"cuStreamBeginCapture", 10010, true, "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCapture", 10010, false, "cuStreamBeginCapture_v2"},
    {"cuStreamBeginCapture", 10000, true, "cuStreamBeginCapture_ptsz"},
    {"cuStreamBeginCapture", 10000, false, "cuStreamBeginCapture"},
    {"cuStreamBeginCaptureToGraph", 12030, true, "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuStreamBeginCaptureToGraph", 12030, false, "cuStreamBeginCaptureToGraph"},
    {"cuStreamEndCapture", 10000, true, "cuStreamEndCapture_ptsz"},
    {"cuStreamEndCapture", 10000, false, "cuStreamEndCapture"},
    {"cuGetProcAddress", 12000, false, "cuGetProcAddress_v2"},
    {"cuGetProcAddress", 11030, false, "cuGetProcAddress"},
    {"cuMemFreeAsync", 11020, true, "cuMemFreeAsync_ptsz"},
    {"cuMemFreeAsync", 11020, false, "cuMemFreeAsync"},
    {"cuMemGetAddressRange", 3020, false, "cuMemGetAddressRange_v2"},
    {"cuPointerGetAttribute", 4000, false, "cuPointerGetAttribute"},
    {"cuPointerGetAttributes", 7000, false, "cuPointerGetAttributes"},
    {"cuIpcGetMemHandle", 4010, false, "cuIpcGetMemHandle"},
    {"cuMemAllocAsync", 11020, true, "cuMemAllocAsync_ptsz"},
    {"cuMemAllocAsync", 11020, false, "cuMemAllocAsync"},
    {"cuMemAllocFromPoolAsync", 11020, true, "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", 11020, false, "cuMemAllocFromPoolAsync"},
    {"cuDeviceSetMemPool", 11020, false, "cuDeviceSetMemPool"},
    {"cuMemPoolSetAccess", 11020, false, "cuMemPoolSetAccess"},
    {"cuMemPoolGetAttribute", 11020, false, "cuMemPoolGetAttribute"},
    {"cuMemPoolTrimTo", 11020, false, "cuMemPoolTrimTo"},
    {"cuGreenCtxStreamCreate", 12040, false, "cuGreenCtxStreamCreate"},
    {"cuStreamWaitEvent", 7000, true, "cuStreamWaitEvent_ptsz"},
    {"cuStreamWaitEvent", 3020, false, "cuStreamWaitEvent"},
    {"cuCtxEnablePeerAccess", 4000, false, "cuCtxEnablePeerAccess"},
};

/* The newest CUDA the rules know: a request for a later version may get a
 * variant with another ABI. */
#define RULES_KNOW_BELOW 14000

static const char *variant_by_rule(const char *base, int version, cuuint64_t flags) {
  if (version >= RULES_KNOW_BELOW) return NULL;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    const rule_t *r = &rules[i];
    if (strcmp(r->base, base) == 0 && version >= r->min_version && (!r->per_thread || per_thread))
      return r->variant;
  }
  return NULL;
}

void *cp_drv_hook(void *fn, const char *name, const char *base, int cuda_version, cuuint64_t flags) {
  if (!fn || !cp_hooking()) return fn;
  cp_drv_ready();
#define CP_BY_POINTER(v) \
  if (cp_drv.v && (void *)cp_drv.v == fn) return (void *)cp_w_##v;
  CP_DRV_SERVED(CP_BY_POINTER)
#undef CP_BY_POINTER
  void *work = cp_drv_work_wrapper(fn);
  if (work) return work;
  /* A dlsym whose answer is not libcuda's function of that name (another
   * library defines it): not ours to touch. */
  if (name || !base) return fn;
  /* An entry point that submits work, answered with an address that is
   * none of libcuda's exported functions: its calls would go unseen. */
  if (cp_drv_work_base(base)) cp_order_give_up("a driver entry point at an unknown address");
  const char *variant = variant_by_rule(base, cuda_version, flags);
  if (!variant) return fn;
#define CP_BY_NAME(v) \
  if (strcmp(variant, #v) == 0 && cp_drv.v) return (void *)cp_w_##v;
  CP_DRV_SERVED(CP_BY_NAME)
#undef CP_BY_NAME
  return fn;
}

/* A lookup that found a name the build's headers do not know: a newer
 * entry point, which may submit work unseen. The first such name is kept
 * for the report (cp_order_give_up keeps the string, not a copy). */
static void unknown_name(const char *symbol) {
  static char first[64];
  static atomic_flag taken = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&taken)) {
    cp_order_give_up("a newer driver entry point");
    return;
  }
  size_t n = strlen(symbol);
  if (n >= sizeof first) {
    cp_order_give_up("a newer driver entry point");
    return;
  }
  memcpy(first, symbol, n + 1);
  cp_order_give_up(first);
}

static void looked_up(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags) {
  cp_entry_lookup(symbol, CP_DOOR_PROC_ADDRESS);
  if (!cp_drv_name_known(symbol)) unknown_name(symbol);
  *pfn = cp_drv_hook(*pfn, NULL, symbol, cuda_version, flags);
}

CUresult cp_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *symbolStatus) {
  CP_DRV_REAL(cuGetProcAddress_v2);
  if (!cp_drv.cuGetProcAddress_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = cp_drv.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn && *pfn && symbol) looked_up(symbol, pfn, cudaVersion, flags);
  return rc;
}

CUresult cp_w_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  CP_DRV_REAL(cuGetProcAddress);
  if (!cp_drv.cuGetProcAddress) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = cp_drv.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn && symbol) looked_up(symbol, pfn, cudaVersion, flags);
  return rc;
}

CP_DRV_EXPORT(cuGetProcAddress_v2)
CP_DRV_EXPORT(cuGetProcAddress)

/* ---- the exported dlsym ----------------------------------------------------------- */

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        ".cfi_startproc\n"
#ifdef __CET__
        "endbr64\n"
#endif
        "pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "subq $8, %rsp\n" /* the call below needs a 16-byte aligned stack */
        ".cfi_adjust_cfa_offset 8\n"
        "call cp_dlsym_route\n"
        "addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "jmp *%rax\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".p2align 2\n"
        "dlsym:\n"
        ".cfi_startproc\n"
#ifdef __ARM_FEATURE_BTI_DEFAULT
        "bti c\n"
#endif
        "stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 29, -32\n"
        ".cfi_offset 30, -24\n"
        "mov x29, sp\n"
        "stp x0, x1, [sp, #16]\n"
        "bl cp_dlsym_route\n"
        "mov x16, x0\n"
        "ldp x0, x1, [sp, #16]\n"
        "ldp x29, x30, [sp], #32\n"
        ".cfi_restore 29\n"
        ".cfi_restore 30\n"
        ".cfi_def_cfa_offset 0\n"
        "br x16\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
/* Elsewhere the driver is reached through -lcuda interposition only. */
#endif
