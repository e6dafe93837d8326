/* hooks.c: the test hooks of the fake runtime, exported (under the same
 * version node as everything else) for tests to reach by linking or with
 * dlsym(RTLD_DEFAULT, ...). Declared in fakecuda.h. None of them is counted
 * by fakecuda_calls, and none changes the calling thread's last error. */
#include "fake.h"
#include "fakecuda.h"

long fakecuda_calls(const char *fn) {
  if (!fn) return 0;
  fc_lock_only();
  long n = fc_count_of(fn);
  fc_unlock_only();
  return n;
}

void fakecuda_fail_malloc_after(long n) {
  fc_lock_only();
  fc.fail_after = n < 0 ? -1 : n;
  fc_unlock_only();
}

void fakecuda_hold_events(int on) {
  fc_lock_only();
  if (on && !fc.hold) {
    fc_clock_reset();
    fc.hold = 1;
  } else if (!on && fc.hold) {
    fc.hold = 0;
    fc_clock_reset();
  }
  fc_unlock_only();
}

size_t fakecuda_live_bytes(int device) {
  fc_lock_only();
  size_t n = device >= 0 && device < fc.ndev ? fc.used[device] : 0;
  fc_unlock_only();
  return n;
}

void *fakecuda_raw_malloc(size_t size) {
  void *p = NULL;
  fc_lock_only();
  if (size && fc_alloc_new(size, FC_DEVICE, fc_cur_device(), &p) != cudaSuccess) p = NULL;
  fc_unlock_only();
  return p;
}

long fakecuda_races(void) {
  fc_lock_only();
  long n = fc.races;
  fc_unlock_only();
  return n;
}

cudaError_t fakecuda_stream_create_on(int dev, cudaStream_t *out, unsigned flags) {
  fc_lock_only();
  cudaError_t err = fc_stream_create_on(dev, out, flags);
  fc_unlock_only();
  return err;
}

int fakecuda_stream_device(cudaStream_t stream) {
  fc_lock_only();
  int dev = fc_stream_device(stream);
  fc_unlock_only();
  return dev;
}

cudaError_t fakecuda_stream_wait_event(cudaStream_t stream, cudaEvent_t event, unsigned flags, int ptsz) {
  fc_lock_only();
  cudaError_t err = fc_stream_wait_event(stream, event, flags, ptsz);
  fc_unlock_only();
  return err;
}
