/* device.c: the fake devices: count, current device (per thread),
 * properties, attributes, versions, peer access, and cudaDeviceReset, which
 * drops every allocation, stream, event and capture of the current device
 * (later frees of its pointers fail with cudaErrorInvalidValue, as
 * natively) and the peer access it gave or had.
 * Peer access is bookkeeping only: the fake lets any stream touch any
 * device's memory, and its cudaFree waits for the freeing device's work
 * alone (clock.c), peers' included or not (what a real cudaFree does is
 * measured by tests/gpu/peer_race.cu).
 * Invariant: 0 <= current device < fc.ndev. */
#include "fake.h"

#include <stdio.h>
#include <string.h>

#define ENTER() fc_enter(__func__)
#define FC_VERSION 13000

cudaError_t cudaGetDeviceCount(int *count) {
  ENTER();
  if (!count) return fc_leave(cudaErrorInvalidValue);
  *count = fc.ndev;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaSetDevice(int dev) {
  ENTER();
  if (dev < 0 || dev >= fc.ndev) return fc_leave(cudaErrorInvalidDevice);
  fc_set_cur_device(dev);
  return fc_leave(cudaSuccess);
}

cudaError_t cudaGetDevice(int *dev) {
  ENTER();
  if (!dev) return fc_leave(cudaErrorInvalidValue);
  *dev = fc_cur_device();
  return fc_leave(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
  ENTER();
  if (!p) return fc_leave(cudaErrorInvalidValue);
  if (dev < 0 || dev >= fc.ndev) return fc_leave(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "cudapool fake device");
  p->totalGlobalMem = fc.capacity;
  p->sharedMemPerBlock = 48 << 10;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->totalConstMem = 64 << 10;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->pciBusID = dev + 1;
  /* The same UUID as the fake driver's cuDeviceGetUuid_v2 (tests/fakes/cuda/state.c). */
  memcpy(p->uuid.bytes, "cpfakedev", 9);
  p->uuid.bytes[15] = (char)(dev + 1);
  p->unifiedAddressing = 1;
  p->managedMemory = 1;
  p->concurrentManagedAccess = 1;
  p->memoryPoolsSupported = 1;
  p->l2CacheSize = 50 << 20;
  p->memoryBusWidth = 5120;
  p->streamPrioritiesSupported = 1;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev) {
  ENTER();
  if (!value) return fc_leave(cudaErrorInvalidValue);
  if (dev < 0 || dev >= fc.ndev) return fc_leave(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrManagedMemory: *value = 1; break;
    case cudaDevAttrConcurrentManagedAccess: *value = 1; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    case cudaDevAttrPciBusId: *value = dev + 1; break;
    default: return fc_leave(cudaErrorInvalidValue);
  }
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
  ENTER();
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDriverGetVersion(int *v) {
  ENTER();
  if (!v) return fc_leave(cudaErrorInvalidValue);
  *v = FC_VERSION;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  ENTER();
  if (!v) return fc_leave(cudaErrorInvalidValue);
  *v = FC_VERSION;
  return fc_leave(cudaSuccess);
}

/* peer_on[a][b]: device a may access device b's memory. Under fc.lock. */
static unsigned char peer_on[FC_MAX_DEVICES][FC_MAX_DEVICES];

cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer) {
  ENTER();
  if (!can) return fc_leave(cudaErrorInvalidValue);
  if (dev < 0 || dev >= fc.ndev || peer < 0 || peer >= fc.ndev) return fc_leave(cudaErrorInvalidDevice);
  *can = dev != peer;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  ENTER();
  int dev = fc_cur_device();
  if (peer < 0 || peer >= fc.ndev || peer == dev) return fc_leave(cudaErrorInvalidDevice);
  if (flags) return fc_leave(cudaErrorInvalidValue);
  if (peer_on[dev][peer]) return fc_leave(cudaErrorPeerAccessAlreadyEnabled);
  peer_on[dev][peer] = 1;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  ENTER();
  int dev = fc_cur_device();
  if (peer < 0 || peer >= fc.ndev || peer == dev) return fc_leave(cudaErrorInvalidDevice);
  if (!peer_on[dev][peer]) return fc_leave(cudaErrorPeerAccessNotEnabled);
  peer_on[dev][peer] = 0;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceReset(void) {
  ENTER();
  int dev = fc_cur_device();
  for (int i = 0; i < FC_MAX_DEVICES; i++) peer_on[dev][i] = peer_on[i][dev] = 0;
  fc_streams_drop_device(dev);
  fc_alloc_drop_device(dev);
  fc_clock_reset();
  return fc_leave(cudaSuccess);
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
  ENTER();
  if (!attr || !func) return fc_leave(cudaErrorInvalidValue);
  memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = 1024;
  attr->ptxVersion = attr->binaryVersion = 90;
  return fc_leave(cudaSuccess);
}
