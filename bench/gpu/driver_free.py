#!/usr/bin/env python3
"""driver_free.py: how long the driver takes to free a dead process's device
memory (issue 26: CUDAPOOL_SHARED_LIMIT keeps a dead process's share until
NVML no longer lists it, or CUDAPOOL_SHARED_GRACE without NVML).

Starts `HOLD hold MIB R W keep` (tests/programs/runtime/shared.c: allocates
MIB MiB, writes a byte to W, waits until R closes), natively, on device 0;
once it holds its memory, ends it (HOW exit: R closed, it returns from main;
HOW kill: SIGKILL), and polls every millisecond, for at most 10 s: whether
the process is reaped (waitpid), whether NVML still lists its pid
(nvmlDeviceGetComputeRunningProcesses_v3) and the device's used memory
(nvmlDeviceGetMemoryInfo; freed: back within a tenth of what the process
held above the memory used before it started). Prints per run
"free: how=HOW run=I held_mib=M reaped_ms=A unlisted_ms=B freed_ms=C"
(milliseconds after the end was asked; -1: not within 10 s), then
"free: worst unlisted_after_reap_ms=X freed_after_reap_ms=Y" over the runs.
Exits 2 when NVML cannot be had.

  driver_free.py HOLD MIB [RUNS]
"""

import os
import signal
import subprocess
import sys
import time

from nvml_device import Device0


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    hold, mib = argv[0], int(argv[1])
    runs = int(argv[2]) if len(argv) > 2 else 3
    try:
        gpu = Device0()
    except OSError as e:
        print(f"driver_free: {e}", file=sys.stderr)
        return 2
    used = gpu.used

    def listed(pid):
        procs = gpu.processes()
        return None if procs is None else any(p == pid for p, _ in procs)

    worst = [0.0, 0.0]
    for how in ("exit", "kill"):
        for run in range(1, runs + 1):
            base = used() or 0
            r, w = os.pipe()
            up_r, up_w = os.pipe()
            child = subprocess.Popen([hold, "hold", str(mib), str(r), str(up_w), "keep"], pass_fds=(r, up_w))
            os.close(r)
            os.close(up_w)
            got = os.read(up_r, 1)
            os.close(up_r)
            if got != b"x":
                print(f"free: how={how} run={run} error=the child did not allocate", flush=True)
                os.close(w)
                child.wait()
                continue
            held = (used() or base) - base
            start = time.monotonic()
            if how == "exit":
                os.close(w)
            else:
                child.send_signal(signal.SIGKILL)
                os.close(w)
            reaped = unlisted = freed = None
            while time.monotonic() - start < 10 and (reaped is None or unlisted is None or freed is None):
                now = (time.monotonic() - start) * 1000
                if reaped is None and child.poll() is not None:
                    reaped = now
                if unlisted is None and listed(child.pid) is False:
                    unlisted = now
                u = used()
                if freed is None and u is not None and u - base <= held / 10:
                    freed = now
                time.sleep(0.001)
            if child.poll() is None:
                child.kill()
                child.wait()

            def ms(v):
                return "-1" if v is None else f"{v:.1f}"

            print(f"free: how={how} run={run} held_mib={held >> 20} reaped_ms={ms(reaped)} unlisted_ms={ms(unlisted)} "
                  f"freed_ms={ms(freed)}", flush=True)
            if reaped is not None:
                worst[0] = max(worst[0], (unlisted if unlisted is not None else 10000) - reaped)
                worst[1] = max(worst[1], (freed if freed is not None else 10000) - reaped)
    print(f"free: worst unlisted_after_reap_ms={worst[0]:.1f} freed_after_reap_ms={worst[1]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
