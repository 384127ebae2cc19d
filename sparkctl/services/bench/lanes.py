"""Lane models come out of a bench as they went in: noted before, put back and verified after.

Works for every way a bench can change a lane model: benching it at another context (a
reload), the bench's keep-alive replacing its own, solo mode unloading it, or an
interrupted bench that left it half way. A restore that cannot be verified is reported,
never swallowed: the caller records it on the runs and exits non-zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from sparkctl.config import Config
from sparkctl.core.keepalive import format_seconds
from sparkctl.core.lanestate import LaneModelState, drift, find, restore_keep_alive, snapshot_lanes
from sparkctl.core.names import model_key
from sparkctl.engines.base import EngineError


@dataclass
class LaneRestore:
    """What happened to each lane model noted before the bench."""

    untouched: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # "name (what was put back)"
    expired: list[str] = field(default_factory=list)  # its own keep-alive ran out meanwhile
    failed: list[str] = field(default_factory=list)  # "name: why"

    @property
    def ok(self) -> bool:
        return not self.failed

    def tag(self) -> str:
        if self.failed:
            return "FAILED: " + "; ".join(self.failed)
        if self.restored:
            return "restored: " + "; ".join(self.restored)
        return "unchanged" if self.untouched else "no lane model resident"


def _now() -> datetime:
    return datetime.now(timezone.utc)


async def note_lanes(engine, cfg: Config) -> list[LaneModelState]:
    if not hasattr(engine, "ps") or not getattr(engine, "reports_placement", True):
        return []
    return snapshot_lanes(await engine.ps(), cfg.lane_of, _now())


async def restore_lanes(engine, before: list[LaneModelState], say,
                        touched: set[str] | None = None) -> LaneRestore:
    """Put back every lane model in `before` that changed; verify each from /api/ps.

    `touched`: model keys the bench sent requests to, loaded or unloaded. A lane model the
    bench never touched whose only change is a later expiry was kept busy by its own users
    meanwhile: that expiry is theirs, not the bench's, and is left alone."""
    out = LaneRestore()
    if not before:
        return out
    try:
        resident = await engine.ps()
    except EngineError as exc:
        out.failed.extend(f"{b.name}: cannot read the engine's resident models ({exc.message})" for b in before)
        return out
    for b in before:
        now = _now()
        now_resident = find(resident, b.name)
        changes = drift(b, now_resident, now)
        if changes and touched is not None and model_key(b.name) not in touched and now_resident is not None \
                and all(c.startswith("expires") for c in changes):
            changes = []
        if not changes:
            out.untouched.append(b.name)
            continue
        keep = restore_keep_alive(b, now)
        if keep is None:
            out.expired.append(b.name)
            continue
        say(f"restoring lane model {b.name} ({', '.join(changes)}) to {b.describe()}")
        options = {"num_ctx": b.context_length} if b.context_length else None
        try:
            await engine.load(b.name, keep_alive=keep, options=options)
            after = find(await engine.ps(), b.name)
        except EngineError as exc:
            out.failed.append(f"{b.name}: restore to {b.describe()} failed: {exc.message}")
            continue
        left = drift(b, after, _now())
        if left:
            out.failed.append(f"{b.name}: after the restore still {', '.join(left)}")
        else:
            what = "forever" if keep < 0 else f"{format_seconds(keep)} left"
            out.restored.append(f"{b.name} (context {b.context_length}, keep-alive {what})")
    return out
