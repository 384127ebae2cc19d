"""Where a resident model sits (GPU, CPU or split), as `ollama ps` computes it.

The engine's own claim is cross-checked against NVML's per-process memory where that
exists: Ollama has shown a CPU/GPU split while nothing sat on the GPU, so a disagreement
is reported rather than resolved silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sparkctl.core.snapshots import GIB, GpuProcess, ResidentModel

FOREVER_AFTER = timedelta(days=365 * 20)


@dataclass(frozen=True)
class Placement:
    label: str  # "100% GPU", "42%/58% CPU/GPU", "100% CPU" or "Unknown"
    gpu_fraction: float | None  # None when Unknown

    @property
    def full_gpu(self) -> bool:
        return self.gpu_fraction == 1.0

    @property
    def spilled(self) -> bool:
        return self.gpu_fraction is not None and self.gpu_fraction < 1.0


def placement(size: int, size_vram: int) -> Placement:
    """The PROCESSOR column of `ollama ps`, with the same rounding and edge cases."""
    if size_vram == 0:
        return Placement("100% CPU", 0.0)
    if size == 0 or size_vram > size:
        return Placement("Unknown", None)
    if size_vram == size:
        return Placement("100% GPU", 1.0)
    cpu = round((size - size_vram) / size * 100)
    return Placement(f"{cpu}%/{100 - cpu}% CPU/GPU", size_vram / size)


def spill_warning(lane: str, name: str, size: int, size_vram: int) -> str | None:
    """The warning for a lane model that is not all on the GPU, with its CPU share and what it
    costs; None when it is all on the GPU (or the engine's figures say nothing).

    Decode reads every weight once per token. The part of the model the engine left on the
    CPU is read by the CPU from host memory, at the CPU's memory bandwidth and with its far
    smaller compute, and each token waits for that part: the lane decodes at the speed of
    its CPU share, not of the GPU (on a Spark, where the memory is shared, the CPU still
    reaches only part of it)."""
    p = placement(size, size_vram)
    if not p.spilled:
        return None
    from sparkctl.core.fmt import gib

    where = "runs entirely on the CPU" if p.gpu_fraction == 0 else f"spilled to the CPU ({p.label})"
    return (f"lane {lane}: {name} {where}: {gib(size - size_vram)} of its {gib(size)} sit in host memory "
            "and are read by the CPU for every token, so its decode is bound by host memory bandwidth, "
            "not the GPU's; free memory (or lower its context) and load it again")


def spill_headline(lane: str, name: str, size: int, size_vram: int) -> str | None:
    """spill_warning in one line (the dashboard's; the whole warning is a key away)."""
    p = placement(size, size_vram)
    if not p.spilled:
        return None
    where = "all on the CPU" if p.gpu_fraction == 0 else f"{round((1 - p.gpu_fraction) * 100)}% on the CPU"
    return f"lane {lane}: {name} is {where}: decode bound by host memory"


def until_label(expires_at: datetime | None, now: datetime) -> str:
    """The UNTIL column: 'Forever' for negative keep-alive, 'Stopping...' once past."""
    if expires_at is None:
        return "n/a"
    left = expires_at - now
    if left > FOREVER_AFTER:
        return "Forever"
    if left.total_seconds() <= 0:
        return "Stopping..."
    return humanize_duration(left.total_seconds())


def humanize_duration(seconds: float) -> str:
    """Seconds under a minute, else whole minutes (rounded up, like `ollama ps`'s
    "4 minutes from now"): a label that changes once a minute, not every refresh."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    m = -(-s // 60)
    if m < 60:
        return f"{m} min"
    h, rem = divmod(m, 60)
    return f"{h} h {rem} min"


ENGINE_PROCESS_NAMES = ("ollama", "llama-server", "llama_server", "ollama_llama_server")


def engine_processes(processes: tuple[GpuProcess, ...]) -> list[GpuProcess]:
    """GPU processes that belong to the engine (Ollama's runner or llama.cpp's server)."""
    return [p for p in processes if any(n in p.name.lower() for n in ENGINE_PROCESS_NAMES)]


@dataclass(frozen=True)
class GpuAttribution:
    """Engine GPU memory: what the engine claims vs what NVML sees for its processes."""

    claimed_vram: int
    nvml_bytes: int | None  # None: NVML could not attribute (no processes visible)
    mismatch: str | None  # a one-line warning when the two disagree


def attribute_gpu_memory(
    resident: tuple[ResidentModel, ...] | list[ResidentModel],
    processes: tuple[GpuProcess, ...] | None,
    tolerance: float = 0.25,
) -> GpuAttribution:
    claimed = sum(m.size_vram for m in resident)
    if processes is None:
        return GpuAttribution(claimed, None, None)
    mine = engine_processes(processes)
    known = [p.used_bytes for p in mine if p.used_bytes is not None]
    if not mine or not known:
        if claimed > 0 and processes is not None and not mine:
            return GpuAttribution(
                claimed,
                None,
                f"engine reports {claimed / GIB:.1f} GiB on GPU but NVML lists no engine process"
                " (other PID namespace, or not on the GPU)",
            )
        return GpuAttribution(claimed, None, None)
    seen = sum(known)
    mismatch = None
    if claimed > 0 and seen < claimed * (1 - tolerance):
        mismatch = (
            f"engine reports {claimed / GIB:.1f} GiB on GPU but NVML attributes"
            f" {seen / GIB:.1f} GiB to its processes"
        )
    return GpuAttribution(claimed, seen, mismatch)
