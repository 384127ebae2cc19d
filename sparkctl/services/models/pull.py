"""Pulling a model: where the engine stores it (for the disk check), progress folded from
Ollama's pull lines, and the pull itself as an async generator of views.

The pull is an async generator of `PullView` snapshots so the caller decides how often
to paint; closing the generator closes the HTTP stream, which is Ollama's only way to
cancel (it keeps the partial blobs and the next pull resumes them).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sparkctl.core.fmt import gib, size
from sparkctl.core.names import validate_model_name
from sparkctl.core.engine_settings import ServerVariable
from sparkctl.core.snapshots import Unavailable
from sparkctl.engines.base import EngineError, EngineUnreachable, ModelNotFound, PullEvent
from sparkctl.services.models.common import _is_local


# ---------------------------------------------------------------------------- model store


@dataclass(frozen=True)
class ModelStore:
    """Where the engine keeps its blobs, when sparkctl can know it."""

    path: str | None
    why: str  # how it was found, or why it is unknown

    @property
    def known(self) -> bool:
        return self.path is not None



# Ollama's defaults: the Linux installer's service user keeps models under its home
# (/usr/share/ollama); `ollama serve` run by hand, and the container image (as root),
# keep them under ~/.ollama; some distribution packages use /var/lib/ollama.
DEFAULT_STORES = ("/usr/share/ollama/.ollama/models", "~/.ollama/models", "/var/lib/ollama/models",
                  "/var/lib/ollama")




def find_model_store(host: str, server: ServerVariable | None = None) -> ModelStore:
    """Where the server keeps models: its own OLLAMA_MODELS, read where its settings are read
    (its process environment, else its systemd unit: services/engine_settings.py), else the
    first of Ollama's default locations that exists; unknown for a remote engine. Never this
    shell's OLLAMA_MODELS: on a Spark the service sets its own. `server`: the variable as
    already read (else it is read here). Blocking (a /proc scan, stat() calls)."""
    if not _is_local(host):
        return ModelStore(None, f"the engine at {host} is on another machine")
    if server is None:
        from sparkctl.services.engine_settings import read_server_variable

        server = read_server_variable(host, "OLLAMA_MODELS")
    if server.value:
        # as the server takes it (Ollama does not expand ~); the store may not exist yet (a
        # first pull): its nearest existing parent holds it
        p = Path(server.value)
        while not p.exists() and p != p.parent:
            p = p.parent
        return ModelStore(str(p), f"from {server.source}")
    why = server.source if server.read else f"OLLAMA_MODELS not read: {server.source}"
    for candidate in DEFAULT_STORES:
        p = Path(candidate).expanduser()
        if p.is_dir():
            return ModelStore(str(p), f"Ollama's default location ({why})")
    return ModelStore(None, f"no model store found ({why})")


def _disk_free(path: str) -> int | Unavailable:
    from sparkctl.probes.host import disk_free

    return disk_free(path)


@dataclass(frozen=True)
class DiskCheck:
    path: str | None
    free: int | None
    needed: int | None  # bytes still to download, over the layers whose size is known
    ok: bool | None  # None: could not check
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "free": self.free, "needed": self.needed, "ok": self.ok, "note": self.note}


# ---------------------------------------------------------------------------- pull


def size_label(n: int | None) -> str:
    """Bytes for progress displays, where layers run from a few hundred bytes to 60 GiB."""
    return size(n)


def rate_label(bps: float | None) -> str:
    return f"{bps / 1e6:.1f} MB/s" if bps else "-- MB/s"


def eta_label(seconds: float | None) -> str:
    if seconds is None:
        return "ETA --"
    s = int(round(seconds))
    if s >= 3600:
        return f"ETA {s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"ETA {s // 60} min {s % 60:02d} s"
    return f"ETA {s} s"


@dataclass(frozen=True)
class LayerProgress:
    digest: str
    total: int | None  # None: the registry sent no size for this layer
    completed: int
    start_completed: int  # bytes already on disk when this pull first mentioned the layer
    state: str  # "present" (nothing to fetch), "resumed", "downloading", "done"

    @property
    def short(self) -> str:
        return self.digest.removeprefix("sha256:")[:12]

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.completed / self.total)


@dataclass(frozen=True)
class PullView:
    """What a progress display needs, at one moment of a pull."""

    model: str
    engine_version: str | None
    status: str  # the latest status line
    log: tuple[str, ...]  # status lines in order (layer progress lines excluded)
    layers: tuple[LayerProgress, ...]
    total: int | None  # bytes over the layers whose size is known; None before any
    completed: int
    percent: float | None  # None while no size is known (indeterminate)
    speed_bps: float | None
    eta_s: float | None
    elapsed_s: float
    sizes_unknown: bool  # some layer came without total/completed
    outcome: str | None = None  # None while running; "success", "failed", "cancelled"
    error: str | None = None
    error_kind: str | None = None  # "unreachable", "not_found", "newer_version", "engine", "disk"
    disk: DiskCheck | None = None

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "outcome": self.outcome,
            "error": self.error,
            "error_kind": self.error_kind,
            "engine_version": self.engine_version,
            "status": self.status,
            "status_log": list(self.log),
            "total": self.total,
            "completed": self.completed,
            "percent": self.percent,
            "elapsed_s": round(self.elapsed_s, 3),
            "sizes_unknown": self.sizes_unknown,
            "layers": [
                {"digest": layer.digest, "total": layer.total, "completed": layer.completed,
                 "already_present": layer.start_completed, "state": layer.state}
                for layer in self.layers
            ],
            "disk": self.disk.to_dict() if self.disk else None,
        }


NEWER_VERSION_MARK = "requires a newer version of ollama"
SPEED_WINDOW_S = 5.0


class PullTracker:
    """Folds Ollama's pull lines into per-layer and overall progress.

    Ollama fetches layers one after another, so the overall total grows as layers are
    announced; the weights come first and dominate it. Speed counts only bytes fetched by
    this pull (not bytes kept from an earlier, cancelled one), over a sliding window.
    """

    def __init__(self, model: str, started: float, engine_version: str | None = None) -> None:
        self.model = model
        self.started = started
        self.engine_version = engine_version
        self.status = "starting"
        self.log: list[str] = []
        self.layers: dict[str, LayerProgress] = {}
        self.sizes_unknown = False
        self.outcome: str | None = None
        self.error: str | None = None
        self.error_kind: str | None = None
        self.disk: DiskCheck | None = None
        self._samples: deque[tuple[float, int]] = deque()
        self._ended: float | None = None

    # -- feeding -----------------------------------------------------------------------
    def feed(self, event: PullEvent, now: float) -> bool:
        """Take one line; True when it announced a layer not seen before."""
        self.status = event.status or self.status
        if not event.digest:
            if event.status and (not self.log or self.log[-1] != event.status):
                self.log.append(event.status)
            return False
        new = event.digest not in self.layers
        total = event.total if event.total else None
        completed = event.completed or 0
        if total is None:
            self.sizes_unknown = True
        if new:
            if total is not None and completed >= total:
                state = "present"
            elif completed > 0:
                state = "resumed"
            else:
                state = "downloading"
            self.layers[event.digest] = LayerProgress(event.digest, total, completed, completed, state)
        else:
            old = self.layers[event.digest]
            total = total if total is not None else old.total
            completed = max(completed, old.completed)
            state = old.state
            if state != "present" and total is not None and completed >= total:
                state = "done"
            self.layers[event.digest] = replace(old, total=total, completed=completed, state=state)
        self._samples.append((now, self.session_bytes))
        while len(self._samples) > 2 and now - self._samples[0][0] > SPEED_WINDOW_S:
            self._samples.popleft()
        return new

    def succeed(self, now: float) -> None:
        self.outcome = "success"
        self._ended = now
        for key, layer in self.layers.items():
            if layer.state in ("downloading", "resumed"):
                done = layer.total if layer.total is not None else layer.completed
                self.layers[key] = replace(layer, completed=done, state="done")

    def fail(self, kind: str, message: str, now: float) -> None:
        self.outcome = "cancelled" if kind == "cancelled" else "failed"
        self.error_kind = None if kind == "cancelled" else kind
        self.error = message
        self._ended = now

    # -- reading -----------------------------------------------------------------------
    @property
    def session_bytes(self) -> int:
        return sum(max(0, layer.completed - layer.start_completed) for layer in self.layers.values())

    def remaining_known(self) -> int:
        return sum(max(0, (layer.total or 0) - layer.completed) for layer in self.layers.values()
                   if layer.total is not None)

    def speed(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 0.2 or b1 <= b0:
            return None
        return (b1 - b0) / (t1 - t0)

    def view(self, now: float) -> PullView:
        known = [layer for layer in self.layers.values() if layer.total is not None]
        total = sum(layer.total or 0 for layer in known) if known else None
        completed = sum(layer.completed for layer in self.layers.values())
        done_known = sum(layer.completed for layer in known)
        percent: float | None = None
        if self.outcome == "success":
            percent = 100.0
        elif total:
            percent = min(100.0, done_known / total * 100)
        speed = None if self.outcome else self.speed()
        eta = None
        if speed and total is not None and not self.sizes_unknown:
            eta = max(0.0, (total - done_known) / speed)
        end = self._ended if self._ended is not None else now
        return PullView(
            model=self.model,
            engine_version=self.engine_version,
            status=self.status,
            log=tuple(self.log),
            layers=tuple(self.layers.values()),
            total=total,
            completed=completed,
            percent=percent,
            speed_bps=speed,
            eta_s=eta,
            elapsed_s=max(0.0, end - self.started),
            sizes_unknown=self.sizes_unknown,
            outcome=self.outcome,
            error=self.error,
            error_kind=self.error_kind,
            disk=self.disk,
        )


def describe_pull_error(model: str, exc: EngineError, version: str | None, host: str) -> tuple[str, str]:
    """(kind, one line) for a failed pull; every line names the engine's version."""
    engine = f"Ollama {version}" if version else "Ollama (version unknown)"
    text = " ".join(exc.message.split())
    if NEWER_VERSION_MARK in text.lower():
        return "newer_version", (
            f"{model} requires a newer version of Ollama than this engine ({engine} at {host}); "
            f"the registry refused its manifest: upgrade Ollama (https://ollama.com/download), then pull again"
        )
    if isinstance(exc, EngineUnreachable):
        return "unreachable", f"{text}; {engine}"
    if isinstance(exc, ModelNotFound):
        return "not_found", f"{text} ({engine} at {host})"
    return "engine", f"{text} ({engine} at {host})"


async def pull_model(
    engine: Any,
    name: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    store: ModelStore | None = None,
    disk_free: Callable[[str], int | Unavailable] | None = None,
    engine_version: str | None = None,
) -> AsyncIterator[PullView]:
    """Pull `name`, yielding a view after every progress line and a last one with the outcome.

    Engine failures end the stream with a failed view (never an exception) so a display
    can show them in place. The free space at the model store is checked whenever a new
    layer announces its size; when the rest of the download would not fit, the pull is
    stopped (the connection closed) and the view says why. Closing this generator (or
    cancelling its task) closes the HTTP stream: Ollama keeps the partial blobs, and the
    next pull of the same name resumes them. Nothing is written on sparkctl's side.
    """
    name = validate_model_name(name)
    disk_free = disk_free or _disk_free
    tracker = PullTracker(name, clock(), engine_version)
    if engine_version is None:
        try:
            tracker.engine_version = await engine.version()
        except EngineError as exc:
            kind, line = describe_pull_error(name, exc, None, engine.host)
            tracker.fail(kind, line, clock())
            yield tracker.view(clock())
            return
    version = tracker.engine_version
    store = store if store is not None else await asyncio.to_thread(find_model_store, engine.host)  # stat() calls: off the loop
    if not store.known:
        tracker.disk = DiskCheck(None, None, None, None, f"disk space not checked: {store.why}")

    stream = engine.pull(name)
    try:
        try:
            async for event in stream:
                now = clock()
                new_layer = tracker.feed(event, now)
                if new_layer and store.known:
                    check = await _check_disk(store, tracker.remaining_known(), disk_free)
                    tracker.disk = check
                    if check.ok is False:
                        tracker.fail("disk", f"not enough disk space to pull {name}: {check.note}", clock())
                        yield tracker.view(clock())
                        return
                if event.status == "success":
                    tracker.succeed(now)
                yield tracker.view(now)
        except EngineError as exc:
            kind, line = describe_pull_error(name, exc, version, engine.host)
            tracker.fail(kind, line, clock())
            yield tracker.view(clock())
            return
        if tracker.outcome is None:  # the engine adapter raises instead; belt and braces
            tracker.fail("unreachable", f"the pull of {name} ended before 'success' (Ollama {version})", clock())
            yield tracker.view(clock())
    finally:
        await stream.aclose()


async def _check_disk(store: ModelStore, needed: int, disk_free: Callable[[str], Any]) -> DiskCheck:
    assert store.path is not None
    free = await asyncio.to_thread(disk_free, store.path)
    if isinstance(free, Unavailable):
        return DiskCheck(store.path, None, needed, None, f"disk space not checked: {free.reason}")
    ok = needed <= free
    note = f"{gib(needed)} still to download, {gib(free)} free at {store.path} ({store.why})"
    return DiskCheck(store.path, free, needed, ok, note)

