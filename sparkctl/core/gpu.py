"""Pure helpers for reading GPU state: clock-event reasons, unified-memory detection.

No NVML here. The bit values below are NVML's documented ``nvmlClocksEventReason*``
constants (formerly ``nvmlClocksThrottleReason*``); they are part of the stable C ABI,
so core can decode a mask without importing pynvml.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkctl.core.snapshots import Unavailable

# NVML bit -> short name, in the order nvidia-smi lists them.
CLOCK_EVENT_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal_slowdown"),
    (0x0040, "hw_thermal_slowdown"),
    (0x0080, "hw_power_brake"),
    (0x0100, "display_clocks_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)

# Reasons that say the clocks are low because there is no work, not because something
# holds them down. An idle GPU reports gpu_idle; that must not read as "throttled".
NOT_THROTTLING: frozenset[str] = frozenset({"gpu_idle"})

# GB10 (DGX Spark) shares LPDDR5X with the CPU; NVML has no framebuffer to report.
UNIFIED_MEMORY_NAME_MARKERS: tuple[str, ...] = ("GB10",)


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """Turn an NVML clocks-event bit mask into short names; unknown bits stay visible."""
    names: list[str] = []
    known = 0
    for bit, name in CLOCK_EVENT_REASON_BITS:
        known |= bit
        if mask & bit:
            names.append(name)
    unknown = mask & ~known
    if unknown:
        names.append(f"unknown_{unknown:#x}")
    return tuple(names)


def is_throttled(reasons: Iterable[str] | Unavailable) -> bool:
    """True when any reason other than idling holds the clocks down.

    Unavailable reasons count as "not known to be throttled" (False); callers that need
    to tell the two apart check for Unavailable themselves.
    """
    if isinstance(reasons, Unavailable):
        return False
    return any(reason not in NOT_THROTTLING for reason in reasons)


def has_unified_memory_name(name: str | Unavailable) -> bool:
    """Whether the device name marks a part whose GPU shares host memory (GB10)."""
    return isinstance(name, str) and any(m in name.upper() for m in UNIFIED_MEMORY_NAME_MARKERS)


def looks_unified(
    name: str | Unavailable,
    total: int,
    host_mem_total: int | None,
    tolerance: float = 0.05,
) -> bool:
    """Whether a GPU whose memory query succeeded is really reporting host memory.

    True for a known unified-memory part (GB10 by name), for a device reporting no
    framebuffer (total 0), or for one whose total is within ``tolerance`` of the host's
    MemTotal (some GB10 drivers report MemTotal there). A query that fails with
    NOT_SUPPORTED is the caller's to classify: it never gets a total.
    """
    if has_unified_memory_name(name) or total <= 0:
        return True
    if host_mem_total is not None and host_mem_total > 0:
        return abs(total - host_mem_total) <= tolerance * host_mem_total
    return False


def format_cuda_version(version: int) -> str:
    """NVML's integer CUDA driver version (e.g. 13000, 12040) as "13.0", "12.4"."""
    major, rest = divmod(version, 1000)
    minor, patch = divmod(rest, 10)
    return f"{major}.{minor}" if patch == 0 else f"{major}.{minor}.{patch}"
