"""The fleet's state: every host asked in parallel, at most one ssh session per host.

``FleetPoller.refresh()`` starts an ask for every host that has none running and returns
when those have answered (each within [fleet] timeout_s); a host still being asked from
the last refresh is left to finish, never asked twice at once. Each answer is handed to
``on_update`` as it comes, so a fast host shows while a slow one is still timing out.

A host that answered is remembered on disk (its status JSON and when), so a host that is
down now is shown with its last known state and that state's age, across restarts too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkctl.config import Config, HostConfig
from sparkctl.core.host_status import (
    STATUS_SCHEMA,
    HostStatus,
    LaneBench,
    StatusFormatError,
    age_label,
    fleet_warnings,
    lane_table,
    parse_status,
    schema_note,
)
from sparkctl.core.safeload import load_json
from sparkctl.core.termtext import safe_tree
from sparkctl.services.fleet.ssh import MAX_OUTPUT, Answer, ask_status

# the state of a host in the fleet view
LIVE = "live"  # answered; its engine answered too
ENGINE_DOWN = "engine-down"  # answered; its engine did not
ENGINE_ERROR = "engine-error"  # answered; its engine answered with an error
UNREACHABLE = "unreachable"  # no status (see HostView.failure for why)
WAITING = "waiting"  # not asked yet


@dataclass(frozen=True)
class HostView:
    """One row of the fleet: the host's latest status or, when it gave none, why, with the
    last status it did give and when it gave it."""

    host: HostConfig
    state: str = WAITING
    status: HostStatus | None = None  # current when live/engine-*, else the last known one
    seen_at: datetime | None = None  # when `status` was read
    checked_at: datetime | None = None  # when the host was last asked
    failure: str | None = None  # ssh.SSH_ERROR, MISSING, TOO_OLD, TIMEOUT, BAD_ANSWER, REMOTE_ERROR
    reason: str = ""
    benches: tuple[LaneBench, ...] = ()  # lane models' last benches on this host (tracking store)

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def current(self) -> bool:
        """The status is from the last ask, not a remembered one."""
        return self.state in (LIVE, ENGINE_DOWN, ENGINE_ERROR)

    def age_s(self, now: datetime) -> float | None:
        return None if self.seen_at is None else (now - self.seen_at).total_seconds()

    @property
    def schema_note(self) -> str | None:
        return schema_note(self.status.schema) if self.status is not None else None

    @property
    def warnings(self) -> list[str]:
        if self.status is None:
            return []
        out = fleet_warnings(self.status, self.host.lanes or None, self.benches) if self.current else []
        # the host's own hint names a command to run there, not here
        out = [w.replace("(`sparkctl lanes --restore`)", f"(run `sparkctl lanes --restore` on {self.name})")
               for w in out]
        note = self.schema_note
        return out + ([note] if note else [])

    @property
    def lanes(self) -> tuple[tuple[str, str, bool], ...] | None:
        return lane_table(self.status, self.host.lanes or None) if self.status is not None and self.current else None

    def to_dict(self, now: datetime) -> dict[str, Any]:
        s = self.status
        age = self.age_s(now)
        out: dict[str, Any] = {
            "name": self.name,
            "ssh": self.host.destination,
            "state": self.state,
            "failure": self.failure,
            "reason": self.reason or None,
            "checked_at": self.checked_at.isoformat() if self.checked_at else None,
            "seen_at": self.seen_at.isoformat() if self.seen_at else None,
            "age_s": None if age is None else round(age, 1),
            "age": age_label(age) if age is not None else None,
            "status_is_current": self.current,
            "status_schema": s.schema if s else None,
            "older_sparkctl": bool(s and s.schema < STATUS_SCHEMA),
            "note": self.schema_note,
            "warnings": self.warnings,
            "hardware": None,
            "last_bench": [
                {"lane": b.lane, "model": b.model, "engine_version": b.engine_version, "decode_tps": b.decode_tps,
                 "start_ms": b.start_ms} for b in self.benches],
            "status": s.raw if s else None,
        }
        if s is not None:
            hw = s.hardware
            out["hardware"] = {"gpu": hw.gpu, "memory_gib": hw.memory_gib, "driver": hw.driver, "label": hw.label}
            out["lanes"] = None if self.lanes is None else [
                {"lane": lane, "model": model, "resident": resident} for lane, model, resident in self.lanes]
        return out


def state_of(status: HostStatus) -> str:
    return {"up": LIVE, "down": ENGINE_DOWN, "error": ENGINE_ERROR}[status.engine_state]


# A host name that is safe as a file name as it stands: no '/', no leading dot (so never
# '.' or '..'), nothing a shell or a terminal treats specially, not too long.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")


def cache_file_name(name: str) -> str:
    """The cache file of host `name`. Names come from the command line and from an ssh
    config's Host lines, so they are not trusted as paths: a plain name keeps its own file
    name (readable in the data dir), any other is hashed; a hashed name starts with '_',
    which no plain one does, so the two can never meet."""
    if _PLAIN_NAME.fullmatch(name):
        return f"{name}.json"
    return "_" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json"


def default_cache_dir() -> Path:
    from sparkctl import paths

    return paths.data_dir() / "fleet"


class FleetPoller:
    """Asks hosts for their status; owns each host's HostView. Async; the file reads and
    writes of the last-known cache go to a thread."""

    def __init__(self, cfg: Config, hosts: list[HostConfig], *, cache_dir: Path | None = None,
                 on_update: Callable[[HostView], Any] | None = None,
                 clock: Callable[[], datetime] | None = None, ask=ask_status) -> None:
        self.cfg = cfg
        self.hosts = list(hosts)
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.on_update = on_update
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self._ask = ask
        self.views: dict[str, HostView] = {h.name: HostView(h) for h in self.hosts}
        self._inflight: dict[str, asyncio.Task] = {}
        self.asks_started: dict[str, int] = {h.name: 0 for h in self.hosts}
        self._loaded = False

    # ---- the last known state, on disk ----------------------------------------------------

    def _cache_path(self, name: str) -> Path:
        path = self.cache_dir / cache_file_name(name)
        if path.parent != self.cache_dir:  # cannot happen with cache_file_name; never write outside it
            raise OSError(f"fleet cache name {name!r} leaves {self.cache_dir}")
        return path

    def _read_cache(self, name: str) -> tuple[HostStatus, datetime] | None:
        try:
            # O_NOFOLLOW: a link planted where the cache goes is not read
            fd = os.open(self._cache_path(name), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, encoding="utf-8") as fh:
                data = load_json(fh.read(MAX_OUTPUT + 1), max_bytes=MAX_OUTPUT)
            return parse_status(safe_tree(data["status"])), datetime.fromisoformat(data["seen_at"])
        except (OSError, ValueError, KeyError, TypeError, StatusFormatError):
            return None

    def _write_cache(self, name: str, raw: dict[str, Any], seen_at: datetime) -> None:
        from sparkctl.paths import atomic_write_text

        try:
            atomic_write_text(self._cache_path(name), json.dumps({"seen_at": seen_at.isoformat(), "status": raw}))
        except OSError:
            pass  # a cache that cannot be written costs the age after a restart, nothing else

    async def load_cache(self) -> None:
        """The last known state of every host, read once before the first ask."""
        if self._loaded:
            return
        self._loaded = True
        for h in self.hosts:
            found = await asyncio.to_thread(self._read_cache, h.name)
            view = self.views[h.name]
            if found is not None and view.status is None:
                self.views[h.name] = replace(view, status=found[0], seen_at=found[1])

    # ---- asking -------------------------------------------------------------------------

    def busy(self, name: str) -> bool:
        task = self._inflight.get(name)
        return task is not None and not task.done()

    async def refresh(self, names: list[str] | None = None) -> list[HostView]:
        """Ask every host (or ``names``) that is not being asked already; wait for those."""
        await self.load_cache()
        started = []
        for h in self.hosts:
            if (names is None or h.name in names) and not self.busy(h.name):
                self.asks_started[h.name] += 1
                task = asyncio.ensure_future(self._ask_one(h))
                self._inflight[h.name] = task
                started.append(task)
        if started:
            await asyncio.gather(*started, return_exceptions=True)
        return [self.views[h.name] for h in self.hosts]

    async def _ask_one(self, host: HostConfig) -> None:
        answer: Answer = await self._ask(host, self.cfg)
        now = self.clock()
        old = self.views[host.name]
        if answer.status is not None:
            view = replace(old, state=state_of(answer.status), status=answer.status, seen_at=now, checked_at=now,
                           failure=None, reason=answer.status.engine_error or "")
            await asyncio.to_thread(self._write_cache, host.name, answer.status.raw, now)
        else:
            view = replace(old, state=UNREACHABLE, checked_at=now, failure=answer.failure, reason=answer.reason)
        self.views[host.name] = view
        if self.on_update is not None:
            self.on_update(view)

    def set_benches(self, name: str, benches: tuple[LaneBench, ...]) -> HostView:
        view = replace(self.views[name], benches=benches)
        self.views[name] = view
        return view

    async def close(self) -> None:
        """Cancel asks still running (each ends its ssh before returning)."""
        tasks = [t for t in self._inflight.values() if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class FleetReport:
    at: datetime
    views: list[HostView] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "hosts": [v.to_dict(self.at) for v in self.views],
                "hardware_classes": hardware_groups(self.views)}


def hardware_groups(views: list[HostView]) -> list[dict[str, Any]]:
    """Hosts grouped by hardware class (GPU, memory, driver): only within one are their
    benches comparable without saying so."""
    groups: dict[str, list[str]] = {}
    for v in views:
        if v.status is not None:
            groups.setdefault(v.status.hardware.label, []).append(v.name)
    return [{"label": label, "hosts": names} for label, names in groups.items()]
