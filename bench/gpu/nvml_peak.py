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

import ctypes
import subprocess
import sys
import threading


class _Process(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


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
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        handle = ctypes.c_void_p()
        if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
            raise OSError("NVML did not start")
    except OSError as e:
        print(f"nvml_peak: {e}", file=sys.stderr)
        return 2

    def used():
        m = _Memory()
        return m.used if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(m)) == 0 else None

    pids = {}

    def sample_pids():
        n = ctypes.c_uint(64)
        procs = (_Process * 64)()
        if nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(n), procs) != 0:
            return
        for p in procs[: n.value]:
            if p.used < (1 << 62):
                pids[p.pid] = max(pids.get(p.pid, 0), p.used)

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
