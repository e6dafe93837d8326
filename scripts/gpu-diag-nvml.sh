set -u; D=$OUT; NV=/usr/local/cuda/bin/nvcc
cat > /tmp/lag.cu <<'C'
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
int main(int c, char **v) { int n = atoi(v[1]), reps = atoi(v[2]); void *p[8];
  cudaFree(0); usleep(300000);
  for (int r = 0; r < reps; r++) { for (int i = 0; i < n; i++) cudaMalloc(&p[i], 256u << 20);
    for (int i = 0; i < n; i++) cudaFree(p[i]); }
  usleep(300000); printf("done\n"); }
C
$NV -o /tmp/lag /tmp/lag.cu
echo "one idle:"; python3 bench/gpu/nvml_peak.py -- /tmp/lag 0 0 | tail -1
echo "four idle:"; python3 bench/gpu/nvml_peak.py -- bash -c '/tmp/lag 0 0 & /tmp/lag 0 0 & /tmp/lag 0 0 & /tmp/lag 0 0 & wait' | tail -1
echo "one, 1 block churn x2000 (true peak 256 MiB + ctx):"; python3 bench/gpu/nvml_peak.py -- /tmp/lag 1 2000 | tail -1
echo "four, 1 block churn each x2000 (true sum <= 1 GiB + 4 ctx):"; python3 bench/gpu/nvml_peak.py -- bash -c '/tmp/lag 1 2000 & /tmp/lag 1 2000 & /tmp/lag 1 2000 & /tmp/lag 1 2000 & wait' | tail -1
