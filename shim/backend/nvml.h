/* nvml.h: which processes NVIDIA's driver still counts on a GPU, through
 * NVML (libnvidia-ml.so.1), for the shared limit's dead shares (issue 26;
 * state/shared_limit.c, docs/DESIGN.md "A limit shared by processes").
 *
 * Owns finding NVML at run time (dlopen by its SONAME, never linked: a
 * machine without a driver has none, and the shim must load there) and one
 * question to it. The library is loaded and initialised once, on the first
 * question, under this module's own lock (no lock the allocation path
 * takes); a failure there is final for the process. Only the process that
 * needs room asks (serve.c's refused allocation), never a hot path.
 * Nothing here prints. */
#ifndef CUDAPOOL_SHIM_BACKEND_NVML_H
#define CUDAPOOL_SHIM_BACKEND_NVML_H

#include <stddef.h>
#include <stdint.h>

#define CP_NVML_MAX_PIDS 1024 /* processes read per question; more are not looked at */

/* The pids of the compute processes NVML lists on the GPU of device key
 * `key` ("uuid-" and 32 hex digits, device_key.h), at most cap into pids:
 * how many (0..cap), or -1 when NVML cannot answer (no library, no such
 * function, a failed init, a key without a UUID, a GPU it does not know,
 * or a failed or inconsistent answer). */
int cp_nvml_pids(const char *key, uint32_t *pids, size_t cap);

#endif
