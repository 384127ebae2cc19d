"""The memory budget: resident models + other use + reclaimable cache + headroom.

On a unified-memory box (GB10) the pool is host RAM from /proc/meminfo: NVML's memory
calls fail there. On a discrete GPU the pool is VRAM from NVML and host RAM is shown
beside it. Without a GPU the models live in host RAM, so the host pool is the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sparkctl.core.fmt import size, sizes_apart
from sparkctl.core.snapshots import GIB, GpuMemory, GpuReport, GpuSnapshot, MemInfo, ResidentModel


class Pool(str, Enum):
    UNIFIED = "unified"  # GPU and CPU share host memory (GB10)
    VRAM = "vram"  # discrete GPU memory
    HOST = "host"  # no usable GPU: host RAM


class Level(str, Enum):
    OK = "ok"
    WARN = "warn"  # available below the warning line
    CRITICAL = "critical"  # available at or below the reserve


@dataclass(frozen=True)
class Segment:
    kind: str  # "model", "other", "cache", "free"
    label: str
    bytes: int
    lane: str | None = None  # for models: production, fast, contender, other


@dataclass(frozen=True)
class MemoryBudget:
    pool: Pool
    total: int
    available: int
    reserve: int
    warn_line: int
    segments: tuple[Segment, ...]
    notes: tuple[str, ...] = ()

    @property
    def headroom(self) -> int:
        """What can still be planned before touching the reserve (negative: already below)."""
        return self.available - self.reserve

    @property
    def models_bytes(self) -> int:
        return sum(s.bytes for s in self.segments if s.kind == "model")

    @property
    def level(self) -> Level:
        if self.available <= self.reserve:
            return Level.CRITICAL
        if self.available < self.warn_line:
            return Level.WARN
        return Level.OK

    def segment(self, kind: str) -> int:
        return sum(s.bytes for s in self.segments if s.kind == kind)


def choose_pool(gpu: GpuReport) -> tuple[Pool, GpuSnapshot | None]:
    """Which memory the models live in, and the GPU that decided it."""
    for g in gpu.gpus:
        if g.unified_memory:
            return Pool.UNIFIED, g
    for g in gpu.gpus:
        if isinstance(g.memory, GpuMemory) and g.memory.total > 0:
            return Pool.VRAM, g
    return Pool.HOST, None


def model_segments(
    resident: tuple[ResidentModel, ...] | list[ResidentModel],
    lane_of,
    bytes_of,
) -> list[Segment]:
    segs = []
    for m in resident:
        lane = lane_of(m.name) or "other"
        segs.append(Segment("model", m.name, bytes_of(m), lane))
    return segs


def _overclaim(claimed: int, used: int, what: str, verb: str, tail: str) -> str:
    """ "models claim 1.52 GiB but only 1.48 GiB of memory is in use (41.0 MiB more)": enough
    decimals that the two numbers differ, and the gap itself, however small."""
    c, u = sizes_apart(claimed, used)
    what = f" {what}" if what else ""
    return f"models claim {c}{what} but {verb} {u} {tail} ({size(claimed - used)} more)"


def build_budget(
    meminfo: MemInfo,
    gpu: GpuReport,
    resident: tuple[ResidentModel, ...] | list[ResidentModel],
    lane_of,
    reserve_gib: float,
    warn_gib: float,
) -> MemoryBudget:
    """Split the pool the models live in into segments that add up to its total."""
    pool, dev = choose_pool(gpu)
    reserve = int(reserve_gib * GIB)
    warn = int(warn_gib * GIB)
    notes: list[str] = []

    if pool is Pool.VRAM and dev is not None:
        vram = dev.memory
        total, available = vram.total, vram.free
        models = model_segments(resident, lane_of, lambda m: m.size_vram)
        claimed = sum(s.bytes for s in models)
        used = vram.used
        other = used - claimed
        if other < 0:
            notes.append(_overclaim(claimed, used, "of VRAM", "NVML reports", "used"))
            other = 0
        free = vram.free
        segs = models + [Segment("other", "other use", other), Segment("free", "free", free)]
        return MemoryBudget(pool, total, available, reserve, warn, _fit_to_total(segs, total), tuple(notes))

    # Unified memory and CPU-only boxes: the host pool.
    total = meminfo.total
    available = min(total, meminfo.gpu_allocatable if pool is Pool.UNIFIED else meminfo.available)
    models = model_segments(resident, lane_of, lambda m: m.size)
    claimed = sum(s.bytes for s in models)
    used = total - meminfo.available
    other = used - claimed
    if other < 0:
        notes.append(_overclaim(claimed, used, "", "only", "of memory is in use"))
        other = 0
    cache = min(meminfo.reclaimable, meminfo.available)
    free = max(0, meminfo.available - cache)
    segs = models + [
        Segment("other", "other use", other),
        Segment("cache", "reclaimable cache", cache),
        Segment("free", "free", free),
    ]
    return MemoryBudget(pool, total, available, reserve, warn, _fit_to_total(segs, total), tuple(notes))


def _fit_to_total(segs: list[Segment], total: int) -> tuple[Segment, ...]:
    """Trim the trailing 'free' (then 'cache') segment so the parts never exceed the whole."""
    over = sum(s.bytes for s in segs) - total
    if over <= 0:
        return tuple(segs)
    out = list(segs)
    for kind in ("free", "cache", "other"):
        for i, s in enumerate(out):
            if s.kind == kind and over > 0:
                cut = min(s.bytes, over)
                out[i] = Segment(s.kind, s.label, s.bytes - cut, s.lane)
                over -= cut
    return tuple(out)


def bar_cells(budget: MemoryBudget, width: int) -> list[tuple[Segment, int]]:
    """Share `width` cells among segments by size (largest remainder), at least one per
    non-empty model so a small contender never disappears from the bar."""
    if width <= 0 or budget.total <= 0:
        return []
    segs = [s for s in budget.segments if s.bytes > 0]
    exact = [s.bytes / budget.total * width for s in segs]
    cells = [int(x) for x in exact]
    for i, s in enumerate(segs):
        if s.kind == "model" and cells[i] == 0:
            cells[i] = 1
    spare = width - sum(cells)
    order = sorted(range(len(segs)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    k = 0
    while spare > 0 and order:
        cells[order[k % len(order)]] += 1
        spare -= 1
        k += 1
    while spare < 0:
        # take back from the largest non-model segment
        i = max(range(len(segs)), key=lambda j: (segs[j].kind != "model", cells[j]))
        if cells[i] <= 0:
            break
        cells[i] -= 1
        spare += 1
    return list(zip(segs, cells))


def reserve_cell(budget: MemoryBudget, width: int) -> int | None:
    """Bar column where the reserve floor starts (counted from the right end)."""
    if budget.total <= 0 or budget.reserve <= 0:
        return None
    return max(0, min(width - 1, round((budget.total - budget.reserve) / budget.total * width)))
