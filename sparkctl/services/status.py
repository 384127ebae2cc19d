"""The dashboard's facts: engine, resident models, memory budget, GPU and pressure.

The TUI gathers the engine half in an async worker and the host half in a thread worker,
then calls `build_report`; `sparkctl status` does the same in one go via `collect_status`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from sparkctl.config import Config
from sparkctl.core.budget import MemoryBudget, build_budget
from sparkctl.core.placement import GpuAttribution, attribute_gpu_memory, placement, spill_warning, until_label
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.snapshots import (
    EngineStatus,
    GpuReport,
    GpuSnapshot,
    HostSnapshot,
    MemInfo,
    Pressure,
    ResidentModel,
    Unavailable,
)
from sparkctl.engines.base import Engine, EngineError, EngineUnreachable


async def engine_status(engine: Engine, known_version: str | None = None) -> EngineStatus:
    """Ask the engine who it is and what it holds; never raises.

    No answer at all (EngineUnreachable) is reachable=False. An answer that is an error
    (an HTTP 500 from a runner that died, a 503 while loading) is reachable=True with
    `error` set: the engine is up but failing, which a user fixes differently.

    With `known_version` only /api/ps is asked: a poller that saw the engine answer a
    moment ago need not ask its version every second (an upgrade restarts the server,
    and the poller asks again after any failure)."""
    if known_version is not None:
        results: list = [known_version, *await asyncio.gather(engine.ps(), return_exceptions=True)]
    else:
        results = list(await asyncio.gather(engine.version(), engine.ps(), return_exceptions=True))
    return _status_from(engine, results)


def poll_engine_status(engine: Any, known_version: str | None = None,
                       loop: asyncio.AbstractEventLoop | None = None) -> EngineStatus | None:
    """``engine_status`` from a thread (the dashboard samples in one).

    An engine with blocking calls (Ollama's ``version_blocking``/``ps_blocking``: a
    kept-alive plain HTTP GET each) answers in this thread, without the event loop; any
    other engine is asked on ``loop``, the event loop it belongs to. None when it has no
    blocking calls and no loop is given."""
    ps = getattr(engine, "ps_blocking", None)
    if ps is None:
        if loop is None:
            return None
        # bounded: a loop that stopped meanwhile (the app quit) would never answer
        return asyncio.run_coroutine_threadsafe(engine_status(engine, known_version), loop).result(timeout=120)
    results: list = [known_version if known_version is not None else _caught(engine.version_blocking), _caught(ps)]
    return _status_from(engine, results)


def _caught(call) -> Any:
    try:
        return call()
    except EngineError as exc:
        return exc


def _status_from(engine: Any, results: list) -> EngineStatus:
    """The status said by (version or its failure, resident models or their failure)."""
    failure = _worst_failure(results)
    host = redact_uri(engine.host)  # shown on the dashboard and by `sparkctl status`
    if failure is not None:
        if isinstance(failure, EngineUnreachable):
            return EngineStatus(engine.kind, host, False, error=redact_text(failure.message))
        version = results[0] if isinstance(results[0], str) else None
        return EngineStatus(engine.kind, host, True, version=version, error=redact_text(failure.message))
    version, resident = results
    from sparkctl.core.names import unique_by_name  # a model listed twice is one model

    return EngineStatus(engine.kind, host, True, version=version, resident=tuple(unique_by_name(resident)))


def _worst_failure(results: list) -> EngineError | None:
    """The failure that decides the state: no answer beats an error answer. Anything else
    raised (a bug, a cancellation) propagates."""
    failures = [r for r in results if isinstance(r, BaseException)]
    for r in failures:
        if not isinstance(r, EngineError):
            raise r
    for r in failures:
        if isinstance(r, EngineUnreachable):
            return r
    return failures[0] if failures else None


@dataclass(frozen=True)
class NamedEngineStatus:
    """One `[engines.NAME]` entry as last seen: reachable or not, and whether it serves its model."""

    name: str
    kind: str  # the configured kind until contact, then what was detected ("llama.cpp", "vllm"...)
    url: str
    reachable: bool
    model: str = ""  # the configured model ("" when none is configured)
    served: tuple[str, ...] = ()
    version: str | None = None
    error: str | None = None

    @property
    def failing(self) -> bool:
        """It answered, with an error (an HTTP 500, a 503 while loading)."""
        return self.reachable and self.error is not None

    @property
    def model_served(self) -> bool | None:
        """True/False once reachable and a model is configured; None when it cannot be said."""
        if not self.reachable or self.failing or not self.model:
            return None
        return self.model in self.served


async def named_engine_status(name: str, engine: Any, model: str = "", kind: str = "") -> NamedEngineStatus:
    """Ask one extra engine who it is and what it serves; failures become reachable=False."""
    url = redact_uri(engine.host)  # shown: never a credential
    try:
        version = await engine.version()
        served = tuple(m.name for m in await engine.tags())
    except EngineUnreachable as exc:
        return NamedEngineStatus(name, kind or engine.kind, url, False, model, error=redact_text(exc.message))
    except EngineError as exc:  # it answered, with an error: up but failing
        return NamedEngineStatus(name, engine.kind, url, True, model, error=redact_text(exc.message))
    return NamedEngineStatus(name, engine.kind, url, True, model, served, version)


async def openai_engines_status(cfg: Config, engines: dict[str, Any] | None = None) -> tuple[NamedEngineStatus, ...]:
    """Every `[engines.NAME]`, probed in parallel. Engines not passed in are built from the
    config and closed again; a bad entry shows as unreachable with the reason."""
    from sparkctl.services.factory import EngineChoiceError, make_engine

    given = engines or {}
    built: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in cfg.engines:
        if name in given:
            continue
        try:
            built[name] = make_engine(cfg, name=name)
        except EngineChoiceError as exc:
            errors[name] = str(exc)
    try:
        names = list(cfg.engines)
        live = [n for n in names if n in given or n in built]
        results = await asyncio.gather(*(
            named_engine_status(n, given.get(n) or built[n], cfg.engines[n].model, cfg.engines[n].kind) for n in live
        ))
    finally:
        for engine in built.values():
            await engine.close()
    by_name = dict(zip(live, results))
    out = []
    for n in names:
        if n in by_name:
            out.append(by_name[n])
        else:
            e = cfg.engines[n]
            out.append(NamedEngineStatus(n, e.kind, redact_uri(e.url), False, e.model,
                                         error=redact_text(errors.get(n, "not built"))))
    return tuple(out)


@dataclass(frozen=True)
class ResidentRow:
    model: ResidentModel
    lane: str | None
    placement: str
    until: str


@dataclass(frozen=True)
class StatusReport:
    engine: EngineStatus
    host: HostSnapshot
    budget: MemoryBudget | Unavailable
    rows: tuple[ResidentRow, ...]
    attribution: GpuAttribution | None
    at: datetime
    engines: tuple[NamedEngineStatus, ...] = ()  # the [engines.NAME] entries, when configured
    # each [lanes] entry as (lane, model, resident); None while resident models are unknown
    lanes: tuple[tuple[str, str, bool], ...] | None = None
    # models a dead bench (or a failed restore) left changed: tracking/residency_journal.py
    residency_warnings: tuple[str, ...] = ()

    @property
    def lanes_not_resident(self) -> list[tuple[str, str]]:
        """Lanes whose model is not loaded: the router's next request to one loads it cold."""
        return [(lane, model) for lane, model, resident in (self.lanes or ()) if not resident]

    @property
    def lanes_spilled(self) -> list[str]:
        """A warning for each lane model not all on the GPU (core.placement.spill_warning)."""
        out = []
        for row in self.rows:
            if row.lane is not None:
                w = spill_warning(row.lane, row.model.name, row.model.size, row.model.size_vram)
                if w:
                    out.append(w)
        return out

    @property
    def spilled_lane_names(self) -> frozenset[str]:
        """The lanes whose model is resident partly or wholly on the CPU."""
        return frozenset(row.lane for row in self.rows if row.lane is not None
                         and spill_warning(row.lane, row.model.name, row.model.size, row.model.size_vram))

    @property
    def warnings(self) -> list[str]:
        """Everything `status --json` lists under "warnings", loudest first."""
        return [*self.residency_warnings, *self.lanes_spilled,
                *(f"lane {lane}: {model} is not resident" for lane, model in self.lanes_not_resident)]


def _processes(gpu: GpuReport) -> tuple | None:
    procs: list = []
    seen_any = False
    for g in gpu.gpus:
        if isinstance(g.processes, tuple):
            seen_any = True
            procs.extend(g.processes)
    return tuple(procs) if seen_any else None


def build_report(
    cfg: Config, engine: EngineStatus, host: HostSnapshot, now: datetime,
    engines: tuple[NamedEngineStatus, ...] = (), residency_warnings: tuple[str, ...] = (),
) -> StatusReport:
    if isinstance(host.meminfo, MemInfo):
        budget: MemoryBudget | Unavailable = build_budget(
            host.meminfo, host.gpu, engine.resident, cfg.lane_of, cfg.budget.reserve_gib, cfg.budget.warn_gib
        )
    else:
        budget = host.meminfo
    rows = tuple(
        ResidentRow(m, cfg.lane_of(m.name), placement(m.size, m.size_vram).label, until_label(m.expires_at, now))
        for m in engine.resident
    )
    # resident models are unknown when the engine is down or failing: nothing to attribute
    known = engine.reachable and engine.error is None
    attribution = attribute_gpu_memory(engine.resident, _processes(host.gpu)) if known else None
    engines = tuple(redact_named_status(e) for e in engines)
    lanes = None
    if known:
        from sparkctl.core.names import same_model

        lanes = tuple((lane, model, any(same_model(m.name, model) for m in engine.resident))
                      for lane, model in cfg.lanes.items())
    return StatusReport(redact_engine_status(engine), host, budget, rows, attribution, now, engines, lanes,
                        tuple(redact_text(w) for w in residency_warnings))


def redact_engine_status(e: EngineStatus) -> EngineStatus:
    """``e`` fit to show: credentials in its host and error as ``***`` (the same object when
    there are none). A status built from the config (``[engine] host``) may carry them."""
    host, error = redact_uri(e.host), (redact_text(e.error) if e.error is not None else None)
    return e if (host, error) == (e.host, e.error) else replace(e, host=host, error=error)


def redact_named_status(e: NamedEngineStatus) -> NamedEngineStatus:
    """``e`` fit to show: credentials in its URL and error as ``***``."""
    url, error = redact_uri(e.url), (redact_text(e.error) if e.error is not None else None)
    return e if (url, error) == (e.url, e.error) else replace(e, url=url, error=error)


async def collect_status(cfg: Config, engine: Engine, probes: Any) -> StatusReport:
    """Engine and host in parallel; probes are blocking, so they run in a thread."""
    host_task = asyncio.to_thread(probes.read)
    named: tuple[NamedEngineStatus, ...] = ()
    if cfg.engines:
        eng, host, named = await asyncio.gather(engine_status(engine), host_task, openai_engines_status(cfg))
    else:
        eng, host = await asyncio.gather(engine_status(engine), host_task)
    return build_report(cfg, eng, host, datetime.now(timezone.utc), named, tuple(await _residency_warnings()))


async def _residency_warnings() -> list[str]:
    """Models a dead bench (or a failed restore) left changed; one directory listing, and
    the journal module imported only when a journal is there."""
    from sparkctl import paths

    if not await asyncio.to_thread(paths.residency_journals):
        return []
    from sparkctl.tracking.residency_journal import residency_warnings

    return await asyncio.to_thread(residency_warnings)


# ---- JSON for `sparkctl status --json` -----------------------------------------------------


def _v(x: Any) -> Any:
    """Unavailable readings become null; the reason goes in a sibling *_na key."""
    return None if isinstance(x, Unavailable) else x


def _gpu_dict(g: GpuSnapshot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": g.index,
        "name": _v(g.name),
        "uuid": _v(g.uuid),
        "driver": _v(g.driver),
        "utilization_pct": _v(g.utilization_pct),
        "temperature_c": _v(g.temperature_c),
        "power_w": _v(g.power_w),
        "power_limit_w": _v(g.power_limit_w),
        "sm_clock_mhz": _v(g.sm_clock_mhz),
        "sm_clock_max_mhz": _v(g.sm_clock_max_mhz),
        "throttle_reasons": list(g.throttle_reasons) if isinstance(g.throttle_reasons, tuple) else None,
        "unified_memory": g.unified_memory,
        "memory": None,
        "processes": None,
    }
    if g.memory is not None and not isinstance(g.memory, Unavailable):
        out["memory"] = {"total": g.memory.total, "used": g.memory.used, "free": g.memory.free}
    if isinstance(g.processes, tuple):
        out["processes"] = [{"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes} for p in g.processes]
    na = {k: str(getattr(g, k).reason) for k in vars(g) if isinstance(getattr(g, k), Unavailable)}
    if na:
        out["unavailable"] = na
    return out


def report_to_dict(r: StatusReport) -> dict[str, Any]:
    from sparkctl.core.host_status import STATUS_SCHEMA

    e = r.engine
    out: dict[str, Any] = {
        "schema": STATUS_SCHEMA,  # the fleet reads other hosts' status by it (core/host_status.py)
        "at": r.at.isoformat(),
        "engine": {
            "kind": e.kind,
            "host": redact_uri(e.host),
            "reachable": e.reachable,
            "version": e.version,
            "error": redact_text(e.error) if e.error is not None else None,
        },
        "resident": [
            {
                "name": row.model.name,
                "lane": row.lane,
                "size": row.model.size,
                "size_vram": row.model.size_vram,
                "placement": row.placement,
                "context_length": row.model.context_length,
                "expires_at": row.model.expires_at.isoformat() if row.model.expires_at else None,
                "until": row.until,
                "digest": row.model.digest,
                "quantization": row.model.details.quantization_level,
                "parameter_size": row.model.details.parameter_size,
            }
            for row in r.rows
        ],
        "lanes": None if r.lanes is None else [
            {"lane": lane, "model": model, "resident": resident} for lane, model, resident in r.lanes],
        "warnings": r.warnings,
        "gpu_attribution": None,
        "budget": None,
        "memory": None,
        "pressure": None,
        "gpus": [_gpu_dict(g) for g in r.host.gpu.gpus],
        "gpu_unavailable": r.host.gpu.unavailable.reason if r.host.gpu.unavailable else None,
        "host": {"hostname": r.host.hostname, "cpu_count": r.host.cpu_count},
    }
    if r.engines:
        out["engines"] = [
            {"name": e.name, "kind": e.kind, "url": redact_uri(e.url), "reachable": e.reachable, "version": e.version,
             "model": e.model or None, "model_served": e.model_served, "served": list(e.served),
             "error": redact_text(e.error) if e.error is not None else None}
            for e in r.engines
        ]
    if r.attribution is not None:
        out["gpu_attribution"] = {
            "engine_claimed_vram": r.attribution.claimed_vram,
            "nvml_engine_bytes": r.attribution.nvml_bytes,
            "mismatch": r.attribution.mismatch,
        }
    if isinstance(r.budget, MemoryBudget):
        b = r.budget
        out["budget"] = {
            "pool": b.pool.value,
            "total": b.total,
            "available": b.available,
            "reserve": b.reserve,
            "headroom": b.headroom,
            "level": b.level.value,
            "segments": [
                {"kind": s.kind, "label": s.label, "bytes": s.bytes, "lane": s.lane} for s in b.segments
            ],
            "notes": list(b.notes),
        }
    else:
        out["budget_unavailable"] = r.budget.reason
    if isinstance(r.host.meminfo, MemInfo):
        m = r.host.meminfo
        out["memory"] = {
            "total": m.total,
            "available": m.available,
            "free": m.free,
            "reclaimable": m.reclaimable,
            "swap_free": m.swap_free,
        }
    if isinstance(r.host.pressure, Pressure):
        p = r.host.pressure
        out["pressure"] = {
            "some_avg10": p.some_avg10,
            "some_avg60": p.some_avg60,
            "full_avg10": p.full_avg10,
            "full_avg60": p.full_avg60,
        }
    else:
        out["pressure_unavailable"] = r.host.pressure.reason
    return out
