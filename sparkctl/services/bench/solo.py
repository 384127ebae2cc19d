"""Before a solo bench: what it will unload, for about how long, and what can be known about
whether anything else is using those models (the TUI asks with this before it starts).

What /api/ps can tell: each resident model, its lane, context and session; an expiry that
moves while we watch (a request to it just finished); for a timed lane whose session is
configured, when its last request ended. What it cannot: requests in flight (Ollama does not
list them) and, for a model kept forever, when it was last used. The GPU's utilization (from
the host sample the dashboard already has) tells whether anything runs right now.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sparkctl.core.keepalive import format_seconds, parse_keep_alive
from sparkctl.core.names import model_key
from sparkctl.core.placement import humanize_duration
from sparkctl.core.residency import Held, snapshot
from sparkctl.core.snapshots import GIB

WATCH_S = 1.5  # how long expiries are watched for a request that finishes meanwhile


@dataclass(frozen=True)
class SoloPreview:
    unload: list[Held] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.lines)


def _duration(cfg, settings, models: list[str], sizes: dict[str, int]) -> tuple[float | None, float]:
    """(a rough time at the memory-bandwidth ceiling if every request writes num_predict
    tokens, or None without sizes; the longest it can take, every request at its ceiling)."""
    requests_per_model = settings.warmup + settings.reps
    worst = len(models) * requests_per_model * settings.timeout_s
    bandwidth = settings.bandwidth_gbps * 1e9
    rough = 0.0
    for m in models:
        size = sizes.get(model_key(m))
        if not size or bandwidth <= 0:
            return None, worst
        rough += requests_per_model * settings.num_predict * size / bandwidth
    return rough, worst


def _roughly(seconds: float) -> str:
    """"under a minute", "4 min", "1 h 5 min": a duration to the nearest minute."""
    if seconds < 60:
        return "under a minute"
    return humanize_duration(round(seconds / 60) * 60)


def _ago(h: Held, lane_keep_alive, now: datetime) -> str:
    """When a timed lane's last request ended, from its expiry and its configured session."""
    if h.forever or h.expires_at is None or not h.lane or h.lane not in lane_keep_alive:
        return ""
    session = parse_keep_alive(lane_keep_alive[h.lane]).seconds
    if not session:
        return ""
    ago = session - (h.expires_at - now).total_seconds()
    if ago < 0:
        return ""
    return f", last request ended about {_roughly(ago)} ago"


async def solo_preview(cfg, engine, models: list[str], settings, gpu_busy_pct: float | None = None,
                       watch_s: float | None = None) -> SoloPreview:
    """Read /api/ps twice, `watch_s` (WATCH_S) apart, and say what solo will do (EngineError
    propagates)."""
    watch_s = WATCH_S if watch_s is None else watch_s
    first = {r.name: r.expires_at for r in await engine.ps()}
    try:
        sizes = {model_key(m.name): m.size for m in await engine.tags()}
    except Exception:  # sizes only refine the time estimate
        sizes = {}
    await asyncio.sleep(watch_s)
    resident = await engine.ps()
    now = datetime.now(timezone.utc)
    held = snapshot(resident, cfg.lane_of, now)
    bench = {model_key(m) for m in models}
    others = [h for h in held if h.key not in bench]
    rough, worst = _duration(cfg, settings, models, sizes)
    lines = []
    if not others:
        lines.append("Solo: nothing else is resident, so nothing will be unloaded.")
    else:
        how_long = (f"about {_roughly(rough)} at the memory-bandwidth ceiling, at most "
                    f"{humanize_duration(worst)} with every request at its {settings.timeout_s:g} s ceiling"
                    if rough is not None else f"at most {humanize_duration(worst)}")
        lines.append(f"Solo unloads {len(others)} model(s) for the whole bench ({how_long}), "
                     "then puts each back with its context and keep-alive:")
        lane_ka = getattr(cfg, "lane_keep_alive", {}) or {}
        for h in others:
            who = f"lane {h.lane}: {h.name}" if h.lane else f"{h.name} (no lane)"
            keep = "kept forever" if h.forever else (
                f"session {format_seconds(float(parse_keep_alive(lane_ka[h.lane]).seconds or 0))}"
                if h.lane in lane_ka else "timed session")
            size = next((r.size for r in resident if r.name == h.name), 0)
            lines.append(f"  • {who} — context {h.context_length or 'n/a'}, {keep}, {size / GIB:.1f} GiB"
                         f"{_ago(h, lane_ka, now)}")
    moved = [r.name for r in resident if r.name in first and first[r.name] != r.expires_at]
    fresh = [r.name for r in resident if r.name not in first]
    use = []
    if moved:
        use.append(f"{', '.join(moved)} served a request in the last {watch_s:g} s")
    if fresh:
        use.append(f"{', '.join(fresh)} was loaded by someone in the last {watch_s:g} s")
    if gpu_busy_pct is not None:
        use.append(f"the GPU is {gpu_busy_pct:.0f}% busy right now")
    if others:
        lines.append("In use? " + ("; ".join(use) + "." if use else f"no request finished in the last {watch_s:g} s.")
                     + " Ollama does not list requests in flight: a request your router sends meanwhile "
                       "loads its model again and disturbs the bench.")
    return SoloPreview(others, lines)
