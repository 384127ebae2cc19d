"""Host facts and the one object the TUI samples: ``SystemProbes.read() -> HostSnapshot``."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from typing import Protocol

from sparkctl.core.snapshots import GpuReport, HostSnapshot, Unavailable
from sparkctl.probes.meminfo import MEMINFO_PATH, PRESSURE_PATH, read_meminfo, read_pressure
from sparkctl.probes.nvml import NvmlProbe


class GpuProbe(Protocol):
    """What SystemProbes needs from a GPU probe (NvmlProbe, or a test double)."""

    def read(self, host_mem_total: int | None = None) -> GpuReport: ...

    def close(self) -> None: ...


def hostname() -> str:
    try:
        return socket.gethostname()
    except OSError:
        return ""


def cpu_count() -> int:
    return os.cpu_count() or 0


def cpu_percent() -> float | Unavailable:
    """System-wide CPU use since the previous call (non-blocking).

    psutil measures between calls, so the very first call has nothing to compare with
    and reads 0.0; SystemProbes primes it at construction.
    """
    try:
        import psutil
    except ImportError:
        return Unavailable("psutil not installed")
    try:
        return float(psutil.cpu_percent(interval=None))
    except Exception as exc:  # e.g. /proc/stat unreadable in a sandbox
        return Unavailable(f"psutil: {exc}")


def disk_free(path: str | os.PathLike[str]) -> int | Unavailable:
    """Free bytes on the filesystem holding ``path`` (for model stores, spools)."""
    try:
        return shutil.disk_usage(path).free
    except OSError as exc:
        return Unavailable(f"cannot stat {os.fspath(path)}: {exc.strerror or exc}")


class SystemProbes:
    """Samples host memory, PSI, GPUs and host facts in one blocking call.

    Constructor arguments let tests point the probes at fixture files and a fake GPU probe.
    """

    def __init__(
        self,
        *,
        meminfo_path: str = MEMINFO_PATH,
        pressure_path: str = PRESSURE_PATH,
        nvml: GpuProbe | None = None,
        cpu_percent_fn: Callable[[], float | Unavailable] | None = None,
    ) -> None:
        self._meminfo_path = meminfo_path
        self._pressure_path = pressure_path
        self._nvml: GpuProbe = nvml if nvml is not None else NvmlProbe()
        # The host's CPU use is shown nowhere (the dashboard, `status`, the fleet): not
        # sampled unless asked for (`cpu_percent_fn=cpu_percent`). Sampling it imported
        # psutil into every dashboard start (~10 ms of CPU before the first frame) and read
        # /proc/stat at every refresh.
        self._cpu_percent = cpu_percent_fn
        self._hostname = hostname()
        self._cpu_count = cpu_count()
        if cpu_percent_fn is not None:
            cpu_percent_fn()  # prime psutil's interval so the first real sample means something

    @property
    def gpu_probe(self) -> GpuProbe:
        return self._nvml

    def read(self) -> HostSnapshot:
        meminfo = read_meminfo(self._meminfo_path)
        host_total = None if isinstance(meminfo, Unavailable) else meminfo.total
        return HostSnapshot(
            meminfo=meminfo,
            pressure=read_pressure(self._pressure_path),
            gpu=self._nvml.read(host_mem_total=host_total),
            hostname=self._hostname,
            cpu_count=self._cpu_count,
            cpu_percent=self._cpu_percent() if self._cpu_percent is not None else Unavailable("not sampled"),
        )

    def close(self) -> None:
        self._nvml.close()
