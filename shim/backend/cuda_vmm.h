/* cuda_vmm.h: the page entries of the CUDA backend (cuda_vmm.c), for the
 * core's expandable segments (backend.h says what each must do). ctx is the
 * backend's cp_device_t; every call is the driver's, in the device's primary
 * context. */
#ifndef CUDAPOOL_SHIM_CUDA_VMM_H
#define CUDAPOOL_SHIM_CUDA_VMM_H

#include <stddef.h>
#include <stdint.h>

/* CUDAPOOL_EXPANDABLE_PAGE, given once by the options' loader
 * (state/init.c) before any pool is made: pages are the granularity doubled
 * up to it. */
void cp_vmm_set_page_option(size_t bytes);
size_t cp_vmm_page_size(void *ctx, int device);
int cp_vmm_reserve(void *ctx, int device, size_t size, uintptr_t *out);
void cp_vmm_unreserve(void *ctx, int device, uintptr_t addr, size_t size);
int cp_vmm_map(void *ctx, int device, uintptr_t addr, size_t size);
/* The bytes unmapped (a page the driver refused to unmap stays mapped). */
size_t cp_vmm_unmap(void *ctx, int device, uintptr_t addr, size_t size);

#endif
