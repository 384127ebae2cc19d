"""Whether a lane model is as it was before a bench, and the keep-alive that puts it back
(core.lanestate). Times are built by hand around a fixed `now`."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sparkctl.core.lanestate import LaneModelState, drift, restore_keep_alive, snapshot_lanes
from sparkctl.core.snapshots import ResidentModel

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=timezone.utc)
FOREVER = NOW + timedelta(days=365 * 290)


def rm(name, ctx, expires):
    return ResidentModel(name=name, size=1, size_vram=1, context_length=ctx, expires_at=expires)


def lane_of(name):
    return "production" if name.startswith("qwen3:32b") else None


def test_snapshot_keeps_only_lane_models_and_sees_forever():
    (s,) = snapshot_lanes([rm("qwen3:32b", 32768, FOREVER), rm("llama3.2:3b", 4096, NOW)], lane_of, NOW)
    assert s.lane == "production" and s.forever and s.context_length == 32768


def test_drift_names_each_change():
    before = LaneModelState("production", "qwen3:32b", 32768, FOREVER, True)
    assert drift(before, rm("qwen3:32b", 32768, FOREVER + timedelta(seconds=3)), NOW) == []
    changes = drift(before, rm("qwen3:32b", 8192, NOW + timedelta(minutes=30)), NOW)
    assert changes[0] == "context 8192 instead of 32768"
    assert changes[1].startswith("expires at 18:30:00 instead of never")
    assert drift(before, None, NOW) == ["not resident"]


def test_restore_keep_alive_aims_at_the_original_expiry():
    forever = LaneModelState("p", "m", 4096, FOREVER, True)
    timed = LaneModelState("p", "m", 4096, NOW + timedelta(minutes=10), False)
    gone = LaneModelState("p", "m", 4096, NOW - timedelta(seconds=5), False)
    assert restore_keep_alive(forever, NOW) == -1
    assert restore_keep_alive(timed, NOW + timedelta(minutes=4)) == 360
    assert restore_keep_alive(gone, NOW) is None
