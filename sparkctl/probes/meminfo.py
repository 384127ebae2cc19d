"""Host memory and memory pressure, read from /proc (psutil when /proc is not there).

On a DGX Spark this is the memory budget itself: the GPU allocates from the same pool,
so MemAvailable (+ SwapFree) is what a model can still be loaded into.
"""

from __future__ import annotations

from sparkctl.core.snapshots import MemInfo, Pressure, Unavailable

MEMINFO_PATH = "/proc/meminfo"
PRESSURE_PATH = "/proc/pressure/memory"

# /proc/meminfo key -> MemInfo field
_MEMINFO_FIELDS: dict[str, str] = {
    "MemTotal": "total",
    "MemAvailable": "available",
    "MemFree": "free",
    "Cached": "cached",
    "Buffers": "buffers",
    "Shmem": "shmem",
    "SReclaimable": "sreclaimable",
    "SwapTotal": "swap_total",
    "SwapFree": "swap_free",
    "HugePages_Total": "hugepages_total",
    "HugePages_Free": "hugepages_free",
    "Hugepagesize": "hugepage_size",
}

_UNIT_BYTES = {"kB": 1024, "KB": 1024, "mB": 1024**2, "MB": 1024**2, "gB": 1024**3, "GB": 1024**3}


def parse_meminfo(text: str) -> MemInfo:
    """Parse /proc/meminfo text. Sizes in kB become bytes; HugePages_* stay counts.

    Raises ValueError when MemTotal is missing (not a meminfo file).
    """
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        field = _MEMINFO_FIELDS.get(key.strip())
        if field is None:
            continue
        parts = rest.split()
        if not parts:
            continue
        try:
            number = int(parts[0])
        except ValueError:
            continue
        unit = parts[1] if len(parts) > 1 else ""
        values[field] = number * _UNIT_BYTES.get(unit, 1)

    if "total" not in values:
        raise ValueError("no MemTotal line")
    values.setdefault("free", 0)
    values.setdefault("cached", 0)
    values.setdefault("buffers", 0)
    if "available" not in values:
        # Kernels before 3.14 have no MemAvailable; free + page cache is the usual estimate.
        values["available"] = values["free"] + values["cached"] + values["buffers"]
    return MemInfo(**values)


def parse_pressure(text: str) -> Pressure:
    """Parse PSI text ("some avg10=.. avg60=.. avg300=.. total=.." and a "full" line).

    A missing "full" line reads as zeros; a missing "some" line raises ValueError.
    """
    lines: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        kind, _, rest = line.strip().partition(" ")
        if kind not in ("some", "full"):
            continue
        fields: dict[str, float] = {}
        for item in rest.split():
            name, eq, value = item.partition("=")
            if eq and name.startswith("avg"):
                fields[name] = float(value)
        lines[kind] = fields

    if "some" not in lines:
        raise ValueError("no 'some' line")
    some = lines["some"]
    full = lines.get("full", {})
    return Pressure(
        some_avg10=some.get("avg10", 0.0),
        some_avg60=some.get("avg60", 0.0),
        some_avg300=some.get("avg300", 0.0),
        full_avg10=full.get("avg10", 0.0),
        full_avg60=full.get("avg60", 0.0),
        full_avg300=full.get("avg300", 0.0),
    )


def meminfo_from_psutil() -> MemInfo | Unavailable:
    """Host memory from psutil, for systems without /proc/meminfo (macOS, some containers)."""
    try:
        import psutil
    except ImportError:
        return Unavailable("psutil not installed")
    try:
        vm = psutil.virtual_memory()
        swap = psutil.swap_memory()
    except Exception as exc:  # psutil raises OSError/RuntimeError variants per platform
        return Unavailable(f"psutil: {exc}")
    return MemInfo(
        total=int(vm.total),
        available=int(vm.available),
        free=int(vm.free),
        cached=int(getattr(vm, "cached", 0)),
        buffers=int(getattr(vm, "buffers", 0)),
        shmem=int(getattr(vm, "shared", 0)),
        swap_total=int(swap.total),
        swap_free=int(swap.free),
    )


def read_meminfo(path: str = MEMINFO_PATH, *, use_psutil: bool = True) -> MemInfo | Unavailable:
    """Read host memory from ``path``; fall back to psutil when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        if use_psutil:
            return meminfo_from_psutil()
        return Unavailable(f"cannot read {path}: {exc.strerror or exc}")
    try:
        return parse_meminfo(text)
    except ValueError as exc:
        if use_psutil:
            return meminfo_from_psutil()
        return Unavailable(f"unreadable {path}: {exc}")


def read_pressure(path: str = PRESSURE_PATH) -> Pressure | Unavailable:
    """Read memory PSI; Unavailable when the kernel has none or it is switched off."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except FileNotFoundError:
        return Unavailable("kernel has no PSI")
    except OSError as exc:
        # With psi=0 on the kernel command line the file exists but reads fail (EOPNOTSUPP).
        return Unavailable(f"PSI disabled ({exc.strerror or exc})")
    try:
        return parse_pressure(text)
    except ValueError as exc:
        return Unavailable(f"unreadable PSI: {exc}")
