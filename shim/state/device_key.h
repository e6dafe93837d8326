/* device_key.h: the name of a GPU that every process gives it alike (issue
 * 26): "uuid-" and the 32 hex digits of its UUID where CUDA gives one (the
 * same whatever CUDA_VISIBLE_DEVICES makes its number), else "dev" and the
 * process's device number. It names the budget file of
 * CUDAPOOL_SHARED_LIMIT (shared_limit.c) and the device a give-back
 * request is for (coop.c, live.c).
 *
 * Asks CUDA (cudaGetDeviceProperties / cuDeviceGetUuid_v2): call it where a
 * pool is made, not on a hot path. Never fails; key is NUL-terminated. */
#ifndef CUDAPOOL_SHIM_DEVICE_KEY_H
#define CUDAPOOL_SHIM_DEVICE_KEY_H

#include <stddef.h>

#define CP_DEVICE_KEY_MAX 48 /* "uuid-" + 32 hex digits, NUL-terminated */

void cp_device_key(int device, char *key, size_t n);

#endif
