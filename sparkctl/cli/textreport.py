"""The CLI's plain-text reports: `sparkctl status`, and `sparkctl compare`'s decision with the
runs and differences under it. (The tables the TUI shows as well are rendered in services:
services/runs/report_text.py, services/config_text.py.)"""

from __future__ import annotations

from sparkctl.core.budget import MemoryBudget
from sparkctl.core.fmt import gib, na
from sparkctl.core.snapshots import GpuMemory, MemInfo, Pressure, Unavailable
from sparkctl.services.status import StatusReport, redact_engine_status, redact_named_status


def render_status(r: StatusReport) -> str:
    lines: list[str] = []
    e = redact_engine_status(r.engine)  # no credential of [engine] host / [engines.*] url is printed
    if e.reachable and e.error is not None:
        # it answered, with an error (a runner that died, a 500): up but failing
        version = f" {e.version}" if e.version else ""
        lines.append(f"engine   {e.kind}{version} at {e.host}: reachable, engine error: {e.error}")
    elif e.reachable:
        lines.append(f"engine   {e.kind} {e.version} at {e.host}: reachable")
    else:
        lines.append(f"engine   {e.kind} at {e.host}: UNREACHABLE ({e.error})")

    b = r.budget
    if isinstance(b, MemoryBudget):
        pool = {"unified": "unified memory", "vram": "GPU VRAM", "host": "host RAM (no GPU)"}[b.pool.value]
        lines.append(
            f"budget   {pool}: {gib(b.total)} total, {gib(b.available)} available, "
            f"reserve {gib(b.reserve)}, headroom {gib(b.headroom)} [{b.level.value}]"
        )
        for s in b.segments:
            lane = f" ({s.lane})" if s.kind == "model" else ""
            lines.append(f"  {s.label + lane:<40} {gib(s.bytes):>10}")
        for note in b.notes:
            lines.append(f"  note: {note}")
    else:
        lines.append(f"budget   {b}")

    if r.rows:
        lines.append("resident")
        lines.append(f"  {'NAME':<28} {'LANE':<11} {'SIZE':>10}  {'PROCESSOR':<16} {'CONTEXT':>8}  UNTIL")
        for row in r.rows:
            m = row.model
            ctx = str(m.context_length) if m.context_length else "n/a"
            lines.append(
                f"  {m.name:<28} {row.lane or '-':<11} {gib(m.size):>10}  {row.placement:<16} {ctx:>8}  {row.until}"
            )
    elif e.reachable and e.error is None:
        lines.append("resident (no models loaded)")
    elif e.reachable:
        lines.append("resident (unknown: the engine answered with an error)")
    if r.attribution is not None and r.attribution.mismatch:
        lines.append(f"  WARNING: {r.attribution.mismatch}")
    for lane, model in r.lanes_not_resident:
        lines.append(f"  WARNING: lane {lane}: {model} is not resident (its next request loads it cold)")
    for text in r.lanes_spilled:
        lines.append(f"  WARNING: {text}")
    for text in r.residency_warnings:
        lines.append(f"  WARNING: {text}")

    for ne in map(redact_named_status, r.engines):
        if ne.reachable and ne.error is not None:
            lines.append(f"bench    {ne.name}: {ne.kind} at {ne.url}: reachable, engine error: {ne.error}")
        elif ne.reachable:
            served = ""
            if ne.model:
                served = f", model {ne.model}" + ("" if ne.model_served is not False else " NOT served")
            lines.append(f"bench    {ne.name}: {ne.kind} {ne.version or ''} at {ne.url}: reachable{served}")
        else:
            lines.append(f"bench    {ne.name}: {ne.kind} at {ne.url}: UNREACHABLE ({ne.error})")

    if r.host.gpu.unavailable is not None:
        lines.append(f"gpu      {r.host.gpu.unavailable}")
    for g in r.host.gpu.gpus:
        thr = g.throttle_reasons
        thr_s = na(thr) if isinstance(thr, Unavailable) else (", ".join(thr) or "none")
        mem = "unified (from /proc/meminfo)" if g.unified_memory else (
            f"{gib(g.memory.used)} / {gib(g.memory.total)}" if isinstance(g.memory, GpuMemory) else na(g.memory)
        )
        lines.append(
            f"gpu {g.index}    {na(g.name)}: util {na(g.utilization_pct, '{:.0f}', '%')}, "
            f"temp {na(g.temperature_c, '{:.0f}', ' C')}, power {na(g.power_w, '{:.1f}', ' W')}, "
            f"SM {na(g.sm_clock_mhz, '{:.0f}', ' MHz')}, throttle {thr_s}, memory {mem}"
        )

    m = r.host.meminfo
    if isinstance(m, MemInfo):
        lines.append(
            f"host     {r.host.hostname}: {gib(m.total)} RAM, {gib(m.available)} available, "
            f"{gib(m.reclaimable)} reclaimable cache, swap free {gib(m.swap_free)}"
        )
    p = r.host.pressure
    if isinstance(p, Pressure):
        lines.append(f"pressure memory some {p.some_avg10:.2f}% full {p.full_avg10:.2f}% (avg10)")
    else:
        lines.append(f"pressure {p}")
    return "\n".join(lines)


# ---- decisions (sparkctl compare / regressions, and the Runs screen's head to head) ------------


def render_comparison(cmp) -> str:
    """The decision first (six figures, verdicts, one recommendation per contender), then
    the runs and every difference in detail."""
    from sparkctl.services.runs.decision import decision_table
    from sparkctl.services.runs.report_text import render_comparison_detail

    return decision_table(cmp).text() + "\n\n" + render_comparison_detail(cmp)
