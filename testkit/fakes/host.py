"""FAKE host probes: canned HostSnapshots for machines this CI box is not (a GB10 Spark,
an H200 server). The real probes are tested in tests/unit against a faked pynvml; these
doubles stand in for them in TUI and CLI tests where the machine itself is the variable.
Numbers follow reference/SPARK.md: MemTotal ~121 GiB, NVML memory NOT_SUPPORTED on GB10.
"""

from __future__ import annotations

import threading

from sparkctl.core.snapshots import (
    GIB,
    GpuMemory,
    GpuProcess,
    GpuReport,
    GpuSnapshot,
    HostSnapshot,
    MemInfo,
    Pressure,
    Unavailable,
)

NOT_SUPPORTED = Unavailable("Not Supported")


def spark_meminfo(available_gib: float = 61.0, cached_gib: float = 27.0) -> MemInfo:
    total = int(121 * GIB)
    available = int(available_gib * GIB)
    return MemInfo(
        total=total,
        available=available,
        free=available - int(min(cached_gib, available_gib - 1) * GIB),
        cached=int(cached_gib * GIB),
        buffers=int(0.5 * GIB),
        shmem=int(0.5 * GIB),
        sreclaimable=int(0.4 * GIB),
        swap_total=0,
        swap_free=0,
    )


def gb10(util: float = 35.0, throttle: tuple[str, ...] = (), runner_gib: float = 40.0) -> GpuSnapshot:
    return GpuSnapshot(
        index=0,
        name="NVIDIA GB10",
        uuid="GPU-5b0e5f1c-0000-0000-0000-000000000000",
        driver="580.95.05",
        utilization_pct=util,
        temperature_c=41.0,
        power_w=38.5,
        power_limit_w=NOT_SUPPORTED,
        sm_clock_mhz=2405.0,
        sm_clock_max_mhz=3003.0,
        throttle_reasons=throttle,
        memory=None,
        unified_memory=True,
        processes=(GpuProcess(4242, int(runner_gib * GIB), "ollama"),),
    )


def spark_snapshot(available_gib: float = 61.0, **gpu_kw) -> HostSnapshot:
    return HostSnapshot(
        meminfo=spark_meminfo(available_gib),
        pressure=Pressure(0.0, 0.12, 0.05, 0.0, 0.0, 0.0),
        gpu=GpuReport(gpus=(gb10(**gpu_kw),), driver="580.95.05"),
        hostname="spark-01",
        cpu_count=20,
    )


def h200_snapshot() -> HostSnapshot:
    gpu = GpuSnapshot(
        index=0,
        name="NVIDIA H200",
        uuid="GPU-00000000-0000-0000-0000-0000000000h2",
        driver="580.159.04",
        utilization_pct=12.0,
        temperature_c=33.0,
        power_w=118.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        throttle_reasons=(),
        memory=GpuMemory(total=int(141 * GIB), used=int(40 * GIB), free=int(101 * GIB)),
        unified_memory=False,
        processes=(GpuProcess(777, int(34 * GIB), "ollama"),),
    )
    mem = MemInfo(total=int(2000 * GIB), available=int(1800 * GIB), free=int(1500 * GIB),
                  cached=int(280 * GIB), buffers=int(2 * GIB))
    return HostSnapshot(meminfo=mem, pressure=Pressure(0, 0, 0, 0, 0, 0),
                        gpu=GpuReport(gpus=(gpu,), driver="580.159.04"), hostname="h200-box", cpu_count=64)


def no_gpu_snapshot() -> HostSnapshot:
    mem = MemInfo(total=int(23 * GIB), available=int(20 * GIB), free=int(15 * GIB),
                  cached=int(4 * GIB), buffers=int(0.2 * GIB))
    return HostSnapshot(
        meminfo=mem,
        pressure=Unavailable("kernel has no PSI"),
        gpu=GpuReport(unavailable=Unavailable("NVML Shared Library Not Found")),
        hostname="ci-box",
        cpu_count=2,
    )


class FakeProbes:
    """Returns `snapshot` from read(); tests swap it to simulate change. Counts reads and
    records which thread read, so a test can prove the UI thread never does."""

    def __init__(self, snapshot: HostSnapshot | None = None) -> None:
        self.snapshot = snapshot or spark_snapshot()
        self.reads = 0
        self.threads: set[str] = set()

    def read(self) -> HostSnapshot:
        self.reads += 1
        self.threads.add(threading.current_thread().name)
        return self.snapshot
