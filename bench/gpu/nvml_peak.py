#!/usr/bin/env python3
"""nvml_peak.py: runs a command and samples the device's used memory through
NVML (libnvidia-ml.so.1 by ctypes, no package needed) every 20 ms while it
runs, as nvidia-smi would show it; prints one line last,
"nvml: peak_bytes=P base_bytes=B samples=N", where P is the most used above
what was used before the command started (every process the command starts
counts: run it alone on the device). Exits with the command's status, or 2
when NVML cannot be had.

With --per-pid it also prints, for every process seen on the device while
the command ran, "nvml: pid=PID peak_bytes=P" (its own used memory's peak,
context included, from nvmlDeviceGetComputeRunningProcesses).

  nvml_peak.py [--period-ms 20] [--per-pid] -- COMMAND [ARGS...]
"""

import subprocess
import sys
import threading

from nvml_device import Device0


def main(argv):
    period = 0.02
    per_pid = False
    while argv[:1] in (["--period-ms"], ["--per-pid"]):
        if argv[0] == "--per-pid":
            per_pid, argv = True, argv[1:]
        else:
            period, argv = float(argv[1]) / 1000, argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        gpu = Device0()
    except OSError as e:
        print(f"nvml_peak: {e}", file=sys.stderr)
        return 2
    used = gpu.used
    pids = {}

    def sample_pids():
        for pid, held in gpu.processes(64) or []:
            if held < (1 << 62):
                pids[pid] = max(pids.get(pid, 0), held)

    base = used() or 0
    peak = [0, 0]
    done = threading.Event()

    def sample():
        while not done.wait(period):
            u = used()
            if u is not None:
                peak[0] = max(peak[0], u - base)
                peak[1] += 1
            if per_pid:
                sample_pids()

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    rc = subprocess.call(argv[1:])
    done.set()
    t.join()
    for pid in sorted(pids):
        print(f"nvml: pid={pid} peak_bytes={pids[pid]}", flush=True)
    print(f"nvml: peak_bytes={peak[0]} base_bytes={base} samples={peak[1]}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
