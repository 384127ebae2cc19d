"""Residency is borrowed, not taken: what a bench found in memory, and how to put it back.

Ollama keeps a *session length* per loaded runner (server/sched.go): a request that carries
``keep_alive`` replaces it, a request without one keeps it, and the expiry shown in /api/ps
is "when the runner last went idle + the session". So:

- a model that was resident before the bench is sent requests with no ``keep_alive`` at
  all, and its session is untouched (its expiry moves as it would for any user's request);
- a model the bench had to unload or reload lost its runner, and with it the session. It
  comes back with a session length we can name: forever when it was kept forever, else the
  lane's configured keep-alive (``[lanes.keep_alive]``), else the engine's own default
  (a load that sends no ``keep_alive`` gets ``OLLAMA_KEEP_ALIVE``). The time it had left
  cannot be kept: sending the remainder would make *that* its session for every later
  request (the bug this module replaces);
- a model the bench loaded that was not resident before is unloaded at the end, unless
  the user asked to keep it;
- lanes read again at the end win over the lanes the bench began with: a lane model the
  bench unloaded that serves no lane any more is not loaded back (a lane change while the
  bench ran planned memory without it), and a model the bench loaded that a lane now
  names stays.

Pure: the caller reads /api/ps and the clock and performs the steps. Pure core of
sparkctl.services.bench.residency_guard, which does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sparkctl.core.keepalive import format_seconds, parse_keep_alive
from sparkctl.core.names import model_key
from sparkctl.core.placement import FOREVER_AFTER
from sparkctl.core.snapshots import ResidentModel

# A restored timed session is checked against the expiry /api/ps shows: the load and the
# read are a moment apart, and Ollama stamps the expiry when the request ends.
SESSION_TOLERANCE_S = 60.0

KEEP, RESTORE, UNLOAD, KEPT_LOADED, EXPIRED = "keep", "restore", "unload", "kept loaded", "expired"
RETIRED = "retired"  # was a lane model when the bench began, serves no lane at its end: not put back
LANE_KEPT = "lane kept"  # loaded by the bench, a lane serves it at its end: left loaded


@dataclass(frozen=True)
class Held:
    """A model resident before the bench, as /api/ps showed it."""

    name: str
    lane: str | None
    context_length: int | None
    expires_at: datetime | None
    forever: bool

    @property
    def key(self) -> str:
        return model_key(self.name)

    @property
    def title(self) -> str:
        return f"{self.name} (lane {self.lane})" if self.lane else self.name

    def describe(self) -> str:
        ctx = f"context {self.context_length}" if self.context_length else "context n/a"
        until = "kept forever" if self.forever else (
            f"expiring {self.expires_at:%H:%M:%S}" if self.expires_at else "expiry n/a")
        return f"{ctx}, {until}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lane": self.lane, "context_length": self.context_length,
                "expires_at": self.expires_at.isoformat() if self.expires_at else None, "forever": self.forever}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Held":
        """From `to_dict`'s output; ValueError naming the field for anything else (a journal
        file may have been damaged or edited)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a resident model is {type(d).__name__}, not an object")
        name, lane, ctx, expires = d.get("name"), d.get("lane"), d.get("context_length"), d.get("expires_at")
        if not isinstance(name, str) or not name:
            raise ValueError("a resident model has no name")
        if lane is not None and not isinstance(lane, str):
            raise ValueError(f"{name}: lane is {type(lane).__name__}, not a string")
        if ctx is not None and (isinstance(ctx, bool) or not isinstance(ctx, int) or not 0 <= ctx < 2**32):
            raise ValueError(f"{name}: context_length is not a context length")
        if expires is not None and not isinstance(expires, str):
            raise ValueError(f"{name}: expires_at is {type(expires).__name__}, not a time")
        return cls(name, lane or None, ctx or None, datetime.fromisoformat(expires) if expires else None,
                   bool(d.get("forever")))


@dataclass(frozen=True)
class Session:
    """The keep-alive a model is put back with."""

    wire: int | float | None  # what to send as keep_alive; None: send nothing (engine default)
    label: str  # "forever", "30m", "the engine's default"
    source: str  # why that one
    exact: bool  # forever is exact; a timed session restarts, its remaining time is lost

    def describe(self) -> str:
        return f"keep-alive {self.label} ({self.source})"


def is_forever(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at - now > FOREVER_AFTER


def snapshot(resident: Iterable[ResidentModel], lane_of: Callable[[str], str | None],
             now: datetime) -> list[Held]:
    """Every resident model (lane or not): the residency set the bench must give back."""
    return [Held(r.name, lane_of(r.name), r.context_length, r.expires_at, is_forever(r.expires_at, now))
            for r in resident]


def find(resident: Iterable[ResidentModel], name: str) -> ResidentModel | None:
    key = model_key(name)
    return next((r for r in resident if model_key(r.name) == key), None)


def restore_session(held: Held, lane_keep_alive: Mapping[str, Any],
                    sessions: Mapping[str, str] | None = None) -> Session:
    """The session a model that lost its runner comes back with (see the module doc):
    forever as before; the keep-alive sparkctl loaded it with (`sessions`: model key ->
    keep-alive, kept in its state file); its lane's [lanes.keep_alive]; else the engine's
    default."""
    if held.forever:
        return Session(-1, "forever", "as before", True)
    own = (sessions or {}).get(held.key)
    if own is not None:
        try:
            ka = parse_keep_alive(own)
        except ValueError:
            ka = None
        if ka is not None:
            return Session(ka.wire, ka.label, "as sparkctl loaded it (load --keep-alive)", ka.forever)
    configured = lane_keep_alive.get(held.lane) if held.lane else None
    if configured is not None:
        ka = parse_keep_alive(configured)
        return Session(ka.wire, ka.label, f"[lanes.keep_alive] {held.lane}", ka.forever)
    return Session(None, "the engine's default",
                   "no [lanes.keep_alive] for it: OLLAMA_KEEP_ALIVE on the server, 5m unless set", False)


def changes(held: Held, now_resident: ResidentModel | None, now: datetime) -> list[str]:
    """How the model differs from `held`, in words: residency, context, kept forever or
    not. A timed model's expiry moving is not a change: every request moves it."""
    if now_resident is None:
        return ["not resident"]
    out = []
    if held.context_length and now_resident.context_length != held.context_length:
        out.append(f"context {now_resident.context_length} instead of {held.context_length}")
    forever_now = is_forever(now_resident.expires_at, now)
    if forever_now != held.forever:
        out.append("kept forever instead of timed" if forever_now else "timed instead of kept forever")
    return out


def verify(held: Held, session: Session, after: ResidentModel | None, now: datetime) -> list[str]:
    """What is still wrong after putting `held` back with `session`; [] when it is right."""
    problems = changes(held, after, now)
    if problems or after is None or session.wire is None or session.wire < 0 or after.expires_at is None:
        return problems
    left = (after.expires_at - now).total_seconds()
    if abs(left - float(session.wire)) > SESSION_TOLERANCE_S:
        problems.append(f"expires in {format_seconds(max(0, round(left)))}, not {session.label}")
    return problems


@dataclass(frozen=True)
class Step:
    """One thing to do (or leave) at the end of a bench, for one model."""

    kind: str  # KEEP | RESTORE | UNLOAD | KEPT_LOADED | EXPIRED | RETIRED | LANE_KEPT
    name: str
    why: str
    held: Held | None = None
    session: Session | None = None


def session_still_set(held: Held, keep_alive: str, now: datetime, set_at: datetime | None = None) -> bool:
    """Whether `held`'s session can still be the one sparkctl loaded it with at `set_at`
    (None: time unknown). A request restarts a session at its length, so an expiry further
    away than that length means another client loaded it since, with a longer one; and a
    session keeps the model at least until set_at + its length, so an expiry before that
    means it ended (unloaded, expired) and someone else's load holds the model now."""
    try:
        ka = parse_keep_alive(keep_alive)
    except ValueError:
        return False
    if ka.forever:
        return held.forever
    if held.forever or held.expires_at is None or ka.seconds is None:
        return False
    if set_at is not None and (held.expires_at - set_at).total_seconds() < ka.seconds - SESSION_TOLERANCE_S:
        return False
    return (held.expires_at - now).total_seconds() <= ka.seconds + SESSION_TOLERANCE_S


def plan(before: Iterable[Held], models: Iterable[str], disturbed: Iterable[str],
         resident_now: list[ResidentModel], lane_keep_alive: Mapping[str, Any], now: datetime,
         keep_loaded: bool = False, lane_now: Callable[[str], str | None] | None = None,
         sessions: Mapping[str, str] | None = None) -> list[Step]:
    """What to do so the residency set after the bench is the set before it.

    `models`: what the bench measured. `disturbed`: keys of models whose runner the bench
    replaced (unloaded for solo, reloaded at another context): their session is gone even
    when they look resident now. Models the bench loaded (not held before) are unloaded
    first, so the ones put back have room. `lane_now`: the lanes as they are at the end,
    when they changed while the bench ran (see the module's doc)."""
    steps = _plan(before, models, disturbed, resident_now, lane_keep_alive, now, keep_loaded, sessions)
    if lane_now is None:
        return steps
    out = []
    for step in steps:
        if step.kind == UNLOAD and lane_now(step.name):
            step = Step(LANE_KEPT, step.name, f"lane {lane_now(step.name)} serves it now (changed since the "
                                              "bench began)")
        elif step.kind == RESTORE and step.held is not None and step.held.lane and not lane_now(step.name):
            step = Step(RETIRED, step.name, f"lane {step.held.lane} no longer serves it (changed since the bench "
                                            "began)", step.held)
        out.append(step)
    return out


def lanes_changed_since(then: Mapping[str, str] | None, before: Iterable[Held],
                        now: Mapping[str, str]) -> Callable[[str], str | None] | None:
    """`lane_now` for `plan` when a dead bench is repaired later: the lanes `now` (the config
    as the repairing command reads it, sparkctl's own state file over it) against the lanes
    `then` (the journal's, as the bench began), or None when no lane changed.

    A lane that changed counts for any model (a model the bench loaded that such a lane names
    now stays; the model such a lane named before is not loaded back); an unchanged lane only
    for the models that were resident in it, so a lane model the bench loaded while it was not
    resident is still unloaded. A journal without `then` (written before it was kept) shows
    only the lanes of its resident models: only those are compared."""
    before = list(before)
    held = {h.key for h in before if h.lane}
    known = dict(then) if then is not None else {h.lane: h.name for h in before if h.lane}
    lanes = {ln: m for ln, m in now.items() if m}
    names = set(known) | (set(lanes) if then is not None else set())
    changed = {ln for ln in names if model_key(known.get(ln, "") or "-") != model_key(lanes.get(ln, "") or "-")}
    if not changed:
        return None

    def lane_now(name: str) -> str | None:
        key = model_key(name)
        return next((ln for ln, m in lanes.items() if model_key(m) == key and (ln in changed or key in held)), None)

    return lane_now


def _plan(before: Iterable[Held], models: Iterable[str], disturbed: Iterable[str],
          resident_now: list[ResidentModel], lane_keep_alive: Mapping[str, Any], now: datetime,
          keep_loaded: bool, sessions: Mapping[str, str] | None = None) -> list[Step]:
    before = list(before)
    held_keys = {h.key for h in before}
    disturbed = {model_key(d) for d in disturbed}
    touched = {model_key(m) for m in models} | disturbed
    steps: list[Step] = []
    for m in dict.fromkeys(models):
        if model_key(m) in held_keys:
            continue
        r = find(resident_now, m)
        if r is None:
            continue
        if keep_loaded:
            steps.append(Step(KEPT_LOADED, r.name, "loaded by the bench, kept as asked (--keep-loaded)"))
        else:
            steps.append(Step(UNLOAD, r.name, "loaded by the bench; it was not resident before"))
    for h in before:
        r = find(resident_now, h.name)
        diff = changes(h, r, now)
        session = restore_session(h, lane_keep_alive, sessions)
        mine = h.key in touched
        if r is None:
            timed_out = not h.forever and h.expires_at is not None and h.expires_at <= now
            if timed_out:
                steps.append(Step(EXPIRED, h.name, "its own keep-alive ran out during the bench", h))
            else:
                why = "unloaded by the bench" if mine else "evicted while the bench ran"
                steps.append(Step(RESTORE, h.name, why, h, session))
        elif diff and mine:
            steps.append(Step(RESTORE, h.name, ", ".join(diff), h, session))
        elif h.key in disturbed and not h.forever:
            # reloaded by the bench at the same context: the runner's session is the load's
            steps.append(Step(RESTORE, h.name, "reloaded by the bench: its session was reset", h, session))
        elif diff:
            steps.append(Step(KEEP, h.name, "changed by another client meanwhile (" + ", ".join(diff) + ")", h))
        else:
            steps.append(Step(KEEP, h.name, "as it was", h))
    return steps
