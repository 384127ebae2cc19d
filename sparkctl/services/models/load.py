"""Side-loading a model beside what is resident, verifying what the engine really did,
and unloading."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkctl.config import Config
from sparkctl.core.fmt import gib
from sparkctl.core.keepalive import parse_keep_alive as _parse_keep_alive
from sparkctl.core.names import same_model, validate_model_name
from sparkctl.core.placement import GpuAttribution, Placement, attribute_gpu_memory, placement
from sparkctl.core.snapshots import GpuProcess, HostSnapshot, ResidentModel
from sparkctl.engines.base import DoneEvent, EngineError, EngineUnreachable
from sparkctl.services.models.common import _find, did_you_mean, lane_label
from sparkctl.services.models.errors import LoadFailed, ModelsRefused
from sparkctl.services.models.fit import FitEstimate, FitReport, fit_check, refusal_reason

log = logging.getLogger(__name__)


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



async def _remember_session(cfg: Config, name: str, keep_alive: str) -> None:
    """Keep the session length sparkctl gave `name` in its state file: a bench that has to
    reload the model later puts it back with it (services/bench/residency_guard.py), not with the
    engine's default. A state file that cannot be written costs only that."""
    from pathlib import Path

    from sparkctl.statefile import StateError, record_session

    state_file = getattr(cfg, "state_file", None)
    try:
        await asyncio.to_thread(record_session, name, keep_alive, Path(state_file) if state_file else None)
    except (StateError, OSError) as exc:
        log.warning("keep-alive of %s not remembered: %s", name, exc)


async def forget_session(cfg: Config, name: str) -> None:
    """sparkctl ended `name`'s session (unloaded, deleted): its [sessions] entry goes, so a
    bench never puts the model back with a session that no longer holds it."""
    from pathlib import Path

    from sparkctl.statefile import StateError
    from sparkctl.statefile import forget_session as forget

    state_file = getattr(cfg, "state_file", None)
    try:
        await asyncio.to_thread(forget, name, Path(state_file) if state_file else None)
    except (StateError, OSError) as exc:
        log.warning("keep-alive of %s not forgotten: %s", name, exc)


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
    fit: FitReport | None = None,
    remember_session: bool = True,
) -> LoadReport:
    """Load `name` beside what is resident, after the fit guard, and verify the result.

    Raises ModelsRefused when the guard says no (unless `force`), LoadFailed when the
    engine fails the load; otherwise returns a report whose verification lists every
    problem loudly (a CPU spill or an evicted lane model is a report, not an exception:
    the model is loaded, and the user decides what to do about it). `remember_session`: keep
    the keep-alive it was given in sparkctl's state file (a promotion does not: its lane's
    session is the lane's, and a switch that fails must leave the file as it was).
    """
    name = validate_model_name(name)
    ka = parse_keep_alive(keep_alive if keep_alive is not None else cfg.models.keep_alive)
    if fit is None:
        fit = await fit_check(cfg, engine, probes, name, num_ctx)
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
    if remember_session:
        await _remember_session(cfg, name, str(keep_alive if keep_alive is not None else cfg.models.keep_alive))
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
                       clock: Callable[[], float] = time.monotonic, cfg: Config | None = None) -> UnloadReport:
    """keep_alive 0, then wait until /api/ps stops listing it (the memory is freed after
    the answer, and a plan made before that would count it twice). `cfg`: the session
    sparkctl set for it is over, and forgotten in its state file."""
    name = validate_model_name(name)
    resident = await engine.ps()
    mine = _find(resident, name)
    if mine is None:
        return UnloadReport(name, False, 0.0, did_you_mean(name, [m.name for m in resident]))
    started = clock()
    await engine.unload(mine.name, wait_s=wait_s)
    waited = clock() - started
    if cfg is not None:
        await forget_session(cfg, mine.name)
    return UnloadReport(mine.name, True, waited)


