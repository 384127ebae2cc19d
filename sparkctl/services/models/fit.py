"""The fit check for a stored model: weights + KV cache at the context the engine would
choose, judged against the live budget, and the guard's refusal built from it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkctl.config import Config
from sparkctl.core.budget import MemoryBudget, Pool, build_budget, choose_pool
from sparkctl.core.engine_settings import ASSUMED, FIT_SETTINGS, EngineSettings
from sparkctl.core.fit import (
    KV_CACHE_TYPE_BYTES,
    FitEstimate,
    FitKind,
    FitVerdict,
    engine_default_context,
    estimate_fit,
    judge_fit,
    model_context_length,
)
from sparkctl.core.fmt import gib
from sparkctl.core.names import unique_by_name, validate_model_name
from sparkctl.core.snapshots import GpuMemory, HostSnapshot, MemInfo, ResidentModel
from sparkctl.engines.base import ModelNotFound
from sparkctl.services.engine_settings import read_engine_settings
from sparkctl.services.models.common import _find, lane_map, not_found


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
    settings: EngineSettings | None = None  # the server's settings the estimate assumed, and where from

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
        out.extend(f"  {line}" for line in settings_lines(self.settings))
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
            "engine_settings": None if self.settings is None else self.settings.to_dict(),
        }


def settings_lines(settings: EngineSettings | None) -> list[str]:
    """Where the server's settings came from; when some could not be read, which values
    were assumed and from where (the verdict is only as good as they are)."""
    if settings is None:
        return []
    out = [f"server     settings {settings.where}"]
    assumed = settings.assumed_line(FIT_SETTINGS)
    if assumed:
        out.append(f"assumed    {assumed}")
        if any(settings.get(n).source.startswith(ASSUMED) for n in FIT_SETTINGS):
            out.append("           (for a server sparkctl cannot read, state its settings in [engine]: docs/engines.md)")
    out.extend(f"note       {n}" for n in settings.notes)
    return out


_MODELFILE_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def modelfile_num_ctx(parameters: str) -> int | None:
    m = _MODELFILE_NUM_CTX.search(parameters or "")
    return int(m.group(1)) if m else None


def gpu_memory_total(host: HostSnapshot) -> int:
    """The GPU memory Ollama sums to pick its default context (0 without a GPU)."""
    pool, dev = choose_pool(host.gpu)
    if pool is Pool.UNIFIED:
        return host.meminfo.total if isinstance(host.meminfo, MemInfo) else 0
    if pool is Pool.VRAM:
        return sum(g.memory.total for g in host.gpu.gpus if isinstance(g.memory, GpuMemory))
    return 0


def context_note(e: FitEstimate, *, total_gpu: int, trained: int | None, modelfile: int | None,
                 env_ctx: int | None, parallel: int = 1, ctx_source: str = "", parallel_source: str = "") -> str:
    """Which context the estimate assumes and why, in one line."""
    if e.context_source == "user":
        why = "as asked (--ctx / the form)"
    elif e.context_source == "config":
        why = "from [models] num_ctx in the config"
    elif modelfile:
        why = f"the engine's choice: the model's Modelfile sets num_ctx {modelfile}"
    elif env_ctx:
        why = f"the engine's choice: {ctx_source or f'OLLAMA_CONTEXT_LENGTH={env_ctx}'}"
    else:
        why = (f"the engine's choice: Ollama's default for {gib(total_gpu)} of GPU memory is "
               f"{engine_default_context(total_gpu)}")
    if trained is not None and any("capped" in n for n in e.notes):
        why += f", capped at the model's trained context {trained}"
    if parallel > 1:
        why += f", x{parallel} parallel slots" + (f" ({parallel_source})" if parallel_source else "")
    hint = "" if e.context_source == "user" else "; set --ctx or [models] num_ctx to plan for another"
    return f"num_ctx {e.num_ctx}: {why}{hint}"


async def fit_check(
    cfg: Config,
    engine: Any,
    probes: Any,
    name: str,
    num_ctx: int | None = None,
    *,
    settings: EngineSettings | None = None,
) -> FitReport:
    """Estimate the resident size of `name` and judge it against the live budget, with the
    server's own settings (services/engine_settings.py) unless `settings` are given."""
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
    return await judge_model(cfg, engine.host, probes, name, stored.size, show.model_info, tuple(resident),
                             num_ctx, settings=settings, modelfile_ctx=modelfile_num_ctx(show.parameters),
                             engine_version=version)


async def judge_model(
    cfg: Config,
    engine_host: str,
    probes: Any,
    name: str,
    size: int,
    model_info: Mapping[str, Any],
    resident: tuple[ResidentModel, ...],
    num_ctx: int | None = None,
    *,
    settings: EngineSettings | None = None,
    modelfile_ctx: int | None = None,
    engine_version: str | None = None,
) -> FitReport:
    """The verdict for a model of `size` bytes with this `model_info` (GGUF metadata), at
    the context the engine would choose here, beside what is `resident`. The one judge for
    stored models (/api/show) and remote ones (the registry's GGUF header)."""
    if settings is None:
        host, settings = await asyncio.gather(
            asyncio.to_thread(probes.read), asyncio.to_thread(read_engine_settings, cfg, engine_host, engine_version))
    else:
        host = await asyncio.to_thread(probes.read)

    # The server's settings, never this shell's: its process, its unit, what [engine] states
    # for a server that cannot be read, else Ollama's defaults (each says where it came from)
    ctx_value = settings.context_length.value
    env_ctx = ctx_value if isinstance(ctx_value, int) and ctx_value > 0 else None
    parallel = int(settings.num_parallel.value or 1)
    cache_type, cache_bytes = settings.kv_cache(KV_CACHE_TYPE_BYTES)
    if num_ctx is not None and num_ctx > 0:
        request, source = num_ctx, "user"
    elif cfg.models.num_ctx > 0:
        request, source = cfg.models.num_ctx, "config"
    else:
        request, source = None, "user"
    total_gpu = gpu_memory_total(host)
    estimate = estimate_fit(
        size,
        model_info,
        request,
        context_source=source,
        total_memory_bytes=total_gpu,
        env_context=env_ctx,
        modelfile_num_ctx=modelfile_ctx,
        num_parallel=parallel,
        kv_bytes_per_element=cache_bytes,
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
        max_loaded = settings.max_models(gpus)
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
    note = context_note(estimate, total_gpu=total_gpu, trained=model_context_length(model_info),
                        modelfile=modelfile_ctx, env_ctx=env_ctx, parallel=parallel,
                        ctx_source=(settings.context_length.source if settings.context_length.read
                                    else f"{env_ctx} ({settings.context_length.source})"),
                        parallel_source=settings.num_parallel.source)
    kv_said = settings.kv_cache_said(KV_CACHE_TYPE_BYTES)
    if kv_said:
        note += f"; {kv_said}"
    return FitReport(
        model=name,
        size=size,
        estimate=estimate,
        verdict=verdict,
        budget=budget,
        unavailable=unavailable,
        context_note=note,
        resident=resident,
        already_resident=already,
        request_num_ctx=request,
        host=host,
        engine_version=engine_version,
        settings=settings,
    )


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


