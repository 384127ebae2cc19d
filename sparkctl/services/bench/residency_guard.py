"""Residency is borrowed, not taken: every model a bench finds resident is written down
before the bench touches anything, and put back (verified) when it ends, however it ends.

- ``ResidencyGuard.begin`` reads /api/ps and writes a journal file (fsynced, see
  tracking/residency_journal.py) into ``<data dir>/residency/``, beside the run spool: what was resident (context, kept
  forever or when it expires, lane), what the bench will measure, which resident models it
  will have to unload or reload, and which process owns it.
- While the bench runs, ``keep_alive(model)`` says what its requests carry: nothing for a
  model that was resident (Ollama keeps that runner's session), the bench's keep-alive for
  one it loads itself.
- ``end`` unloads what the bench loaded (unless kept on purpose), loads back what it
  unloaded or reloaded, verifies each from /api/ps and removes the journal; a failure
  leaves the journal marked failed, so the dashboard and `status` keep warning and the
  next start (or `sparkctl lanes --restore`) tries again.

A process that dies without its wrap-up (kill -9, an OOM kill, a power cut) leaves the
journal behind: recovery.py finds it at the next start and does the same ``put_back``.
Blocking file I/O goes through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkctl.core.keepalive import format_seconds
from sparkctl.core.names import model_key
from sparkctl.core.oserrors import disk_problem
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.residency import (EXPIRED, KEEP, KEPT_LOADED, LANE_KEPT, RESTORE, RETIRED, UNLOAD, find, plan,
                                    snapshot, verify)
from sparkctl.engines.base import EngineError
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.tracking.residency_journal import FAILED, ResidencyJournal

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(timezone.utc)

# ---- putting things back ------------------------------------------------------------------


async def put_back(engine, j: ResidencyJournal, say: Callable[[str], None],
                   lane_now: Callable[[str], str | None] | None = None) -> LaneRestore:
    """Make the engine's residency what `j.before` says: unload what the bench loaded, load
    back (with its context and session) what it unloaded or reloaded, verify each from
    /api/ps. `lane_now`: the lanes, when they changed while the bench ran (core.residency.plan).
    Never raises for the engine: failures are in the result."""
    out = LaneRestore()
    lanes = {h.name for h in j.before if h.lane}
    try:
        resident = await engine.ps()
    except EngineError as exc:
        why = redact_text(exc.message)
        for h in j.before:
            out.failed.append(f"{h.name}: cannot read the engine's resident models ({why})")
        out.lane_models |= lanes
        for m in j.models:
            if not any(model_key(h.name) == model_key(m) for h in j.before) and not j.keep_loaded:
                out.leftover.append(f"{m}: cannot read the engine's resident models ({why})")
        return out
    now = _now()
    for step in plan(j.before, j.models, j.disturbed, resident, j.lane_keep_alive, now, j.keep_loaded, lane_now,
                     j.sessions):
        if step.kind == UNLOAD:
            say(f"unloading {step.name}: {step.why}")
            try:
                await engine.unload(step.name)
                out.unloaded.append(step.name)
            except EngineError as exc:
                out.leftover.append(f"{step.name}: {redact_text(exc.message)}")
        elif step.kind == KEPT_LOADED:
            out.kept_loaded.append(step.name)
        elif step.kind == RETIRED:
            say(f"not putting back {step.name}: {step.why}")
            out.lane_changed.append(f"{step.name}: not put back, {step.why}")
        elif step.kind == LANE_KEPT:
            out.lane_changed.append(f"{step.name}: left loaded, {step.why}")
        elif step.kind == EXPIRED:
            out.expired.append(step.name)
        elif step.kind == KEEP:
            out.untouched.append(step.name)
        elif step.kind == RESTORE:
            await _restore_one(engine, step, say, out, now)
    out.lane_models |= lanes
    return out


async def _restore_one(engine, step, say, out: LaneRestore, planned_at: datetime) -> None:
    h, session = step.held, step.session
    assert h is not None and session is not None
    target = f"context {h.context_length or 'n/a'}, {session.describe()}"
    say(f"restoring {h.title} ({step.why}) to {target}")
    options = {"num_ctx": h.context_length} if h.context_length else None
    try:
        await engine.load(h.name, keep_alive=session.wire, options=options)
        now = _now()
        problems = verify(h, session, find(await engine.ps(), h.name), now)
    except EngineError as exc:
        out.failed.append(f"{h.name}: restore to {target} failed: {redact_text(exc.message)}")
        return
    if problems:
        out.failed.append(f"{h.name}: after the restore still {', '.join(problems)}")
        return
    kept = "" if session.exact else (f" from {session.source.split(':')[0]}" if session.wire is not None else "")
    lost = "" if session.exact else ", a whole session: the time it had left cannot be kept"
    out.restored.append(f"{h.title} (context {h.context_length or 'n/a'}, keep-alive {session.label}{kept}{lost})")
    if not session.exact and h.expires_at is not None:
        left = (h.expires_at - planned_at).total_seconds()
        had = f"the {format_seconds(max(0, round(left)))} it had left" if left > 0 else "its remaining time"
        out.notes.append(f"{h.title}: back with a whole session ({session.label}: {session.source}); "
                         f"{had} could not be kept exactly: Ollama restarts a model's session at each request")


# ---- the guard a runner holds -------------------------------------------------------------


class ResidencyGuard:
    """What one bench (or sweep, or eval) borrowed from the engine's residency.

    Inactive for engines that cannot report what is resident (OpenAI-compatible servers
    serve one fixed model): nothing is journaled, nothing put back."""

    def __init__(self, cfg, engine, models: Iterable[str], *, kind: str = "bench", mode: str = "beside",
                 keep_loaded: bool = False, directory: Path | None = None, disturbs: Iterable[str] = (),
                 lane_of: Callable[[str], str | None] | None = None, lane: str = "") -> None:
        self.cfg = cfg
        self.engine = engine
        self.models = list(dict.fromkeys(models))
        self.kind = kind
        self.mode = mode
        self.keep_loaded = keep_loaded
        self.directory = directory
        self.active = hasattr(engine, "ps") and getattr(engine, "reports_placement", True)
        self.journal: ResidencyJournal | None = None
        self._held: set[str] = set()
        self._disturbs = {model_key(m) for m in disturbs}  # other models it will unload (promote --swap)
        self._lane_of = lane_of or cfg.lane_of
        self.lane = lane  # a promotion's lane: recovery leaves a switch that went through alone
        self._owned_before: Any = None  # sparkctl's own state file as the bench began (its lanes)

    async def begin(self, num_ctx: Callable[[str], int], say: Callable[[str], None]) -> None:
        """Note what is resident and journal it, before the bench touches anything."""
        if not self.active:
            return
        from sparkctl.services.bench.lock import engine_key
        from sparkctl.tracking.owner import current_owner

        if not self.lane:  # a bench, sweep or eval: lanes are read again at its end
            self._owned_before = await asyncio.to_thread(self._read_owned)
        now = _now()
        before = snapshot(await self.engine.ps(), self._lane_of, now)
        self._held = {h.key for h in before}
        bench = {model_key(m) for m in self.models}
        disturbed = self._disturbs & self._held
        for h in before:
            if h.key not in bench:
                if self.mode == "solo":
                    disturbed.add(h.key)  # solo unloads every other model first
                continue
            ctx = num_ctx(next(m for m in self.models if model_key(m) == h.key))
            if (self.mode == "solo" and len(self.models) > 1) or (h.context_length and ctx != h.context_length):
                disturbed.add(h.key)  # unloaded for another model's turn, or reloaded at the bench's context
        self.journal = ResidencyJournal(
            secrets.token_hex(8), engine_key(self.engine.host), redact_uri(self.engine.host), self.kind,
            self.models, self.mode, self.keep_loaded, before, sorted(disturbed),
            dict(getattr(self.cfg, "lane_keep_alive", {}) or {}), {}, now.isoformat(timespec="seconds"),
            lane=self.lane, lanes={ln: m for ln, m in (getattr(self.cfg, "lanes", {}) or {}).items() if m},
            sessions=await self._own_sessions(before, now))
        try:
            self.journal.owner = await asyncio.to_thread(current_owner)
            await asyncio.to_thread(self.journal.save, self.directory)
        except OSError as exc:  # a full disk must not stop the bench; a crash would then leave it to the user
            say(f"residency journal not written ({disk_problem(exc)}): if this process dies, what the bench changed "
                "cannot be put back at the next start")
            self.journal.path = None

    async def _own_sessions(self, before, now) -> dict[str, str]:
        """The keep-alive sparkctl loaded each resident model with (its state file),
        where that is still the model's session: put back with it, not the engine's
        default. Unreadable state: none (the engine's default, said as before)."""
        from sparkctl.core.residency import session_still_set
        from sparkctl.statefile import StateError, read_state

        state_file = getattr(self.cfg, "state_file", None)
        try:
            state = await asyncio.to_thread(read_state, Path(state_file) if state_file else None)
        except StateError:
            return {}
        own = {model_key(m): kept for m, kept in state.sessions.items()}
        return {h.key: own[h.key].keep_alive for h in before
                if h.key in own and session_still_set(h, own[h.key].keep_alive, now, own[h.key].set_at)}

    def was_resident(self, model: str) -> bool:
        return model_key(model) in self._held

    def loads(self, model: str) -> bool:
        """Whether measuring `model` starts with a load: it was not resident, or this run
        unloads or reloads it (another context, solo turns). Unknown (no journal): True."""
        if not self.active or self.journal is None:
            return True
        key = model_key(model)
        return key not in self._held or key in self.journal.disturbed

    def keep_alive(self, model: str, bench_keep_alive: Any) -> Any:
        """What a request to `model` carries: nothing for a model that was resident (Ollama
        keeps its runner's session), the bench's keep-alive for one the bench loads."""
        return None if self.was_resident(model) else bench_keep_alive

    async def discard(self) -> None:
        """What the caller changed is what the user wanted (a promotion went through): forget
        the journal, put nothing back."""
        if self.journal is not None and self.journal.path is not None:
            try:
                await asyncio.to_thread(self.journal.remove)
            except OSError as exc:
                log.warning("residency journal %s not removed: %s", self.journal.path, exc)

    def _read_owned(self) -> Any:
        """sparkctl's own state file (lanes promotions wrote), or None without one."""
        path = getattr(self.cfg, "state_file", "")
        if not path:
            return None
        from sparkctl.statefile import StateError, read_state

        try:
            return read_state(Path(path))
        except (StateError, OSError):
            return None

    async def lanes_now(self) -> Callable[[str], str | None] | None:
        """The lanes as they are now, when a lane change (a promotion or rollback, written to
        sparkctl's own state file) happened since `begin`; None when none did."""
        before = self._owned_before
        if before is None:
            return None
        after = await asyncio.to_thread(self._read_owned)
        if after is None or after.lanes == before.lanes:
            return None
        lanes = dict(self.cfg.lanes)
        for lane in set(before.lanes) | set(after.lanes):
            if lane in after.lanes:
                lanes[lane] = after.lanes[lane]
            elif lane in before.lanes:  # rolled back to the user's own value, which the file kept as its base
                lanes[lane] = before.base.get(f"lanes.{lane}", "")
        keys = {model_key(m): ln for ln, m in lanes.items() if m}
        return lambda name: keys.get(model_key(name))

    async def end(self, say: Callable[[str], None]) -> LaneRestore:
        """Put everything back, verify, and drop the journal (or mark it failed). Lanes are
        read again first: what a lane change meanwhile made of them wins (core.residency)."""
        if not self.active or self.journal is None:
            return LaneRestore()
        try:
            lane_now = await self.lanes_now()
            out = await put_back(self.engine, self.journal, say, lane_now)
        except Exception as exc:  # the engine went away mid-way: say so on the runs, keep the journal
            out = LaneRestore(failed=[redact_text(f"lane restore not possible: {exc}")])
        if self.journal.path is not None:
            try:
                if out.ok and not out.leftover:
                    await asyncio.to_thread(self.journal.remove)
                else:
                    self.journal.state = FAILED
                    self.journal.failures = out.failed + out.leftover
                    await asyncio.to_thread(self.journal.save)
            except OSError as exc:
                log.warning("residency journal %s not updated: %s", self.journal.path, exc)
        return out
