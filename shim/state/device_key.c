/* device_key.c: a GPU's name shared by every process (see device_key.h). */
#include "state/device_key.h"

#include <stdio.h>

#include "state/shim.h"

void cp_device_key(int device, char *key, size_t n) {
  const cp_api_t *api = cp_api();
  unsigned char u[16];
  if (!api || api->device_uuid(device, u) != 0) {
    snprintf(key, n, "dev%d", device);
    return;
  }
  int at = snprintf(key, n, "uuid-");
  for (int i = 0; i < 16 && at > 0 && (size_t)at < n; i++) at += snprintf(key + at, n - (size_t)at, "%02x", u[i]);
}
