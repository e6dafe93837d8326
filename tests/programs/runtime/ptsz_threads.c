/* ptsz_threads.c: ptds_threads.c built with CUDA_API_PER_THREAD_DEFAULT_STREAM
 * (mk/fakecudart.mk): stream 0 is the per-thread stream, and the program calls
 * the _ptsz entry points (cudaMemsetAsync_ptsz, cudaLaunchKernel_ptsz, ...). */
#define PT_STREAM 0
#define PROG "ptsz_threads"
#include "ptds_threads.c"
