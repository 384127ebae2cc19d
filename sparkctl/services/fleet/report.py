"""Another host's status JSON back into a StatusReport, for the dashboard's read-only view.

The JSON is what that host's own `sparkctl status --json` computed (budget, placement,
lanes by its config), so nothing is recomputed here: each figure is put back where the
dashboard reads it. What the JSON does not carry (page cache split, PSI over 300 s) is
left at zero; the dashboard does not show it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sparkctl.core.budget import Level, MemoryBudget, Pool, Segment
from sparkctl.core.placement import GpuAttribution
from sparkctl.core.snapshots import (
    EngineStatus,
    GpuMemory,
    GpuProcess,
    GpuReport,
    GpuSnapshot,
    HostSnapshot,
    MemInfo,
    ModelDetails,
    Pressure,
    ResidentModel,
    Unavailable,
)
from sparkctl.services.status import ResidentRow, StatusReport


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _reading(g: dict[str, Any], key: str, na: dict[str, Any]) -> Any:
    value = g.get(key)
    if value is None:
        return Unavailable(str(na.get(key, "not reported")))
    return tuple(value) if isinstance(value, list) else value


def _gpu(g: dict[str, Any]) -> GpuSnapshot:
    na = g.get("unavailable") or {}
    mem = g.get("memory")
    procs = g.get("processes")
    return GpuSnapshot(
        index=int(g.get("index") or 0),
        name=_reading(g, "name", na), uuid=_reading(g, "uuid", na), driver=_reading(g, "driver", na),
        utilization_pct=_reading(g, "utilization_pct", na), temperature_c=_reading(g, "temperature_c", na),
        power_w=_reading(g, "power_w", na), power_limit_w=_reading(g, "power_limit_w", na),
        sm_clock_mhz=_reading(g, "sm_clock_mhz", na), sm_clock_max_mhz=_reading(g, "sm_clock_max_mhz", na),
        throttle_reasons=_reading(g, "throttle_reasons", na),
        memory=(GpuMemory(mem["total"], mem["used"], mem["free"]) if isinstance(mem, dict)
                else None if g.get("unified_memory") else Unavailable(str(na.get("memory", "not reported")))),
        unified_memory=bool(g.get("unified_memory")),
        processes=(tuple(GpuProcess(p.get("pid", 0), p.get("used_bytes"), p.get("name", "")) for p in procs)
                   if isinstance(procs, list) else Unavailable(str(na.get("processes", "not reported")))),
    )


def _budget(b: dict[str, Any]) -> MemoryBudget:
    available, reserve = int(b["available"]), int(b["reserve"])
    # the warning line is not in the JSON, its verdict is: a line that gives the same verdict
    level = b.get("level")
    warn_line = available + 1 if level == Level.WARN.value else reserve
    segments = tuple(Segment(s.get("kind", "other"), s.get("label", ""), int(s.get("bytes") or 0), s.get("lane"))
                     for s in b.get("segments") or [])
    return MemoryBudget(Pool(b.get("pool", "host")), int(b["total"]), available, reserve, warn_line, segments,
                        tuple(b.get("notes") or ()))


def report_from_status(raw: dict[str, Any], now: datetime) -> StatusReport:
    """The StatusReport the host's own dashboard would show, from its status JSON."""
    e = raw.get("engine") or {}
    resident = []
    rows = []
    for r in raw.get("resident") or []:
        m = ResidentModel(
            name=r.get("name", "?"), size=int(r.get("size") or 0), size_vram=int(r.get("size_vram") or 0),
            digest=r.get("digest") or "", expires_at=_when(r.get("expires_at")),
            context_length=r.get("context_length"),
            details=ModelDetails(quantization_level=r.get("quantization") or "",
                                 parameter_size=r.get("parameter_size") or ""))
        resident.append(m)
        rows.append(ResidentRow(m, r.get("lane"), r.get("placement") or "?", r.get("until") or "n/a"))
    engine = EngineStatus(e.get("kind", "?"), e.get("host", "?"), bool(e.get("reachable")), e.get("version"),
                          e.get("error"), tuple(resident))
    mem = raw.get("memory")
    meminfo: MemInfo | Unavailable = (
        MemInfo(total=mem["total"], available=mem["available"], free=mem.get("free", 0),
                cached=mem.get("reclaimable", 0), buffers=0, swap_free=mem.get("swap_free", 0))
        if isinstance(mem, dict) else Unavailable(raw.get("budget_unavailable") or "not reported"))
    p = raw.get("pressure")
    pressure: Pressure | Unavailable = (
        Pressure(p["some_avg10"], p["some_avg60"], 0.0, p["full_avg10"], p["full_avg60"], 0.0)
        if isinstance(p, dict) else Unavailable(raw.get("pressure_unavailable") or "not reported"))
    gpu_na = raw.get("gpu_unavailable")
    gpu = GpuReport(tuple(_gpu(g) for g in raw.get("gpus") or []), Unavailable(gpu_na) if gpu_na else None)
    host_info = raw.get("host") or {}
    host = HostSnapshot(meminfo, pressure, gpu, host_info.get("hostname", ""), host_info.get("cpu_count") or 0)
    b = raw.get("budget")
    budget = _budget(b) if isinstance(b, dict) else Unavailable(raw.get("budget_unavailable") or "not reported")
    a = raw.get("gpu_attribution")
    attribution = (GpuAttribution(a.get("engine_claimed_vram") or 0, a.get("nvml_engine_bytes"), a.get("mismatch"))
                   if isinstance(a, dict) else None)
    lanes_raw = raw.get("lanes")
    lanes = None if not isinstance(lanes_raw, list) else tuple(
        (x.get("lane", "?"), x.get("model", "?"), bool(x.get("resident"))) for x in lanes_raw)
    return StatusReport(engine, host, budget, tuple(rows), attribution, _when(raw.get("at")) or now, lanes=lanes)
