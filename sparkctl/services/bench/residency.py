"""Residency is borrowed, not taken: every model a bench finds resident is written down
before the bench touches anything, and put back (verified) when it ends, however it ends.

- ``ResidencyGuard.begin`` reads /api/ps and writes a journal file (fsynced) into
  ``<data dir>/residency/``, beside the run spool: what was resident (context, kept
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
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkctl.core.keepalive import format_seconds
from sparkctl.core.names import model_key
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.residency import EXPIRED, KEEP, KEPT_LOADED, RESTORE, UNLOAD, Held, find, plan, snapshot, verify
from sparkctl.engines.base import EngineError
from sparkctl.services.bench.lanes import LaneRestore

log = logging.getLogger(__name__)

JOURNAL_VERSION = 1
RUNNING, FAILED = "running", "failed"


def journal_dir() -> Path:
    from sparkctl import paths

    return paths.data_dir() / "residency"


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class ResidencyJournal:
    """One bench's record of what it found resident and what it will change."""

    id: str
    engine_key: str  # lock.engine_key of the engine: matched against the config at recovery
    engine: str  # the engine's URL, redacted (for messages)
    kind: str  # "bench", "sweep", "eval"
    models: list[str]
    mode: str
    keep_loaded: bool
    before: list[Held]
    disturbed: list[str]  # model keys whose runner the bench unloads or reloads
    lane_keep_alive: dict[str, Any]
    owner: dict[str, Any]
    started: str
    state: str = RUNNING
    failures: list[str] = field(default_factory=list)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"version": JOURNAL_VERSION, "id": self.id, "engine_key": self.engine_key, "engine": self.engine,
                "kind": self.kind, "models": self.models, "mode": self.mode, "keep_loaded": self.keep_loaded,
                "before": [h.to_dict() for h in self.before], "disturbed": self.disturbed,
                "lane_keep_alive": self.lane_keep_alive, "owner": self.owner, "started": self.started,
                "state": self.state, "failures": self.failures}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | None = None) -> "ResidencyJournal":
        return cls(str(d["id"]), str(d["engine_key"]), str(d.get("engine", "")), str(d.get("kind", "bench")),
                   [str(m) for m in d.get("models") or []], str(d.get("mode", "beside")),
                   bool(d.get("keep_loaded")), [Held.from_dict(h) for h in d.get("before") or []],
                   [str(k) for k in d.get("disturbed") or []], dict(d.get("lane_keep_alive") or {}),
                   dict(d.get("owner") or {}), str(d.get("started", "")), str(d.get("state", RUNNING)),
                   [str(f) for f in d.get("failures") or []], path)

    def describe(self) -> str:
        pid = self.owner.get("pid", "?")
        when = self.started[11:19] if len(self.started) >= 19 else self.started
        return f"a {self.kind} of {', '.join(self.models) or '?'} (pid {pid}, started {when} UTC) on {self.engine}"

    # -- the file ---------------------------------------------------------------------------

    def save(self, directory: Path | None = None) -> Path:
        """Write atomically and durably (temp file, fsync, rename, fsync the directory): a
        power cut after this returns still leaves the journal. Blocking."""
        d = directory or (self.path.parent if self.path else journal_dir())
        d.mkdir(parents=True, exist_ok=True)
        path = self.path or d / f"{self.id}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        data = json.dumps(self.to_dict(), indent=1).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(d)
        self.path = path
        return path

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            _fsync_dir(self.path.parent)


def read_journals(directory: Path | None = None) -> list[ResidencyJournal]:
    """Every journal left in the directory (cheap when there is none: one stat). A file
    that cannot be read is logged and skipped, never fatal. Blocking."""
    d = directory or journal_dir()
    try:
        names = sorted(p for p in d.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for p in names:
        try:
            out.append(ResidencyJournal.from_dict(json.loads(p.read_text()), p))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("residency journal %s unreadable, skipped (%s)", p, exc)
    return out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- putting things back ------------------------------------------------------------------


async def put_back(engine, j: ResidencyJournal, say: Callable[[str], None]) -> LaneRestore:
    """Make the engine's residency what `j.before` says: unload what the bench loaded, load
    back (with its context and session) what it unloaded or reloaded, verify each from
    /api/ps. Never raises for the engine: failures are in the result."""
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
    for step in plan(j.before, j.models, j.disturbed, resident, j.lane_keep_alive, now, j.keep_loaded):
        if step.kind == UNLOAD:
            say(f"unloading {step.name}: {step.why}")
            try:
                await engine.unload(step.name)
                out.unloaded.append(step.name)
            except EngineError as exc:
                out.leftover.append(f"{step.name}: {redact_text(exc.message)}")
        elif step.kind == KEPT_LOADED:
            out.kept_loaded.append(step.name)
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
    out.restored.append(f"{h.title} (context {h.context_length or 'n/a'}, keep-alive {session.label})")
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
                 keep_loaded: bool = False, directory: Path | None = None) -> None:
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

    async def begin(self, num_ctx: Callable[[str], int], say: Callable[[str], None]) -> None:
        """Note what is resident and journal it, before the bench touches anything."""
        if not self.active:
            return
        from sparkctl.services.bench.lock import engine_key
        from sparkctl.tracking.owner import current_owner

        now = _now()
        before = snapshot(await self.engine.ps(), self.cfg.lane_of, now)
        self._held = {h.key for h in before}
        bench = {model_key(m) for m in self.models}
        disturbed = set()
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
            dict(getattr(self.cfg, "lane_keep_alive", {}) or {}), {}, now.isoformat(timespec="seconds"))
        try:
            self.journal.owner = await asyncio.to_thread(current_owner)
            await asyncio.to_thread(self.journal.save, self.directory)
        except OSError as exc:  # a full disk must not stop the bench; a crash would then leave it to the user
            say(f"residency journal not written ({exc}): if this process dies, what the bench changed "
                "cannot be put back at the next start")
            self.journal.path = None

    def was_resident(self, model: str) -> bool:
        return model_key(model) in self._held

    def keep_alive(self, model: str, bench_keep_alive: Any) -> Any:
        """What a request to `model` carries: nothing for a model that was resident (Ollama
        keeps its runner's session), the bench's keep-alive for one the bench loads."""
        return None if self.was_resident(model) else bench_keep_alive

    async def end(self, say: Callable[[str], None]) -> LaneRestore:
        """Put everything back, verify, and drop the journal (or mark it failed)."""
        if not self.active or self.journal is None:
            return LaneRestore()
        try:
            out = await put_back(self.engine, self.journal, say)
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
