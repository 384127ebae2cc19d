"""The catalog: what the engine stores (tags + show + ps as rows) and deleting a stored model."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sparkctl.config import Config
from sparkctl.core.fit import model_context_length
from sparkctl.core.fmt import gib
from sparkctl.core.names import unique_by_name, validate_model_name
from sparkctl.core.placement import Placement, placement
from sparkctl.core.snapshots import LocalModel, ResidentModel
from sparkctl.engines.base import EngineError, EngineUnreachable, ShowInfo
from sparkctl.services.models.common import _find, not_found
from sparkctl.services.models.errors import ModelsRefused


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
    from sparkctl.services.models.load import forget_session

    await forget_session(cfg, stored.name)
    return DeleteReport(stored.name, lane, stored.size, unloaded)

