#!/usr/bin/env python3
"""exit_share.py: when an exiting cudapool process's share leaves the
CUDAPOOL_SHARED_LIMIT budget, against when its memory leaves the device
(issue 26: four processes exiting one by one went over the shared limit
although the budget file's total never did).

Starts `HOLD hold 4096 R W keep` (tests/programs/runtime/shared.c) under the
shim (SHIM) with CUDAPOOL_SHARED_LIMIT=64G and a group of its own; once it
holds its 4 GiB, closes R (it returns from main) and polls every half
millisecond, for at most 3 s: the group's budget total (the file in
/dev/shm, at offsetof(cp_budget_file_t, total), found by compiling
common/budget_layout.h with cc), the device's used memory (NVML) and
whether the process is reaped, and whether NVML still lists its pid.
Prints per run "exit_share: run=I held_mib=M total_zero_ms=A freed_ms=B
reaped_ms=C unlisted_ms=D" (ms after the end was asked; -1: not seen) and
last "exit_share: worst share_before_memory_ms=X
unlisted_before_memory_ms=Y": how long the share had left the budget, and
how long NVML had stopped listing the pid, while the memory was still on
the device (0 when never: the shim's rule, a dead process's share waits
until NVML no longer lists it, is then safe). Exits 2 without NVML, cc or
the budget file.

  exit_share.py HOLD SHIM [RUNS]
"""

import glob
import os
import struct
import subprocess
import sys
import tempfile
import time

from nvml_device import Device0


def total_offset():
    src = '#include <stdio.h>\n#include <stddef.h>\n#include "budget_layout.h"\n' \
          'int main(void) { printf("%zu\\n", offsetof(cp_budget_file_t, total)); return 0; }\n'
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "o.c"), "w") as f:
            f.write(src)
        exe = os.path.join(d, "o")
        common = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common")
        subprocess.run([os.environ.get("CC", "cc"), "-I" + common, os.path.join(d, "o.c"), "-o", exe], check=True)
        return int(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    hold, shim = argv[0], argv[1]
    runs = int(argv[2]) if len(argv) > 2 else 3
    try:
        offset = total_offset()
        gpu = Device0()
        used = gpu.used
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"exit_share: {e}", file=sys.stderr)
        return 2

    worst = unlisted_worst = 0.0
    for run in range(1, runs + 1):
        group = f"exit-share-{os.getpid()}-{run}"
        base = used() or 0
        r, w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ, LD_PRELOAD=shim, CUDAPOOL_SHARED_LIMIT="64G", CUDAPOOL_SHARED_NAME=group)
        child = subprocess.Popen([hold, "hold", "4096", str(r), str(up_w), "keep"], pass_fds=(r, up_w), env=env)
        os.close(r)
        os.close(up_w)
        got = os.read(up_r, 1)
        os.close(up_r)
        files = glob.glob(f"/dev/shm/cudapool-budget.*{group}*")
        if got != b"x" or not files:
            print(f"exit_share: run={run} error=no allocation or no budget file", flush=True)
            os.close(w)
            child.wait()
            return 2
        budget = open(files[0], "rb")

        def total():
            budget.seek(offset)
            return struct.unpack("<Q", budget.read(8))[0]

        held = (used() or base) - base
        start = time.monotonic()
        os.close(w)
        seen = {}
        while time.monotonic() - start < 3 and len(seen) < 4:
            now = (time.monotonic() - start) * 1000
            if "total_zero" not in seen and total() == 0:
                seen["total_zero"] = now
            u = used()
            if "freed" not in seen and u is not None and u - base <= held / 10:
                seen["freed"] = now
            if "unlisted" not in seen:
                procs = gpu.processes()
                if procs is not None and child.pid not in [p for p, _ in procs]:
                    seen["unlisted"] = (time.monotonic() - start) * 1000
            if "reaped" not in seen and child.poll() is not None:
                seen["reaped"] = now
            time.sleep(0.0005)
        if child.poll() is None:
            child.kill()
            child.wait()
        budget.close()
        for f in files:
            try:
                os.unlink(f)
            except OSError:
                pass

        def ms(k):
            return f"{seen[k]:.1f}" if k in seen else "-1"

        print(f"exit_share: run={run} held_mib={held >> 20} total_zero_ms={ms('total_zero')} freed_ms={ms('freed')} "
              f"reaped_ms={ms('reaped')} unlisted_ms={ms('unlisted')}", flush=True)
        if "total_zero" in seen:
            worst = max(worst, seen.get("freed", 3000.0) - seen["total_zero"])
        if "unlisted" in seen:
            unlisted_worst = max(unlisted_worst, seen.get("freed", 3000.0) - seen["unlisted"])
    print(f"exit_share: worst share_before_memory_ms={worst:.1f} unlisted_before_memory_ms={unlisted_worst:.1f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
