"""How a lane model sits in the engine, and whether a bench left it that way.

A bench loads models with its own context and keep-alive; a lane model that the user's
router relies on must come out exactly as it went in. Pure: the caller reads /api/ps and
the clock, and gets back what changed and what keep-alive would put it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sparkctl.core.names import model_key
from sparkctl.core.placement import FOREVER_AFTER
from sparkctl.core.snapshots import ResidentModel

# Two expiries this close are the same setting: a restore request and the check after it
# are a second or two apart, and Ollama stamps the expiry when the request ends.
EXPIRY_TOLERANCE_S = 60.0


@dataclass(frozen=True)
class LaneModelState:
    """A resident lane model as /api/ps showed it before the bench."""

    lane: str
    name: str
    context_length: int | None
    expires_at: datetime | None
    forever: bool

    def describe(self) -> str:
        ctx = f"context {self.context_length}" if self.context_length else "context n/a"
        until = "forever" if self.forever else (
            f"until {self.expires_at:%H:%M:%S}" if self.expires_at else "expiry n/a")
        return f"{ctx}, {until}"


def is_forever(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at - now > FOREVER_AFTER


def snapshot_lanes(resident: Iterable[ResidentModel], lane_of: Callable[[str], str | None],
                   now: datetime) -> list[LaneModelState]:
    out = []
    for r in resident:
        lane = lane_of(r.name)
        if lane is not None:
            out.append(LaneModelState(lane, r.name, r.context_length, r.expires_at,
                                      is_forever(r.expires_at, now)))
    return out


def find(resident: Iterable[ResidentModel], name: str) -> ResidentModel | None:
    key = model_key(name)
    return next((r for r in resident if model_key(r.name) == key), None)


def drift(before: LaneModelState, now_resident: ResidentModel | None, now: datetime) -> list[str]:
    """What differs from `before`, in words; [] when the model is as it was."""
    if now_resident is None:
        return ["not resident"]
    changes = []
    if before.context_length and now_resident.context_length != before.context_length:
        changes.append(f"context {now_resident.context_length} instead of {before.context_length}")
    forever_now = is_forever(now_resident.expires_at, now)
    if before.forever != forever_now:
        changes.append("expires " + ("never" if forever_now else _until(now_resident.expires_at))
                       + " instead of " + ("never" if before.forever else _until(before.expires_at)))
    elif not before.forever and before.expires_at and now_resident.expires_at:
        if abs((now_resident.expires_at - before.expires_at).total_seconds()) > EXPIRY_TOLERANCE_S:
            changes.append(f"expires {_until(now_resident.expires_at)} instead of {_until(before.expires_at)}")
    return changes


def restore_keep_alive(before: LaneModelState, now: datetime) -> int | None:
    """The keep_alive (seconds, -1 forever) that makes the model expire when it would have;
    None when that moment has passed (it would have unloaded on its own by now)."""
    if before.forever:
        return -1
    if before.expires_at is None:
        return None
    left = (before.expires_at - now).total_seconds()
    return int(round(left)) if left >= 1 else None


def _until(t: datetime | None) -> str:
    return "at an unknown time" if t is None else f"at {t:%H:%M:%S}"
