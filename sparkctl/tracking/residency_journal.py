"""The residency journal: what a bench found resident, written before it touches anything.

One JSON file per bench in ``<data dir>/residency/`` (beside the run spool), written
atomically and durably (temp file, fsync, rename, fsync of the directory), mode 0600, never
through a symlink. It holds no credential: the engine is named by its lock key and its
redacted URL, and recovery matches the key against the engines of the config. The bench
removes it once everything is back as it was; one left behind is either a bench still
running (its owner alive), a dead one (recover at the next start), or a restore that failed
(state "failed": warned in the dashboard and `status` until `sparkctl lanes --restore`).
Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkctl.core.residency import Held
from sparkctl.core.safeload import load_json
from sparkctl.tracking.spool import _fsync_dir  # the spool's: after a rename, the directory too

log = logging.getLogger(__name__)

JOURNAL_VERSION = 1
JOURNAL_MAX_BYTES = 1 << 20  # a journal lists a few models: a few KiB
RUNNING, FAILED = "running", "failed"


def journal_dir() -> Path:
    from sparkctl import paths

    return paths.residency_dir()


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
    lane: str = ""  # a promotion or rollback: the lane it switches (done once the lane serves models[0])
    # the lanes as the bench began (lane -> model): a repair after its death compares them with
    # the lanes then, so a lane changed meanwhile keeps its new model (None: an older journal)
    lanes: dict[str, str] | None = None
    path: Path | None = None
    # model key -> the keep-alive sparkctl loaded it with (the state file's [sessions]), for
    # the models resident before whose session is still that one
    sessions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": JOURNAL_VERSION, "id": self.id, "engine_key": self.engine_key, "engine": self.engine,
                "kind": self.kind, "models": self.models, "mode": self.mode, "keep_loaded": self.keep_loaded,
                "before": [h.to_dict() for h in self.before], "disturbed": self.disturbed,
                "lane_keep_alive": self.lane_keep_alive, "owner": self.owner, "started": self.started,
                "state": self.state, "failures": self.failures, "lane": self.lane, "sessions": self.sessions,
                **({"lanes": self.lanes} if self.lanes is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | None = None) -> "ResidencyJournal":
        """From `to_dict`'s output; ValueError (or KeyError, TypeError) for anything else."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a journal is an object, not {type(d).__name__}")
        for key in ("models", "before", "disturbed", "failures"):
            if not isinstance(d.get(key) or [], list):
                raise ValueError(f"{key!r} is {type(d[key]).__name__}, not a list")
        for key in ("lane_keep_alive", "owner"):
            if not isinstance(d.get(key) or {}, Mapping):
                raise ValueError(f"{key!r} is {type(d[key]).__name__}, not an object")
        return cls(str(d["id"]), str(d["engine_key"]), str(d.get("engine", "")), str(d.get("kind", "bench")),
                   [str(m) for m in d.get("models") or []], str(d.get("mode", "beside")),
                   bool(d.get("keep_loaded")), [Held.from_dict(h) for h in d.get("before") or []],
                   [str(k) for k in d.get("disturbed") or []], dict(d.get("lane_keep_alive") or {}),
                   dict(d.get("owner") or {}), str(d.get("started", "")), str(d.get("state", RUNNING)),
                   [str(f) for f in d.get("failures") or []], str(d.get("lane") or ""),
                   {str(k): str(v) for k, v in d["lanes"].items()} if isinstance(d.get("lanes"), dict) else None,
                   path, {str(k): str(v) for k, v in (d.get("sessions") or {}).items()
                          } if isinstance(d.get("sessions"), dict) else {})

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
            out.append(ResidencyJournal.from_dict(load_json(p.read_bytes(), max_bytes=JOURNAL_MAX_BYTES), p))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("residency journal %s unreadable, skipped (%s)", p, exc)
    return out


def owner_dead(j: ResidencyJournal) -> bool:
    from sparkctl.tracking.owner import DEAD, owner_state

    return owner_state(j.owner)[0] == DEAD


def residency_warnings(directory: Path | None = None) -> list[str]:
    """Loud lines for the dashboard and `status`: restores that failed, and dead benches whose
    changes are not put back yet. Blocking (reads a small directory)."""
    out = []
    for j in read_journals(directory):
        if j.state == FAILED:
            out.append(f"models not put back after {j.describe()}: " + "; ".join(j.failures)
                       + " (`sparkctl lanes --restore` tries again)")
        elif j.state == RUNNING and owner_dead(j):
            out.append(f"{j.describe()} died; what it changed is not put back yet (`sparkctl lanes --restore`)")
    return out
