"""nvml_device.py: GPU 0 through NVML (libnvidia-ml.so.1 by ctypes), what the
bench/gpu scripts read of it: the device's used memory and the processes
holding memory on it. Device0() raises OSError when NVML cannot be had."""

import ctypes


class _Process(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Device0:
    def __init__(self):
        self._nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self._handle = ctypes.c_void_p()
        if self._nvml.nvmlInit_v2() != 0 or self._nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self._handle)) != 0:
            raise OSError("NVML did not start")

    def used(self):
        """Bytes used on the device, None when NVML fails."""
        m = _Memory()
        return m.used if self._nvml.nvmlDeviceGetMemoryInfo(self._handle, ctypes.byref(m)) == 0 else None

    def processes(self, most=256):
        """[(pid, bytes)] of the compute processes on the device (bytes may be
        NVML's "not available" value), None when NVML fails."""
        n = ctypes.c_uint(most)
        procs = (_Process * most)()
        if self._nvml.nvmlDeviceGetComputeRunningProcesses_v3(self._handle, ctypes.byref(n), procs) != 0:
            return None
        return [(p.pid, p.used) for p in procs[: n.value]]
