"""What a bench found resident and how each model is put back (core.residency): Ollama's
session semantics (server/sched.go: a request with keep_alive sets a runner's session, one
without keeps it) decide what "as before" means. Times are built by hand around a fixed now."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sparkctl.core.residency import (
    EXPIRED, KEEP, KEPT_LOADED, RESTORE, UNLOAD, Held, changes, plan, restore_session, snapshot, verify,
)
from sparkctl.core.snapshots import ResidentModel

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=timezone.utc)
FOREVER = NOW + timedelta(days=365 * 290)
LANES = {"qwen3:32b": "production", "qwen3:4b": "fast"}


def rm(name, ctx, expires):
    return ResidentModel(name=name, size=1, size_vram=1, context_length=ctx, expires_at=expires)


def lane_of(name):
    return LANES.get(name)


PROD = Held("qwen3:32b", "production", 32768, FOREVER, True)
FAST = Held("qwen3:4b", "fast", 8192, NOW + timedelta(minutes=10), False)
SIDE = Held("gemma3:4b", None, 16384, FOREVER, True)


def test_snapshot_keeps_every_resident_model_lane_or_not():
    held = snapshot([rm("qwen3:32b", 32768, FOREVER), rm("gemma3:4b", 4096, NOW + timedelta(minutes=3))], lane_of, NOW)
    assert [(h.name, h.lane, h.forever) for h in held] == [("qwen3:32b", "production", True),
                                                           ("gemma3:4b", None, False)]
    assert Held.from_dict(held[1].to_dict()) == held[1]  # journaled and read back alike


def test_the_session_a_model_comes_back_with():
    assert restore_session(PROD, {}).wire == -1 and restore_session(PROD, {}).exact
    configured = restore_session(FAST, {"fast": "30m"})
    assert (configured.wire, configured.label, configured.exact) == (1800, "30m", False)
    assert "[lanes.keep_alive] fast" in configured.source
    default = restore_session(FAST, {})
    assert default.wire is None and "OLLAMA_KEEP_ALIVE" in default.source  # send none: the server's default
    # never the 10 minutes it had left: that would become its session for every later request
    assert restore_session(FAST, {"fast": "30m"}).wire != 600


def test_a_timed_expiry_moving_is_not_a_change_but_context_and_forever_are():
    assert changes(FAST, rm("qwen3:4b", 8192, NOW + timedelta(minutes=29)), NOW) == []
    assert changes(PROD, rm("qwen3:32b", 8192, NOW + timedelta(minutes=30)), NOW) == [
        "context 8192 instead of 32768", "timed instead of kept forever"]
    assert changes(PROD, None, NOW) == ["not resident"]


def test_verify_checks_the_session_it_set():
    s = restore_session(FAST, {"fast": "30m"})
    assert verify(FAST, s, rm("qwen3:4b", 8192, NOW + timedelta(minutes=30)), NOW) == []
    assert verify(FAST, s, rm("qwen3:4b", 8192, NOW + timedelta(minutes=10)), NOW) == ["expires in 10m, not 30m"]


def test_solo_plan_unloads_the_bench_model_first_and_restores_what_it_unloaded():
    steps = plan([PROD, FAST, SIDE], ["llama3.2:3b"], {"qwen3:32b", "qwen3:4b", "gemma3:4b"},
                 [rm("llama3.2:3b", 8192, NOW + timedelta(minutes=30))], {"fast": "30m"}, NOW)
    assert [(s.kind, s.name) for s in steps] == [
        (UNLOAD, "llama3.2:3b"), (RESTORE, "qwen3:32b"), (RESTORE, "qwen3:4b"), (RESTORE, "gemma3:4b")]
    assert steps[2].session.wire == 1800


def test_keep_loaded_and_a_timed_model_whose_time_ran_out():
    later = NOW + timedelta(minutes=20)  # FAST would have expired at 18:10
    steps = plan([FAST], ["llama3.2:3b"], {"qwen3:4b"}, [rm("llama3.2:3b", 8192, later)], {}, later,
                 keep_loaded=True)
    assert [(s.kind, s.name) for s in steps] == [(KEPT_LOADED, "llama3.2:3b"), (EXPIRED, "qwen3:4b")]


def test_beside_a_model_someone_else_changed_is_left_alone_one_evicted_is_restored():
    resident = [rm("qwen3:4b", 4096, NOW + timedelta(minutes=5))]  # FAST reloaded by its own users
    steps = plan([PROD, FAST], ["llama3.2:3b"], set(), resident, {}, NOW)
    kinds = {s.name: s.kind for s in steps}
    assert kinds == {"qwen3:4b": KEEP, "qwen3:32b": RESTORE}  # production evicted while the bench ran
    assert next(s for s in steps if s.name == "qwen3:32b").why == "evicted while the bench ran"


def test_a_timed_model_reloaded_by_the_bench_gets_its_session_back_even_when_it_looks_right():
    steps = plan([FAST], ["qwen3:4b"], {"qwen3:4b"}, [rm("qwen3:4b", 8192, NOW + timedelta(minutes=5))],
                 {"fast": "30m"}, NOW)
    assert [(s.kind, s.why) for s in steps] == [(RESTORE, "reloaded by the bench: its session was reset")]


def test_a_repair_after_death_follows_only_the_lanes_that_changed():
    """Review of issue 28: a dead bench's repair compares the lanes now with the journal's."""
    from sparkctl.core.residency import LANE_KEPT, RETIRED, lanes_changed_since

    then = {"production": "qwen3:32b", "fast": "qwen3:4b"}
    assert lanes_changed_since(then, [PROD, FAST], dict(then)) is None  # nothing changed: as before
    # fast was promoted to llama3.2:3b (the bench's model) after the bench died
    lane_now = lanes_changed_since(then, [PROD, FAST], {**then, "fast": "llama3.2:3b"})
    steps = {s.name: s.kind for s in plan([PROD, FAST], ["llama3.2:3b"], ["qwen3:32b", "qwen3:4b"],
                                          [rm("llama3.2:3b", 4096, FOREVER)], {}, NOW, lane_now=lane_now)}
    assert steps == {"llama3.2:3b": LANE_KEPT, "qwen3:4b": RETIRED, "qwen3:32b": RESTORE}
    # a lane model the bench loaded while it was not resident is still unloaded when another lane changed
    lane_now = lanes_changed_since({**then, "big": "gemma3:27b"}, [PROD],
                                   {**then, "big": "gemma3:27b", "fast": "phi4:14b"})
    steps = {s.name: s.kind for s in plan([PROD], ["gemma3:27b"], [], [rm("qwen3:32b", 32768, FOREVER),
                                          rm("gemma3:27b", 8192, FOREVER)], {}, NOW, lane_now=lane_now)}
    assert steps["gemma3:27b"] == UNLOAD
    # a journal from before the lanes were kept: only the lanes of its resident models compare
    assert lanes_changed_since(None, [PROD, FAST], {**then, "big": "gemma3:27b"}) is None
    assert lanes_changed_since(None, [PROD, FAST], {**then, "fast": "llama3.2:3b"})("llama3.2:3b") == "fast"


def test_a_session_sparkctl_set_is_still_set_only_while_its_expiry_fits_it():
    """sparkctl set 30m at `set_at`. Its session keeps the model until at least set_at + 30m
    (a request only moves the end later) and never past now + 30m; an expiry outside both
    is another client's load (a fresh 5m one after an unload, a longer keep_alive)."""
    from sparkctl.core.residency import session_still_set

    def held(left_min):
        return Held("gemma3:4b", None, 4096, NOW + timedelta(minutes=left_min), False)

    set_10_ago = NOW - timedelta(minutes=10)
    assert session_still_set(held(20), "30m", NOW, set_10_ago)  # untouched since
    assert session_still_set(held(29.5), "30m", NOW, set_10_ago)  # requested since: later end
    assert not session_still_set(held(4), "30m", NOW, set_10_ago)  # unloaded, loaded again for 5m
    assert not session_still_set(held(45), "30m", NOW, set_10_ago)  # someone set a longer one
    assert session_still_set(held(4), "30m", NOW, None)  # time unknown (an older state file): length only
    set_2h_ago = NOW - timedelta(hours=2)
    assert session_still_set(held(29), "30m", NOW, set_2h_ago)  # kept busy by requests for 2 h
