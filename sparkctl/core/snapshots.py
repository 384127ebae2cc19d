"""Plain data that probes and engines produce and core logic consumes.

Kept free of I/O so that core math can be tested with hand-built values; the probes
fill these from /proc and NVML, the engine adapters from HTTP responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime

from sparkctl.core.termtext import safe_line

GIB = 1024**3


@dataclass(frozen=True)
class Unavailable:
    """A reading that could not be taken, and why (shown as "n/a (reason)")."""

    reason: str

    def __str__(self) -> str:
        return f"n/a ({self.reason})"


@dataclass(frozen=True)
class MemInfo:
    """Host memory in bytes, as /proc/meminfo reports it."""

    total: int
    available: int
    free: int
    cached: int  # page cache (Cached), excluding shared memory where known
    buffers: int
    shmem: int = 0
    sreclaimable: int = 0
    swap_total: int = 0
    swap_free: int = 0
    hugepages_total: int = 0
    hugepages_free: int = 0
    hugepage_size: int = 0

    @property
    def reclaimable(self) -> int:
        """Page cache the kernel could drop: Cached + Buffers + SReclaimable - Shmem."""
        return max(0, self.cached + self.buffers + self.sreclaimable - self.shmem)

    @property
    def gpu_allocatable(self) -> int:
        """What a unified-memory GPU can still allocate (NVIDIA's rule for iGPU platforms)."""
        if self.hugepages_total > 0:
            return self.hugepages_free * self.hugepage_size
        return self.available + self.swap_free


@dataclass(frozen=True)
class Pressure:
    """Memory pressure stall information (PSI), percentages over 10 s / 60 s / 300 s."""

    some_avg10: float
    some_avg60: float
    some_avg300: float
    full_avg10: float
    full_avg60: float
    full_avg300: float


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None  # None when NVML cannot say (e.g. other PID namespace)
    name: str = ""


@dataclass(frozen=True)
class GpuMemory:
    """Discrete VRAM as NVML reports it."""

    total: int
    used: int
    free: int


@dataclass(frozen=True)
class GpuSnapshot:
    """One GPU's state. Any field may be Unavailable with a reason."""

    index: int
    name: str | Unavailable
    uuid: str | Unavailable
    driver: str | Unavailable
    utilization_pct: float | Unavailable
    temperature_c: float | Unavailable
    power_w: float | Unavailable
    power_limit_w: float | Unavailable
    sm_clock_mhz: float | Unavailable
    sm_clock_max_mhz: float | Unavailable
    throttle_reasons: tuple[str, ...] | Unavailable
    # None when the GPU shares host memory (GB10): the budget then comes from MemInfo.
    memory: GpuMemory | Unavailable | None
    unified_memory: bool
    processes: tuple[GpuProcess, ...] | Unavailable = ()


@dataclass(frozen=True)
class GpuReport:
    """All GPUs, or the reason there are none to read."""

    gpus: tuple[GpuSnapshot, ...] = ()
    unavailable: Unavailable | None = None
    driver: str | Unavailable | None = None
    cuda_driver_version: str | Unavailable | None = None


@dataclass(frozen=True)
class HostSnapshot:
    """One sample of this machine, taken by the probes in a worker thread."""

    meminfo: MemInfo | Unavailable
    pressure: Pressure | Unavailable
    gpu: GpuReport
    hostname: str = ""
    cpu_count: int = 0
    cpu_percent: float | Unavailable = field(default_factory=lambda: Unavailable("not sampled"))


def _safe_strings(obj: object, *names: str) -> None:
    """Names, versions and errors an engine (or a fleet host) sent: shown on terminals and
    in the TUI, so they lose escape sequences here, where they enter (core/termtext.py)."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, str):
            clean = safe_line(value)
            if clean != value:
                object.__setattr__(obj, name, clean)


@dataclass(frozen=True)
class ModelDetails:
    family: str = ""
    parameter_size: str = ""
    quantization_level: str = ""
    format: str = ""
    parent_model: str = ""
    families: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _safe_strings(self, *(f.name for f in fields(self) if f.name != "families"))
        if any(isinstance(f, str) and safe_line(f) != f for f in self.families):
            object.__setattr__(self, "families", tuple(safe_line(f) for f in self.families))


@dataclass(frozen=True)
class ResidentModel:
    """A model loaded in the engine (one entry of Ollama's /api/ps)."""

    name: str
    size: int  # bytes resident in total
    size_vram: int  # bytes of it on the GPU
    digest: str = ""
    expires_at: datetime | None = None
    context_length: int | None = None
    details: ModelDetails = ModelDetails()

    def __post_init__(self) -> None:
        _safe_strings(self, "name", "digest")


@dataclass(frozen=True)
class LocalModel:
    """A model stored by the engine (one entry of Ollama's /api/tags)."""

    name: str
    size: int
    digest: str = ""
    modified_at: datetime | None = None
    details: ModelDetails = ModelDetails()
    capabilities: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _safe_strings(self, "name", "digest")


@dataclass(frozen=True)
class EngineStatus:
    """Whether the engine answered, and what it said about itself."""

    kind: str
    host: str
    reachable: bool
    version: str | None = None
    error: str | None = None
    resident: tuple[ResidentModel, ...] = ()

    def __post_init__(self) -> None:
        _safe_strings(self, "version", "error")
