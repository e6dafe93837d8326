/* drv_work.c: entry points that submit work (a launch, an asynchronous
 * memset and copy, and their per-thread twins), reached through every door
 * a program has to the driver: cuGetProcAddress_v2 (with and without the
 * per-thread flag, and the copy's 32-bit variant with CUDA 2.0's version),
 * dlsym by handle, and -lcuda linking. For each it prints
 * the symbol dladdr names (the same natively and under the shim: the
 * shim's wrapper is exported under the driver's name) and, in info lines,
 * whether the function lies in libcudapool. Then it calls them all and
 * prints their results, the contents they wrote, and how often the fake
 * driver's own function ran: identical natively and under the shim, since
 * a wrapper calls libcuda's function once with the program's arguments.
 * Lookups that fail come last; with the argument "future" it then looks up
 * and calls cuFutureLaunch, which no cuda.h declares.
 *
 * Usage: drv_work [future] */
#include <string.h>

#include "drvprogs.h"

typedef __typeof__(cuLaunchKernel) launch_fn;
typedef __typeof__(cuMemsetD8Async) memset_fn;
typedef __typeof__(cuMemcpyHtoDAsync_v2) copy_fn;

/* Where fn lies: the symbol (compared) and whether in cudapool (info). */
static void where(const char *tag, void *fn) {
  Dl_info info;
  const char *sym = "none";
  int in_pool = 0;
  if (fn && dladdr(fn, &info)) {
    sym = info.dli_sname ? info.dli_sname : "unnamed";
    in_pool = info.dli_fname && strstr(info.dli_fname, "libcudapool") != NULL;
  }
  printf("%s: symbol=%s\n", tag, sym);
  printf("info: %s in_cudapool=%d\n", tag, in_pool);
}

static void *proc(const char *base, cuuint64_t flags) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  if (D.getProc(base, &fn, 13000, flags, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) return NULL;
  return fn;
}

static char kernel_token;
#define KERNEL ((CUfunction)(void *)&kernel_token)

static int launch(launch_fn *fn, CUfunction f, CUstream s) {
  return fn ? (int)fn(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) : -1;
}

int main(int argc, char **argv) {
  drv_setup();
  const cuuint64_t legacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM, pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  launch_fn *p_launch = (launch_fn *)proc("cuLaunchKernel", legacy);
  memset_fn *p_memset = (memset_fn *)proc("cuMemsetD8Async", legacy);
  copy_fn *p_copy = (copy_fn *)proc("cuMemcpyHtoDAsync", legacy);
  launch_fn *pt_launch = (launch_fn *)proc("cuLaunchKernel", pt);
  memset_fn *pt_memset = (memset_fn *)proc("cuMemsetD8Async", pt);
  copy_fn *pt_copy = (copy_fn *)proc("cuMemcpyHtoDAsync", pt);
  /* CUDA 2.0's variant: 32-bit device pointers. */
  void *old_copy = NULL;
  D.getProc("cuMemcpyHtoDAsync", &old_copy, 2000, legacy, NULL);
  memset_fn *d_memset = (memset_fn *)dlsym(D.lib, "cuMemsetD8Async_ptsz");
  launch_fn *d_launch = (launch_fn *)dlsym(D.lib, "cuLaunchKernel");
  where("proc_launch", (void *)p_launch);
  where("proc_memset", (void *)p_memset);
  where("proc_copy", (void *)p_copy);
  where("proc_launch_pt", (void *)pt_launch);
  where("proc_memset_pt", (void *)pt_memset);
  where("proc_copy_pt", (void *)pt_copy);
  where("proc_copy_old", old_copy);
  where("dlsym_memset_pt", (void *)d_memset);
  where("dlsym_launch", (void *)d_launch);
  where("linked_memset", (void *)cuMemsetD8Async);
  where("linked_launch", (void *)cuLaunchKernel);

  enum { n = 4096 };
  CUdeviceptr p = 0;
  CUstream s = NULL;
  int setup = D.cuMemAlloc_v2(&p, n) | D.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  static unsigned char in[n], out[n], want[n];
  for (int i = 0; i < n; i++) in[i] = (unsigned char)(i * 7);
  int memset_rc = p_memset ? (int)p_memset(p, 1, n, s) : -1;
  int memset_pt_rc = pt_memset ? (int)pt_memset(p, 2, n / 2, NULL) : -1;
  int dlsym_rc = d_memset ? (int)d_memset(p + n / 2, 3, n / 4, s) : -1;
  int linked_memset_rc = (int)cuMemsetD8Async(p + 3 * n / 4, 4, n / 8, NULL);
  int copy_rc = p_copy ? (int)p_copy(p + 7 * n / 8, in, n / 16, NULL) : -1;
  int copy_pt_rc = pt_copy ? (int)pt_copy(p + 15 * n / 16, in, n / 16, s) : -1;
  memset(want, 2, n / 2);
  memset(want + n / 2, 3, n / 4);
  memset(want + 3 * n / 4, 4, n / 8);
  memcpy(want + 7 * n / 8, in, n / 16);
  memcpy(want + 15 * n / 16, in, n / 16);
  int launch_rc = launch(p_launch, KERNEL, s);
  int launch_pt_rc = launch(pt_launch, KERNEL, NULL);
  int dlsym_launch_rc = launch(d_launch, KERNEL, NULL);
  int linked_launch_rc = launch(cuLaunchKernel, KERNEL, s);
  int bad_stream = launch(p_launch, KERNEL, (CUstream)(uintptr_t)0x1000);
  int null_function = launch(pt_launch, NULL, s);
  int bad_copy = p_copy ? (int)p_copy(p, NULL, 16, s) : -1;
  __typeof__(cuMemcpyHtoDAsync) *v1 = (__typeof__(cuMemcpyHtoDAsync) *)old_copy;
  int old_copy_rc = v1 ? (int)v1(0x1000, in, 16, s) : -1;
  int sync = D.cuStreamSynchronize(s) | D.cuCtxSynchronize_v2(NULL);
  int read = D.cuMemcpyDtoH_v2(out, p, n);
  printf("calls: setup=%d memset=%d memset_pt=%d dlsym_memset=%d linked_memset=%d copy=%d copy_pt=%d sync=%d "
         "read=%d contents=%d\n",
         setup, memset_rc, memset_pt_rc, dlsym_rc, linked_memset_rc, copy_rc, copy_pt_rc, sync, read,
         memcmp(out, want, n) == 0);
  printf("launches: legacy_lookup=%d pt_lookup=%d dlsym=%d linked=%d bad_stream=%d null_function=%d "
         "bad_copy=%d old_copy=%d\n",
         launch_rc, launch_pt_rc, dlsym_launch_rc, linked_launch_rc, bad_stream, null_function, bad_copy,
         old_copy_rc);
  printf("counts: launch=%ld launch_ptsz=%ld memset=%ld memset_ptsz=%ld copy=%ld copy_ptsz=%ld copy_v1=%ld\n",
         fake_calls("cuLaunchKernel"), fake_calls("cuLaunchKernel_ptsz"), fake_calls("cuMemsetD8Async"),
         fake_calls("cuMemsetD8Async_ptsz"), fake_calls("cuMemcpyHtoDAsync_v2"),
         fake_calls("cuMemcpyHtoDAsync_v2_ptsz"), fake_calls("cuMemcpyHtoDAsync"));

  /* Lookups that find nothing: no entry point, or one newer than asked. */
  void *fn = (void *)&kernel_token;
  CUdriverProcAddressQueryResult st = 99;
  int rc = D.getProc("cuNoSuchLaunch", &fn, 13000, 0, &st);
  printf("missing: rc=%d null=%d status=%d\n", rc, fn == NULL, (int)st);
  rc = D.getProc("cuLaunchKernel", &fn, 2000, 0, &st);
  printf("too_old: rc=%d null=%d status=%d\n", rc, fn == NULL, (int)st);
  if (argc > 1 && strcmp(argv[1], "future") == 0) {
    CUresult (*future)(CUstream) = (CUresult(*)(CUstream))proc("cuFutureLaunch", 0);
    where("future_fn", (void *)future);
    printf("future: found=%d rc=%d\n", future != NULL, future ? (int)future(s) : -1);
  }
  D.cuStreamDestroy_v2(s);
  D.cuMemFree_v2(p);
  print_pool(0);
  return 0;
}
