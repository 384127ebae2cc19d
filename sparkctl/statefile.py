"""The file sparkctl owns: lane changes (promote, rollback), the theme chosen in the TUI,
the contenders (models side-loaded from the TUI to be evaluated for a lane) and the
keep-alive sessions sparkctl set when it loaded a model (``[sessions]``).

sparkctl never rewrites the user's hand-written ``sparkctl.toml`` (its comments are theirs).
What sparkctl decides goes here instead, ``~/.config/sparkctl/state.toml`` by default
(``$SPARKCTL_STATE_FILE`` overrides), and ``config.load_config`` layers it over the user's
file. Next to each owned value the file keeps the user's value at the moment it was
written (``[base]``): when the user later edits that key in their own file, their edit
wins and the owned value is ignored (``sparkctl config`` says so) instead of silently
shadowing it forever.

Writes are safe against the two ways a small config file gets lost:

- **concurrent writers** (two ``sparkctl promote`` at once, a promotion while the TUI
  saves a theme): every update takes an exclusive ``flock`` on a lock file beside the
  state file, re-reads the state *under the lock*, applies its change and writes. Updates
  are serialised; none is lost. The lock file is separate because the rename below
  replaces the state file's inode, and a lock on a replaced inode locks nothing.
- **a crash mid-write** (kill -9, power cut): the new text goes to a temp file in the
  same directory, is fsynced, then renamed over the old file (atomic on POSIX), and the
  directory is fsynced so the rename itself is durable. A reader sees the old file or the
  new one, never half of either; a dead writer leaves at most a stray ``.tmp`` file.

Stdlib + tomli-w only; no services, no Textual, no MLflow.
"""

from __future__ import annotations

import fcntl
import os
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkctl import paths

STATE_VERSION = 1
HISTORY_MAX = 200  # entries kept; older ones are dropped (MLflow keeps the full record)
ACTIONS = ("promote", "rollback")
# Test hook: seconds to sleep after the temp file is written and fsynced, before the
# rename; lets a test kill -9 the writer at the worst moment. Never set in normal use.
PAUSE_ENV = "SPARKCTL_TEST_STATE_PAUSE_S"

HEADER = """\
# Written by sparkctl; do not edit by hand (edit your sparkctl.toml instead).
# Lane changes from `sparkctl promote` / `sparkctl rollback`, the theme chosen in the TUI,
# the models it marks contender and the keep-alive it loaded each model with, layered over
# your sparkctl.toml. [base] holds what your file said when each value was written: change
# that key in your own file and your value wins again.
# `sparkctl config` shows which file every value comes from.

"""


class StateError(Exception):
    """The owned file is unreadable or malformed: one line naming the file and key."""


class StateConflict(Exception):
    """The state changed under an update (another sparkctl wrote it first)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One lane change, newest last in ``OwnedState.history``."""

    seq: int
    action: str  # "promote" | "rollback"
    lane: str
    model: str
    previous: str  # "" when the lane had no model
    at: str  # ISO 8601, UTC
    user: str = ""
    host: str = ""
    engine: str = ""  # "ollama 0.12.6"
    forced: bool = False
    overridden: tuple[str, ...] = ()  # unmet preconditions --force went past
    evidence: tuple[str, ...] = ()  # MLflow run ids that justified it
    record_id: str = ""  # the promotion's own MLflow record (sparkctl.record_id tag)
    digest: str = ""
    previous_digest: str = ""
    undoes: int = 0  # rollback: the seq of the change it undid
    previous_ctx: int = 0  # the context `previous` ran at (a rollback loads it so again); 0 unknown

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in vars(self).items():
            out[key] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_toml(cls, data: Any, origin: str, i: int) -> HistoryEntry:
        where = f"{origin}: [[history]] #{i + 1}"
        if not isinstance(data, dict):
            raise StateError(f"{where}: expected a table")
        types: dict[str, type | tuple[type, ...]] = {
            "seq": int, "action": str, "lane": str, "model": str, "previous": str, "at": str,
            "user": str, "host": str, "engine": str, "forced": bool, "overridden": list,
            "evidence": list, "record_id": str, "digest": str, "previous_digest": str, "undoes": int,
            "previous_ctx": int,
        }
        values: dict[str, Any] = {}
        for key, value in data.items():
            want = types.get(key)
            if want is None:
                continue  # written by a newer sparkctl: ignored, not fatal
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise StateError(f"{where} {key}: expected {getattr(want, '__name__', want)}, got {value!r}")
            values[key] = tuple(str(v) for v in value) if isinstance(value, list) else value
        for key in ("seq", "action", "lane", "model", "at"):
            if key not in values:
                raise StateError(f"{where}: missing key {key}")
        if values["action"] not in ACTIONS:
            raise StateError(f"{where} action: expected one of {', '.join(ACTIONS)}, got {values['action']!r}")
        values.setdefault("previous", "")
        return cls(**values)


@dataclass(frozen=True)
class KeptSession:
    """The keep-alive sparkctl loaded a model with, and when. The time tells a session that
    is still sparkctl's from a later one another client started: a session set at `set_at`
    for L cannot end before set_at + L while it lasts (a request only pushes the end later),
    so an earlier end belongs to someone else's load. None: written before sparkctl kept
    the time (only the length can be checked)."""

    keep_alive: str
    set_at: datetime | None = None

    def to_toml(self) -> dict[str, Any]:
        return {"keep_alive": self.keep_alive, **({"set_at": self.set_at} if self.set_at else {})}


@dataclass(frozen=True)
class OwnedState:
    """What the owned file says. ``base`` maps "lanes.NAME" / "ui.theme" to the user's
    value when the owned one was written ("" = the user's file had no such key)."""

    path: Path
    lanes: dict[str, str] = field(default_factory=dict)
    theme: str = ""
    base: dict[str, str] = field(default_factory=dict)
    history: tuple[HistoryEntry, ...] = ()
    # models loaded beside production to be evaluated for a lane (the TUI's "contender"
    # mark), until promoted, unloaded or deleted from sparkctl
    contenders: tuple[str, ...] = ()
    # contender -> the lane it is evaluated for, as the Models screen's load recorded it: a
    # bench or eval of it alone runs at that lane model's context (services/bench/context.py)
    contender_lanes: dict[str, str] = field(default_factory=dict)
    # the keep-alive sparkctl last loaded each model with (`load --keep-alive`, the Models
    # screen): a bench that had to reload the model gives it back that session instead of
    # the engine's default. Oldest first (the order they were set in, kept in the file):
    # past SESSIONS_MAX the oldest go. sparkctl's unload and delete forget a model's entry.
    sessions: dict[str, KeptSession] = field(default_factory=dict)

    @property
    def next_seq(self) -> int:
        return max((h.seq for h in self.history), default=0) + 1

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": STATE_VERSION}
        if self.contenders:
            out["contenders"] = list(self.contenders)
        if self.contender_lanes:
            out["contender_lanes"] = dict(self.contender_lanes)
        if self.theme:
            out["ui"] = {"theme": self.theme}
        if self.lanes:
            out["lanes"] = dict(sorted(self.lanes.items()))
        if self.base:
            out["base"] = dict(sorted(self.base.items()))
        if self.sessions:  # not sorted: the order is the age the trim goes by
            out["sessions"] = {m: kept.to_toml() for m, kept in self.sessions.items()}
        if self.history:
            out["history"] = [h.to_toml() for h in self.history[-HISTORY_MAX:]]
        return out

    def dumps(self) -> str:
        import tomli_w

        return HEADER + tomli_w.dumps(self.to_toml())


# sparkctl writes a few KiB here; anything far larger is not its file
STATE_MAX_BYTES = 1 << 20


def state_path(env: dict[str, str] | None = None) -> Path:
    return paths.state_file(env)


def parse_state(text: str, path: Path) -> OwnedState:
    from sparkctl.core.safeload import Unparsable, load_toml

    origin = str(path)
    try:
        raw = load_toml(text, max_bytes=STATE_MAX_BYTES)
    except (tomllib.TOMLDecodeError, Unparsable) as exc:
        raise StateError(f"{origin}: invalid TOML: {exc} (sparkctl writes this file; "
                         "move it away to start afresh)") from None
    version = raw.get("version", STATE_VERSION)
    if not isinstance(version, int) or version > STATE_VERSION:
        raise StateError(f"{origin}: version: written by a newer sparkctl (version {version!r}); upgrade sparkctl")

    def table(name: str) -> dict[str, Any]:
        value = raw.get(name, {})
        if not isinstance(value, dict):
            raise StateError(f"{origin}: [{name}]: expected a table")
        return value

    def strings(name: str) -> dict[str, str]:
        out = {}
        for key, value in table(name).items():
            if not isinstance(value, str):
                raise StateError(f"{origin}: [{name}] {key}: expected a string, got {value!r}")
            out[key] = value
        return out

    lanes = strings("lanes")
    from sparkctl.core.names import InvalidModelName, validate_model_name

    for lane, model in lanes.items():
        try:
            validate_model_name(model)
        except InvalidModelName as exc:
            raise StateError(f"{origin}: [lanes] {lane}: {exc}") from None
    contenders = raw.get("contenders", [])
    if not isinstance(contenders, list) or not all(isinstance(m, str) for m in contenders):
        raise StateError(f"{origin}: contenders: expected an array of model names")
    for model in contenders:
        try:
            validate_model_name(model)
        except InvalidModelName as exc:
            raise StateError(f"{origin}: contenders: {exc}") from None
    ui = strings("ui")
    history_raw = raw.get("history", [])
    if not isinstance(history_raw, list):
        raise StateError(f"{origin}: history: expected an array of tables")
    history = tuple(HistoryEntry.from_toml(h, origin, i) for i, h in enumerate(history_raw))
    sessions = {model: _kept_session(value, f"{origin}: [sessions] {model}")
                for model, value in table("sessions").items()}
    return OwnedState(path=path, lanes=lanes, theme=ui.get("theme", ""), base=strings("base"), history=history,
                      contenders=tuple(contenders), sessions=sessions, contender_lanes=strings("contender_lanes"))


def _kept_session(value: Any, where: str) -> KeptSession:
    if isinstance(value, str):  # a file from before sparkctl kept the time
        return KeptSession(value)
    if not isinstance(value, dict) or not isinstance(value.get("keep_alive"), str):
        raise StateError(f"{where}: expected a table with keep_alive (a string), got {value!r}")
    set_at = value.get("set_at")
    if set_at is not None and not isinstance(set_at, datetime):
        raise StateError(f"{where}: set_at: expected a date-time, got {set_at!r}")
    if set_at is not None and set_at.tzinfo is None:
        set_at = set_at.replace(tzinfo=timezone.utc)  # sparkctl writes UTC
    return KeptSession(value["keep_alive"], set_at)


def read_state(path: Path | None = None) -> OwnedState:
    """The owned state; an empty one when the file does not exist."""
    path = path or state_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return OwnedState(path=path)
    except UnicodeDecodeError:
        raise StateError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise StateError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_state(text, path)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive writer lock of the state file at ``path`` (blocks until free)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def write_atomic(path: Path, text: str) -> None:
    """temp file in the same dir -> fsync -> rename over ``path`` -> fsync the dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import secrets  # only here: every command reads this file, few write it

    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        pause = os.environ.get(PAUSE_ENV)
        if pause:
            time.sleep(float(pause))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def update_state(change: Callable[[OwnedState], OwnedState], path: Path | None = None) -> OwnedState:
    """Apply ``change`` to the current state under the writer lock and write the result.

    ``change`` sees the state as it is on disk now (another process may have written since
    the caller last looked) and may raise ``StateConflict`` to abort without writing."""
    path = path or state_path()
    with locked(path):
        new = change(read_state(path))
        write_atomic(path, new.dumps())
        return new


def set_owned(state: OwnedState, key: str, value: str, user_value: str) -> OwnedState:
    """Set owned ``key`` ("lanes.NAME" or "ui.theme") to ``value`` over the user's
    ``user_value`` ("" when absent). A value equal to the user's drops the override:
    the owned file then says nothing about that key."""
    lanes, base, theme = dict(state.lanes), dict(state.base), state.theme
    section, _, name = key.partition(".")
    if value == user_value:
        base.pop(key, None)
        if section == "lanes":
            lanes.pop(name, None)
        else:
            theme = ""
    else:
        base[key] = user_value
        if section == "lanes":
            lanes[name] = value
        else:
            theme = value
    return replace(state, lanes=lanes, base=base, theme=theme)


def save_theme(theme: str, user_theme: str, path: Path | None = None) -> OwnedState:
    """Persist the theme chosen in the TUI (``user_theme``: the user's file's own
    ``[ui] theme``, "" when it has none)."""
    return update_state(lambda s: set_owned(s, "ui.theme", theme, user_theme), path)


SESSIONS_MAX = 200  # models remembered; the oldest entries go first


def record_session(model: str, keep_alive: str, path: Path | None = None,
                   now: datetime | None = None) -> OwnedState:
    """Remember the keep-alive sparkctl loaded `model` with, and when (one entry per model,
    the newest last)."""
    from sparkctl.core.names import model_key

    at = (now or datetime.now(timezone.utc)).replace(microsecond=0)

    def change(state: OwnedState) -> OwnedState:
        kept = {m: s for m, s in state.sessions.items() if model_key(m) != model_key(model)}
        kept[model] = KeptSession(keep_alive, at)
        return replace(state, sessions=dict(list(kept.items())[-SESSIONS_MAX:]))

    return update_state(change, path)


def forget_session(model: str, path: Path | None = None) -> None:
    """Drop `model`'s entry: sparkctl unloaded or deleted it, so the session it set is over
    (a later load by another client must not get it back). No entry: the file is left as
    it is."""
    from sparkctl.core.names import model_key

    if not any(model_key(m) == model_key(model) for m in read_state(path).sessions):
        return
    update_state(lambda s: replace(s, sessions={m: k for m, k in s.sessions.items()
                                                if model_key(m) != model_key(model)}), path)


def mark_contender(model: str, on: bool, path: Path | None = None, lane: str = "") -> OwnedState:
    """Mark `model` contender (on) for `lane` ("" none said) or clear its mark, against what
    the file says now (another sparkctl may have marked others meanwhile)."""
    from sparkctl.core.names import model_key

    def change(state: OwnedState) -> OwnedState:
        kept = [m for m in state.contenders if model_key(m) != model_key(model)]
        lanes = {m: ln for m, ln in state.contender_lanes.items() if model_key(m) != model_key(model)}
        if on and lane:
            lanes[model] = lane
        return replace(state, contenders=tuple(kept + [model] if on else kept), contender_lanes=lanes)

    return update_state(change, path)
