"""Models: list what the engine stores, pull with progress, check the fit, side-load a
contender beside production and verify what actually got loaded, unload, delete.

The CLI and the TUI both drive these functions; neither talks to the engine directly.
Every check that can say "no" says so in one line a user can act on, and every load is
followed by a look at what the engine really did ("verify what ran, not that something
ran"): a CPU spill, an evicted lane model or an NVML disagreement is reported, not hidden.

The pull is an async generator of `PullView` snapshots so the caller decides how often
to paint; closing the generator closes the HTTP stream, which is Ollama's only way to
cancel (it keeps the partial blobs and the next pull resumes them).
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sparkctl.config import Config
from sparkctl.core.keepalive import parse_keep_alive as _parse_keep_alive
from sparkctl.core.budget import MemoryBudget, Pool, build_budget, choose_pool
from sparkctl.core.fit import (
    FitEstimate,
    FitKind,
    FitVerdict,
    engine_default_context,
    estimate_fit,
    judge_fit,
    model_context_length,
)
from sparkctl.core.fmt import gib, size
from sparkctl.core.names import same_model, unique_by_name, validate_model_name
from sparkctl.core.placement import GpuAttribution, Placement, attribute_gpu_memory, placement
from sparkctl.core.snapshots import (
    GIB,
    GpuMemory,
    GpuProcess,
    HostSnapshot,
    LocalModel,
    MemInfo,
    ResidentModel,
    Unavailable,
)
from sparkctl.engines.base import DoneEvent, EngineError, EngineUnreachable, ModelNotFound, PullEvent, ShowInfo

# ---------------------------------------------------------------------------- errors


class ModelsRefused(Exception):
    """A guard said no. `reason` is one line without the "how to override" hint, which
    differs between the CLI (--force) and the TUI (a key)."""

    def __init__(self, reason: str, *, fit: "FitReport | None" = None, kind: str = "guard") -> None:
        super().__init__(reason)
        self.reason = reason
        self.fit = fit
        self.kind = kind


class LoadFailed(EngineError):
    """The engine refused or failed the load. `lost_lanes` and `resident_after` say what is
    resident now, because a failed load can still have evicted models (Ollama unloads to
    make room before it tries, and unloads everything after an out-of-memory failure)."""

    def __init__(self, message: str, status: int, *, lost_lanes: tuple[str, ...] = (),
                 resident_after: tuple[ResidentModel, ...] | None = None) -> None:
        super().__init__(message, status)
        self.lost_lanes = lost_lanes
        self.resident_after = resident_after


def _find(models, name: str):
    for m in models:
        if same_model(m.name, name):
            return m
    return None


def close_names(typed: str, names, n: int = 3) -> list[str]:
    """Local names a mistyped one probably meant, best first: "qwen3:8" -> qwen3:8b,
    "qwen3" -> qwen3:8b, qwen3:30b-a3b (same model, any tag), then difflib's close matches."""
    low = typed.strip().lower()
    short = [str(x) for x in names]
    has_tag = ":" in low.rsplit("/", 1)[-1]
    base, _, tag = low.rpartition(":") if has_tag else (low, "", "")
    out: list[str] = []
    for name in short:
        nl = name.lower()
        if nl == low:
            continue
        if tag in ("", "latest"):
            if nl.split(":", 1)[0] == base:  # the same model under another tag
                out.append(name)
        elif nl.startswith(low):  # a tag cut short: "qwen3:8" for "qwen3:8b"
            out.append(name)
    squeezed = "".join(low.split())
    for name in difflib.get_close_matches(squeezed, [x.lower() for x in short], n=n, cutoff=0.6):
        real = next(x for x in short if x.lower() == name)
        if real not in out and real.lower() != low:
            out.append(real)
    return out[:n]


def did_you_mean(typed: str, names) -> str:
    """ "; did you mean qwen3:8b?" (or "" when nothing is close)."""
    near = close_names(typed, names)
    if not near:
        return ""
    return "; did you mean " + " or ".join(near) + "?"


def not_found(name: str, local, message: str | None = None) -> ModelNotFound:
    """Ollama's "model 'x' not found" (the engine's own words when there are some), with
    the close local names."""
    message = message or f"model '{name}' not found"
    return ModelNotFound(f"{message}{did_you_mean(name, [m.name for m in local])}", 404)


def lane_map(cfg: Config) -> dict[str, str]:
    """model name -> lane, as judge_fit wants it."""
    return {model: lane for lane, model in cfg.lanes.items()}


def lane_label(cfg: Config, name: str) -> str:
    lane = cfg.lane_of(name)
    return f"{name} (lane {lane})" if lane else name


# ---------------------------------------------------------------------------- listing

# Capabilities worth a column; every chat model has "completion".
NOTABLE_CAPABILITIES = ("thinking", "tools", "vision", "insert", "embedding", "image", "audio")


@dataclass(frozen=True)
class ModelRow:
    """One local model with what /api/show adds and whether it is in memory now."""

    name: str
    size: int
    digest: str
    family: str
    parameter_size: str
    quantization: str
    context_length: int | None  # trained context (ARCH.context_length)
    capabilities: tuple[str, ...]
    modified_at: datetime | None
    lane: str | None
    resident: ResidentModel | None = None
    show_error: str | None = None  # /api/show failed: the row keeps /api/tags' facts

    @property
    def loaded(self) -> bool:
        return self.resident is not None

    @property
    def placement(self) -> Placement | None:
        return placement(self.resident.size, self.resident.size_vram) if self.resident else None

    @property
    def notable_capabilities(self) -> tuple[str, ...]:
        return tuple(c for c in NOTABLE_CAPABILITIES if c in self.capabilities)

    def to_dict(self) -> dict[str, Any]:
        r = self.resident
        return {
            "name": self.name,
            "size": self.size,
            "digest": self.digest,
            "family": self.family,
            "parameter_size": self.parameter_size,
            "quantization": self.quantization,
            "context_length": self.context_length,
            "capabilities": list(self.capabilities),
            "modified_at": self.modified_at.isoformat() if self.modified_at else None,
            "lane": self.lane,
            "loaded": self.loaded,
            "placement": self.placement.label if self.placement else None,
            "resident_size": r.size if r else None,
            "resident_context": r.context_length if r else None,
            "show_error": self.show_error,
        }


@dataclass(frozen=True)
class ModelList:
    rows: tuple[ModelRow, ...]
    missing_lanes: tuple[tuple[str, str], ...] = ()  # (lane, model) configured but not stored
    engine_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine_version": self.engine_version,
            "models": [r.to_dict() for r in self.rows],
            "missing_lanes": [{"lane": lane, "model": m} for lane, m in self.missing_lanes],
        }


ShowCache = dict[tuple[str, str], ShowInfo]


def _row(cfg: Config, local: LocalModel, show: ShowInfo | None, show_error: str | None,
         resident: list[ResidentModel]) -> ModelRow:
    d = local.details
    details = show.details if show else {}
    return ModelRow(
        name=local.name,
        size=local.size,
        digest=local.digest,
        family=details.get("family") or d.family,
        parameter_size=details.get("parameter_size") or d.parameter_size,
        quantization=details.get("quantization_level") or d.quantization_level,
        context_length=model_context_length(show.model_info) if show else None,
        capabilities=tuple(show.capabilities) if show else tuple(local.capabilities),
        modified_at=local.modified_at,
        lane=cfg.lane_of(local.name),
        resident=_find(resident, local.name),
        show_error=show_error,
    )


async def list_models(cfg: Config, engine: Any, *, cache: ShowCache | None = None,
                      concurrency: int = 4) -> ModelList:
    """/api/tags + /api/ps, and /api/show for each model (cached by name and digest, so a
    refresh only asks about models that changed)."""
    version, local, resident = await asyncio.gather(engine.version(), engine.tags(), engine.ps())
    local, resident = unique_by_name(local), unique_by_name(resident)
    cache = {} if cache is None else cache
    gate = asyncio.Semaphore(concurrency)

    async def show_one(m: LocalModel) -> tuple[ShowInfo | None, str | None]:
        key = (m.name, m.digest)
        if key in cache:
            return cache[key], None
        async with gate:
            try:
                info = await engine.show(m.name)
            except EngineUnreachable:
                raise
            except EngineError as exc:  # one broken model must not hide the others
                return None, exc.message
        cache[key] = info
        return info, None

    shown = await asyncio.gather(*(show_one(m) for m in local))
    rows = tuple(_row(cfg, m, s, err, resident) for m, (s, err) in zip(local, shown))
    missing = tuple((lane, model) for lane, model in cfg.lanes.items() if _find(local, model) is None)
    return ModelList(rows=rows, missing_lanes=missing, engine_version=version)


def modified_label(moment: datetime | None, now: datetime) -> str:
    """How long ago, the way `ollama list` says it ("3 days ago")."""
    if moment is None:
        return "n/a"
    s = max(0.0, (now - moment).total_seconds())
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400),
                       ("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size:
            n = int(s // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "just now"


def with_resident(rows: tuple[ModelRow, ...], resident: tuple[ResidentModel, ...]) -> tuple[ModelRow, ...]:
    """The same rows with residency taken from a newer /api/ps (the dashboard's sample)."""
    return tuple(replace(r, resident=_find(resident, r.name)) for r in rows)


# ---------------------------------------------------------------------------- model store


@dataclass(frozen=True)
class ModelStore:
    """Where the engine keeps its blobs, when sparkctl can know it."""

    path: str | None
    why: str  # how it was found, or why it is unknown

    @property
    def known(self) -> bool:
        return self.path is not None


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")

# Ollama's defaults: the Linux installer's service user keeps models under its home
# (/usr/share/ollama); `ollama serve` run by hand, and the container image (as root),
# keep them under ~/.ollama; some distribution packages use /var/lib/ollama.
DEFAULT_STORES = ("/usr/share/ollama/.ollama/models", "~/.ollama/models", "/var/lib/ollama/models",
                  "/var/lib/ollama")


def _is_local(host: str) -> bool:
    m = re.match(r"^(?:https?://)?(\[[^\]]+\]|[^:/]+)", host.strip())
    name = m.group(1) if m else ""
    if name in LOCAL_HOSTS:
        return True
    try:
        import socket

        return name == socket.gethostname()
    except OSError:
        return False


def find_model_store(host: str, env: Mapping[str, str] | None = None) -> ModelStore:
    """OLLAMA_MODELS, else the first usual default that exists; unknown for a remote engine.

    Only this shell's environment is visible: a systemd override of OLLAMA_MODELS on the
    service is not, so the path found is reported with the check for the user to judge.
    """
    env = os.environ if env is None else env
    if not _is_local(host):
        return ModelStore(None, f"the engine at {host} is on another machine")
    explicit = env.get("OLLAMA_MODELS", "").strip()
    if explicit:
        p = Path(explicit).expanduser()
        # The store may not exist yet (first pull); its nearest existing parent holds it.
        while not p.exists() and p != p.parent:
            p = p.parent
        return ModelStore(str(p), "from OLLAMA_MODELS")
    for candidate in DEFAULT_STORES:
        p = Path(candidate).expanduser()
        if p.is_dir():
            return ModelStore(str(p), "Ollama's default location")
    return ModelStore(None, "no model store found (set OLLAMA_MODELS to check disk space)")


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
        return "unreachable", f"{text} ({engine})"
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


# ---------------------------------------------------------------------------- fit


@dataclass(frozen=True)
class FitReport:
    model: str
    size: int
    estimate: FitEstimate
    verdict: FitVerdict | None  # None when the budget could not be read
    budget: MemoryBudget | None
    unavailable: str | None  # why there is no verdict
    context_note: str  # which context the estimate assumes, and why
    resident: tuple[ResidentModel, ...]
    already_resident: bool
    request_num_ctx: int | None  # what a load will send (None: the engine decides)
    host: HostSnapshot | None = None
    engine_version: str | None = None

    @property
    def refused_by_default(self) -> bool:
        return self.verdict is None or self.verdict.refused_by_default

    def summary(self) -> str:
        """The verdict in one line."""
        if self.verdict is None:
            return f"fit unknown: {self.unavailable}"
        return self.verdict.reason

    def lines(self) -> list[str]:
        e = self.estimate
        kv = gib(e.kv_cache) if e.kv_cache is not None else "unknown"
        out = [
            f"{self.model}: {self.summary()}",
            f"  estimate   {gib(e.total)} = weights {gib(e.weights)} + KV cache {kv} + overhead {gib(e.overhead)}",
            f"  context    {self.context_note}",
        ]
        b = self.budget
        if b is not None:
            out.append(
                f"  budget     {gib(b.available)} available, reserve {gib(b.reserve)}, "
                f"headroom {gib(b.headroom)} ({b.pool.value} memory)"
            )
        if self.resident:
            res = ", ".join(f"{m.name} {gib(m.size)}" for m in self.resident)
            out.append(f"  resident   {res}")
        for note in e.notes:
            if not note.startswith("num_ctx "):
                out.append(f"  note       {note}")
        return out

    def to_dict(self) -> dict[str, Any]:
        e, v, b = self.estimate, self.verdict, self.budget
        return {
            "model": self.model,
            "size": self.size,
            "estimate": {
                "total": e.total, "weights": e.weights, "kv_cache": e.kv_cache, "overhead": e.overhead,
                "num_ctx": e.num_ctx, "context_source": e.context_source, "notes": list(e.notes),
            },
            "context": self.context_note,
            "request_num_ctx": self.request_num_ctx,
            "verdict": None if v is None else {
                "kind": v.kind.value, "reason": v.reason, "needed": v.needed, "headroom": v.headroom,
                "spare": v.spare, "evicts": list(v.evicts), "evicts_lanes": list(v.evicts_lanes),
                "refused_by_default": v.refused_by_default,
            },
            "unavailable": self.unavailable,
            "budget": None if b is None else {
                "pool": b.pool.value, "total": b.total, "available": b.available,
                "reserve": b.reserve, "headroom": b.headroom,
            },
            "resident": [{"name": m.name, "size": m.size, "size_vram": m.size_vram} for m in self.resident],
            "already_resident": self.already_resident,
        }


_MODELFILE_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def modelfile_num_ctx(parameters: str) -> int | None:
    m = _MODELFILE_NUM_CTX.search(parameters or "")
    return int(m.group(1)) if m else None


def _env_int(env: Mapping[str, str], key: str) -> int | None:
    try:
        v = int(env.get(key, "").strip())
    except ValueError:
        return None
    return v if v > 0 else None


def gpu_memory_total(host: HostSnapshot) -> int:
    """The GPU memory Ollama sums to pick its default context (0 without a GPU)."""
    pool, dev = choose_pool(host.gpu)
    if pool is Pool.UNIFIED:
        return host.meminfo.total if isinstance(host.meminfo, MemInfo) else 0
    if pool is Pool.VRAM:
        return sum(g.memory.total for g in host.gpu.gpus if isinstance(g.memory, GpuMemory))
    return 0


def context_note(e: FitEstimate, *, total_gpu: int, trained: int | None, modelfile: int | None,
                 env_ctx: int | None, parallel: int = 1) -> str:
    """Which context the estimate assumes and why, in one line."""
    if e.context_source == "user":
        why = "as asked (--ctx / the form)"
    elif e.context_source == "config":
        why = "from [models] num_ctx in the config"
    elif modelfile:
        why = f"the engine's choice: the model's Modelfile sets num_ctx {modelfile}"
    elif env_ctx:
        why = f"the engine's choice: OLLAMA_CONTEXT_LENGTH={env_ctx} (read from sparkctl's environment)"
    else:
        why = (f"the engine's choice: Ollama's default for {gib(total_gpu)} of GPU memory is "
               f"{engine_default_context(total_gpu)}")
    if trained is not None and any("capped" in n for n in e.notes):
        why += f", capped at the model's trained context {trained}"
    if parallel > 1:
        why += f", x{parallel} parallel slots"
    hint = "" if e.context_source == "user" else "; set --ctx or [models] num_ctx to plan for another"
    return f"num_ctx {e.num_ctx}: {why}{hint}"


async def fit_check(
    cfg: Config,
    engine: Any,
    probes: Any,
    name: str,
    num_ctx: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> FitReport:
    """Estimate the resident size of `name` and judge it against the live budget."""
    env = os.environ if env is None else env
    name = validate_model_name(name)
    show, local, resident, version = await asyncio.gather(
        engine.show(name), engine.tags(), engine.ps(), engine.version(), return_exceptions=True
    )
    for answer in (local, show, resident, version):
        if isinstance(answer, ModelNotFound) and not isinstance(local, BaseException):
            raise not_found(name, local, answer.message) from answer
        if isinstance(answer, BaseException):
            raise answer
    local, resident = unique_by_name(local), unique_by_name(resident)
    stored = _find(local, name)
    if stored is None:
        raise not_found(name, local)
    host = await asyncio.to_thread(probes.read)

    local_engine = _is_local(engine.host)
    env_ctx = _env_int(env, "OLLAMA_CONTEXT_LENGTH") if local_engine else None
    parallel = (_env_int(env, "OLLAMA_NUM_PARALLEL") if local_engine else None) or 1
    if num_ctx is not None and num_ctx > 0:
        request, source = num_ctx, "user"
    elif cfg.models.num_ctx > 0:
        request, source = cfg.models.num_ctx, "config"
    else:
        request, source = None, "user"
    total_gpu = gpu_memory_total(host)
    mf_ctx = modelfile_num_ctx(show.parameters)
    estimate = estimate_fit(
        stored.size,
        show.model_info,
        request,
        context_source=source,
        total_memory_bytes=total_gpu,
        env_context=env_ctx,
        modelfile_num_ctx=mf_ctx,
        num_parallel=parallel,
    )

    mine = _find(resident, name)
    already = mine is not None and (mine.context_length is None or mine.context_length == estimate.num_ctx)
    budget: MemoryBudget | None = None
    verdict: FitVerdict | None = None
    unavailable: str | None = None
    if isinstance(host.meminfo, MemInfo):
        budget = build_budget(host.meminfo, host.gpu, resident, cfg.lane_of,
                              cfg.budget.reserve_gib, cfg.budget.warn_gib)
        gpus = max(1, len(host.gpu.gpus))
        max_loaded = (_env_int(env, "OLLAMA_MAX_LOADED_MODELS") if local_engine else None) or 3 * gpus
        verdict = judge_fit(
            estimate,
            budget.available,
            budget.reserve,
            resident,
            lane_map(cfg),
            already,
            model_name=name,
            unified_memory=budget.pool is not Pool.VRAM,
            max_loaded_models=max_loaded,
        )
    else:
        unavailable = f"memory budget unreadable: {host.meminfo.reason}"
    return FitReport(
        model=name,
        size=stored.size,
        estimate=estimate,
        verdict=verdict,
        budget=budget,
        unavailable=unavailable,
        context_note=context_note(
            estimate, total_gpu=total_gpu, trained=model_context_length(show.model_info),
            modelfile=mf_ctx, env_ctx=env_ctx, parallel=parallel,
        ),
        resident=tuple(resident),
        already_resident=already,
        request_num_ctx=request,
        host=host,
        engine_version=version,
    )


# ---------------------------------------------------------------------------- side-load

def parse_keep_alive(text: str | int | float) -> float | int:
    """What to send as keep_alive (core.keepalive: seconds as a number, -1 forever)."""
    return _parse_keep_alive(text).wire


def keep_alive_label(value: float | int | str) -> str:
    return _parse_keep_alive(value).label


@dataclass(frozen=True)
class Verification:
    """What the engine really did after a load."""

    resident: ResidentModel | None
    placement: Placement | None
    evicted: tuple[str, ...]  # resident before the load, gone after
    evicted_lanes: tuple[str, ...]
    lane_models_resident: tuple[str, ...]  # lane models still in memory
    attribution: GpuAttribution | None
    estimate_bytes: int
    resident_bytes: int | None
    error_pct: float | None  # (estimate - resident) / resident x 100: + is an over-estimate
    expected_ctx: int
    actual_ctx: int | None
    problems: tuple[str, ...]  # loud, and the load counts as failed: spill, lane evicted, ...
    warnings: tuple[str, ...]  # loud, but not a failure: things sparkctl could not confirm
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        a = self.attribution
        p = self.placement
        return {
            "ok": self.ok,
            "resident": self.resident is not None,
            "placement": p.label if p else None,
            "gpu_fraction": p.gpu_fraction if p else None,
            "cpu_spill": bool(p and p.spilled),
            "size": self.resident.size if self.resident else None,
            "size_vram": self.resident.size_vram if self.resident else None,
            "evicted": list(self.evicted),
            "evicted_lanes": list(self.evicted_lanes),
            "lane_models_resident": list(self.lane_models_resident),
            "nvml": None if a is None else {
                "engine_claimed_vram": a.claimed_vram, "nvml_engine_bytes": a.nvml_bytes, "mismatch": a.mismatch,
            },
            "estimate_bytes": self.estimate_bytes,
            "resident_bytes": self.resident_bytes,
            "estimate_error_pct": None if self.error_pct is None else round(self.error_pct, 1),
            "expected_ctx": self.expected_ctx,
            "actual_ctx": self.actual_ctx,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def _gpu_processes(host: HostSnapshot | None) -> tuple[GpuProcess, ...] | None:
    if host is None:
        return None
    procs: list[GpuProcess] = []
    seen = False
    for g in host.gpu.gpus:
        if isinstance(g.processes, tuple):
            seen = True
            procs.extend(g.processes)
    return tuple(procs) if seen else None


def verify_load(
    cfg: Config,
    name: str,
    estimate: FitEstimate,
    before: tuple[ResidentModel, ...],
    after: tuple[ResidentModel, ...],
    host_after: HostSnapshot | None,
) -> Verification:
    problems: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    mine = _find(after, name)
    where = placement(mine.size, mine.size_vram) if mine else None
    if mine is None:
        problems.append(f"NOT RESIDENT: {name} is not in /api/ps after the load")
    elif where is not None and where.label == "Unknown":
        problems.append(f"PLACEMENT UNKNOWN: /api/ps reports size {mine.size} and size_vram {mine.size_vram}")
    elif where is not None and not where.full_gpu:
        on_cpu = mine.size - mine.size_vram
        problems.append(
            f"CPU SPILL: {name} runs {where.label} ({gib(on_cpu)} of {gib(mine.size)} on the CPU): "
            f"decode will be slow and benches of it are not comparable"
        )
    else:
        notes.append(f"{name} is 100% on the GPU ({gib(mine.size)})")

    evicted = tuple(m.name for m in before if _find(after, m.name) is None and not same_model(m.name, name))
    evicted_lanes = tuple(n for n in evicted if cfg.lane_of(n))
    for n in evicted:
        if cfg.lane_of(n):
            problems.append(f"EVICTED: {lane_label(cfg, n)} is no longer resident; the lane is cold")
        else:
            notes.append(f"evicted {n} (no lane)")
    lanes_resident = tuple(m.name for m in after if cfg.lane_of(m.name))
    for m in after:
        if cfg.lane_of(m.name) and not same_model(m.name, name):
            notes.append(f"{lane_label(cfg, m.name)} still resident ({placement(m.size, m.size_vram).label})")

    attribution = attribute_gpu_memory(after, _gpu_processes(host_after))
    if attribution.mismatch and attribution.nvml_bytes is not None:
        problems.append(f"NVML DISAGREES: {attribution.mismatch}")
    elif attribution.mismatch:
        # No engine process in NVML's list: Ollama in a container (other PID namespace)
        # looks like this too, so it cannot prove a CPU placement on its own.
        warnings.append(f"NVML cannot confirm the placement: {attribution.mismatch}")
    elif attribution.nvml_bytes is not None:
        notes.append(
            f"NVML agrees: {gib(attribution.nvml_bytes)} attributed to the engine's processes "
            f"(engine reports {gib(attribution.claimed_vram)} on GPU)"
        )
    else:
        notes.append("NVML per-process memory: n/a (no engine process visible to NVML)")

    error_pct = None
    if mine is not None and mine.size > 0:
        error_pct = (estimate.total - mine.size) / mine.size * 100
        direction = "over" if error_pct >= 0 else "UNDER"
        line = (f"estimate {gib(estimate.total)} vs resident {gib(mine.size)}: "
                f"{error_pct:+.1f}% ({direction}-estimate)")
        if error_pct < -10:
            problems.append(f"ESTIMATE LOW: {line}; plans made with it are optimistic")
        else:
            notes.append(line)
    actual_ctx = mine.context_length if mine else None
    if actual_ctx is not None and actual_ctx != estimate.num_ctx:
        notes.append(f"the engine runs num_ctx {actual_ctx}; the estimate assumed {estimate.num_ctx}")
    return Verification(
        resident=mine,
        placement=where,
        evicted=evicted,
        evicted_lanes=evicted_lanes,
        lane_models_resident=lanes_resident,
        attribution=attribution,
        estimate_bytes=estimate.total,
        resident_bytes=mine.size if mine else None,
        error_pct=error_pct,
        expected_ctx=estimate.num_ctx,
        actual_ctx=actual_ctx,
        problems=tuple(problems),
        warnings=tuple(warnings),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class LoadReport:
    model: str
    fit: FitReport
    forced: bool
    overridden: str | None  # the refusal --force went past, if any
    keep_alive: float | int | str
    num_ctx: int | None  # sent to the engine (None: the engine chose)
    load_s: float
    done: DoneEvent | None
    verification: Verification

    @property
    def ok(self) -> bool:
        return self.verification.ok

    def lines(self) -> list[str]:
        v = self.verification
        head = "loaded" if v.resident is not None else "load answered, but"
        out = [f"{head} {self.model} in {self.load_s:.1f} s (keep_alive {keep_alive_label(self.keep_alive)}, "
               f"num_ctx {self.num_ctx if self.num_ctx else 'engine default'})"]
        if self.overridden:
            out.append(f"  forced past: {self.overridden}")
        for p in v.problems:
            out.append(f"  !! {p}")
        for w in v.warnings:
            out.append(f"  !  {w}")
        for n in v.notes:
            out.append(f"  -  {n}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "loaded": self.verification.resident is not None,
            "ok": self.ok,
            "forced": self.forced,
            "overridden": self.overridden,
            "refused": None,
            "keep_alive": self.keep_alive,
            "num_ctx": self.num_ctx,
            "load_s": round(self.load_s, 3),
            "load_duration_ns": self.done.load_duration_ns if self.done else None,
            "fit": self.fit.to_dict(),
            "verification": self.verification.to_dict(),
        }


def refusal_reason(fit: FitReport) -> str | None:
    """Why the default guard refuses this load, in one line, or None."""
    if fit.verdict is None:
        return f"cannot check that {fit.model} fits: {fit.unavailable}"
    v = fit.verdict
    if v.kind is FitKind.DOES_NOT_FIT:
        return f"{fit.model} {v.reason}"
    if v.evicts_lanes:
        return f"{fit.model} {v.reason}"
    return None


def override_blocker(fit: FitReport) -> str | None:
    """Why forcing past the guard cannot help, or None when it could work.

    The override exists for plans that evict a lane model or dip into the reserve. A model
    that needs more than all memory available after evicting every other resident model,
    reserve included, cannot be loaded by any override: the engine would fail it (or, on
    unified memory, push the box towards a hard freeze)."""
    v = fit.verdict
    if v is None or v.kind is not FitKind.DOES_NOT_FIT:
        return None
    reserve = fit.budget.reserve if fit.budget is not None else 0
    short = -v.spare - reserve  # below zero memory, not only below the reserve
    if short <= 0:
        return None
    return (f"{fit.model} needs {gib(v.needed)}: {gib(short)} more than all the memory there would be, "
            f"reserve included, even after evicting every other resident model; no override can load it")


def override_offered(fit: FitReport | None) -> bool:
    """Whether to offer "load anyway": refused by default, and forcing could work."""
    return fit is not None and refusal_reason(fit) is not None and override_blocker(fit) is None


async def side_load(
    cfg: Config,
    engine: Any,
    probes: Any,
    name: str,
    *,
    keep_alive: str | None = None,
    num_ctx: int | None = None,
    force: bool = False,
    clock: Callable[[], float] = time.monotonic,
    env: Mapping[str, str] | None = None,
    fit: FitReport | None = None,
) -> LoadReport:
    """Load `name` beside what is resident, after the fit guard, and verify the result.

    Raises ModelsRefused when the guard says no (unless `force`), LoadFailed when the
    engine fails the load; otherwise returns a report whose verification lists every
    problem loudly (a CPU spill or an evicted lane model is a report, not an exception:
    the model is loaded, and the user decides what to do about it).
    """
    name = validate_model_name(name)
    ka = parse_keep_alive(keep_alive if keep_alive is not None else cfg.models.keep_alive)
    if fit is None:
        fit = await fit_check(cfg, engine, probes, name, num_ctx, env=env)
    why = refusal_reason(fit)
    if why and not force:
        raise ModelsRefused(why, fit=fit)
    before = tuple(await engine.ps())
    options = {"num_ctx": fit.request_num_ctx} if fit.request_num_ctx else None
    started = clock()
    try:
        done = await engine.load(name, keep_alive=ka, options=options)
    except EngineUnreachable:
        raise
    except EngineError as exc:
        lost: tuple[str, ...] = ()
        after: tuple[ResidentModel, ...] | None = None
        try:
            after = tuple(await engine.ps())
            lost = tuple(m.name for m in before if cfg.lane_of(m.name) and _find(after, m.name) is None)
        except EngineError:
            pass
        raise LoadFailed(exc.message, exc.status, lost_lanes=lost, resident_after=after) from exc
    load_s = clock() - started
    after = tuple(await engine.ps())
    host_after = await asyncio.to_thread(probes.read)
    verification = verify_load(cfg, name, fit.estimate, before, after, host_after)
    return LoadReport(
        model=name,
        fit=fit,
        forced=force,
        overridden=why if force else None,
        keep_alive=ka,
        num_ctx=fit.request_num_ctx,
        load_s=load_s,
        done=done,
        verification=verification,
    )


# ---------------------------------------------------------------------------- unload / delete


@dataclass(frozen=True)
class UnloadReport:
    model: str
    was_loaded: bool
    waited_s: float
    suggestion: str = ""  # "; did you mean ...?" when the name matches nothing resident

    def line(self) -> str:
        if not self.was_loaded:
            hint = f" ({self.suggestion.removeprefix('; ')})" if self.suggestion else ""
            return f"{self.model} was not loaded{hint}"
        return f"unloaded {self.model}: gone from /api/ps after {self.waited_s:.1f} s"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "was_loaded": self.was_loaded, "unloaded": True,
                "waited_s": round(self.waited_s, 3)}


async def unload_model(engine: Any, name: str, *, wait_s: float = 30.0,
                       clock: Callable[[], float] = time.monotonic) -> UnloadReport:
    """keep_alive 0, then wait until /api/ps stops listing it (the memory is freed after
    the answer, and a plan made before that would count it twice)."""
    name = validate_model_name(name)
    resident = await engine.ps()
    mine = _find(resident, name)
    if mine is None:
        return UnloadReport(name, False, 0.0, did_you_mean(name, [m.name for m in resident]))
    started = clock()
    await engine.unload(mine.name, wait_s=wait_s)
    return UnloadReport(mine.name, True, clock() - started)


@dataclass(frozen=True)
class DeleteReport:
    model: str
    lane: str | None
    size: int
    unloaded_first: bool

    def line(self) -> str:
        extra = " (unloaded it first)" if self.unloaded_first else ""
        return f"deleted {_with_lane(self.model, self.lane)} ({gib(self.size)}){extra}"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "deleted": True, "lane": self.lane, "size": self.size,
                "unloaded_first": self.unloaded_first}


def _with_lane(name: str, lane: str | None) -> str:
    return f"{name} (lane {lane})" if lane else name


async def delete_target(cfg: Config, engine: Any, name: str) -> LocalModel:
    """The stored model a delete would remove (ModelNotFound when there is none)."""
    name = validate_model_name(name)
    local = await engine.tags()
    stored = _find(local, name)
    if stored is None:
        raise not_found(name, local)
    return stored


async def delete_model(cfg: Config, engine: Any, name: str, *, force: bool = False) -> DeleteReport:
    """Delete a stored model. A lane model needs `force` (the router would lose its model).
    A loaded one is unloaded first, so its memory comes back now rather than at expiry."""
    stored = await delete_target(cfg, engine, name)
    lane = cfg.lane_of(stored.name)
    if lane and not force:
        raise ModelsRefused(f"{stored.name} serves lane {lane}; deleting it leaves the lane without its model",
                            kind="lane")
    unloaded = False
    if _find(await engine.ps(), stored.name) is not None:
        await engine.unload(stored.name)
        unloaded = True
    await engine.delete(stored.name)
    return DeleteReport(stored.name, lane, stored.size, unloaded)

