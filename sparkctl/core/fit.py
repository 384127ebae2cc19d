"""Will a model fit in memory, and what would loading it evict?

The estimate is weights + KV cache + overhead, all from data the engine already gives
(/api/tags size, /api/show model_info); the verdict compares it with available memory
above sparkctl's reserve and, when that is not enough, walks the resident models in the
order Ollama would evict them.

Ollama facts used here (server code, v0.15-v0.33):
- The default context is chosen once at server start from the summed GPU memory
  (`server/routes.go`, "vram-based default context"): >= 47 GiB -> 262144,
  >= 23 GiB -> 32768, else 4096. The code's comment says the thresholds sit 1 GiB below
  the documented 48/24 GiB tiers "to account for small differences in the exact value".
- Precedence for num_ctx: the request's options, then the Modelfile's PARAMETER num_ctx,
  then OLLAMA_CONTEXT_LENGTH, then that VRAM tier (used when num_ctx is still 0).
- On load a num_ctx larger than the model's trained context is lowered to it, with only a
  server-log warning (`llm/server.go`).
- With OLLAMA_NUM_PARALLEL = p the runner is started with num_ctx x p.
- Eviction (`server/sched.go` findRunnerToUnload): runners sorted by keep-alive duration,
  shortest first, ties by model path; the first idle one goes; repeat until the new
  model fits. /api/ps shows expires_at, not the keep-alive, so the earliest expiry is
  used here as the stand-in for the shortest keep-alive.
- OLLAMA_MAX_LOADED_MODELS (default 3 per GPU) makes it evict by count as well.

Pure core of sparkctl.services.models.fit, which reads the engine and the host and asks here.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from sparkctl.core.fmt import gib
from sparkctl.core.names import InvalidModelName, canonical_model_name
from sparkctl.core.snapshots import GIB, ResidentModel

# Ollama's VRAM tiers for the default context (server/routes.go).
DEFAULT_CTX_LARGE = 262144
DEFAULT_CTX_MEDIUM = 32768
DEFAULT_CTX_SMALL = 4096
LARGE_TIER_MIN_BYTES = 47 * GIB
MEDIUM_TIER_MIN_BYTES = 23 * GIB

# Bytes per KV-cache element for OLLAMA_KV_CACHE_TYPE (GGUF block sizes: q8_0 stores
# 32 values in 34 bytes, q4_0 in 18). Ollama honours the quantised types only with
# flash attention on.
KV_CACHE_TYPE_BYTES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}

# Overhead on top of weights + KV cache. The fixed part covers what a runner costs
# whatever the model: the CUDA context, cuBLAS/cuDNN workspaces and the runner process
# itself (together several hundred MiB on CUDA), plus compute-graph buffers at the
# default batch size. The proportional part covers what grows with the model and the
# context: wider compute buffers, output/logit buffers and allocator rounding. The
# figures are deliberately on the generous side: on a Spark an over-optimistic "fits"
# can freeze the machine, while a pessimistic one only costs a warning.
OVERHEAD_FIXED_BYTES = 1 * GIB
OVERHEAD_FRACTION = 0.05

CONTEXT_SOURCES = ("user", "config", "engine default")


# -- model_info helpers ---------------------------------------------------------------


def _arch(model_info: Mapping[str, Any]) -> str | None:
    arch = model_info.get("general.architecture")
    return arch if isinstance(arch, str) and arch else None


def arch_value(model_info: Mapping[str, Any], key: str) -> Any:
    """`ARCH.key` from /api/show model_info, ARCH being general.architecture."""
    arch = _arch(model_info)
    if arch is None:
        return None
    return model_info.get(f"{arch}.{key}")


# The largest value a model's shape can plausibly hold (layers, heads, widths, windows,
# contexts). A GGUF header or an engine's reply may carry anything a uint64 holds; a value
# past these is treated as missing, never multiplied out (a per-layer list of 2**63 layers
# cannot be built, and a product of such numbers overflows a float).
MAX_SHAPE_VALUE = 2**40
MAX_LAYERS = 65536


def _pos_int(v: Any) -> int | None:
    """A positive whole number up to MAX_SHAPE_VALUE, or None (bools and non-integral
    floats are rejected)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if 0 < v <= MAX_SHAPE_VALUE else None
    if isinstance(v, float) and v.is_integer() and 0 < v <= MAX_SHAPE_VALUE:
        return int(v)
    return None


def _layers(model_info: Mapping[str, Any]) -> int | None:
    n = _pos_int(arch_value(model_info, "block_count"))
    return n if n is not None and n <= MAX_LAYERS else None


def implausible_shape(model_info: Mapping[str, Any]) -> str | None:
    """The first shape value a fit cannot use because it is out of any model's range
    ("block_count 9223372036854775807"), or None."""
    arch = _arch(model_info)
    if arch is None:
        return None
    for key, value in model_info.items():
        if not key.startswith(arch + ".") or isinstance(value, bool):
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        limit = MAX_LAYERS if key == f"{arch}.block_count" else MAX_SHAPE_VALUE
        for v in values:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > limit:
                return f"{key.removeprefix(arch + '.')} {v:g}" if isinstance(v, float) else \
                    f"{key.removeprefix(arch + '.')} {v}"
    return None


def _per_layer(v: Any, layers: int) -> list[int] | None:
    """A per-layer count: a scalar repeated, or a list of one entry per layer.

    None when missing or unusable. /api/show empties arrays longer than 5 items unless
    it is asked with "verbose": true, so an empty list means "not sent", not "zero".
    """
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        n = _pos_int(v) if v != 0 else 0
        return None if n is None else [n] * layers
    if isinstance(v, (list, tuple)):
        if len(v) != layers:
            return None
        out: list[int] = []
        for item in v:
            if isinstance(item, bool) or not isinstance(item, (int, float)) or item < 0:
                return None
            if isinstance(item, float) and not item.is_integer():
                return None
            out.append(int(item))
        return out
    return None


def model_context_length(model_info: Mapping[str, Any]) -> int | None:
    """The context the model was trained for (ARCH.context_length)."""
    return _pos_int(arch_value(model_info, "context_length"))


# Sliding-window layers as llama.cpp lays them out (src/llama-model.cpp, each architecture's
# `hparams.set_swa_pattern(period)`): in every `period` layers the first period - 1 are
# windowed and the last attends to everything. Only architectures whose loader was read
# are listed; another architecture with a sliding window and no
# ARCH.attention.sliding_window_pattern key is estimated as if every layer were full.
SWA_PERIOD_BY_ARCH: dict[str, int] = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4,
                                      "gemma-embedding": 6, "llama4": 4}
# Windows llama.cpp assumes when the GGUF has no ARCH.attention.sliding_window key.
SWA_DEFAULT_WINDOW: dict[str, int] = {"gemma2": 4096, "llama4": 8192}
# llama.cpp's iSWA cache keeps window + one micro-batch of cells per sequence (n_ubatch
# 512, Ollama's num_batch default too), and rounds cache sizes up to 256 cells.
SWA_UBATCH = 512
KV_CELL_PAD = 256


def pad_cells(n: int) -> int:
    """`n` rounded up to llama.cpp's cache granularity (256 cells)."""
    return -(-n // KV_CELL_PAD) * KV_CELL_PAD


@dataclass(frozen=True)
class SlidingWindow:
    window: int  # tokens a windowed layer attends to
    layers: tuple[bool, ...]  # per layer: True = windowed

    @property
    def count(self) -> int:
        return sum(self.layers)


def sliding_window(model_info: Mapping[str, Any]) -> SlidingWindow | None:
    """Which layers are windowed, and the window, or None (no window, or the pattern is unknown)."""
    arch = _arch(model_info)
    layers = _layers(model_info)
    if arch is None or layers is None:
        return None
    window = _pos_int(arch_value(model_info, "attention.sliding_window")) or SWA_DEFAULT_WINDOW.get(arch)
    if window is None:
        return None
    pattern = arch_value(model_info, "attention.sliding_window_pattern")
    if isinstance(pattern, (list, tuple)) and len(pattern) == layers and all(
            isinstance(x, (bool, int)) for x in pattern):
        return SlidingWindow(window, tuple(bool(x) for x in pattern))
    period = pattern if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 0 \
        else SWA_PERIOD_BY_ARCH.get(arch)
    if period is None:
        return None
    return SlidingWindow(window, tuple(period == 0 or i % period < period - 1 for i in range(layers)))


def kv_cache_bytes(
    model_info: Mapping[str, Any], num_ctx: int, bytes_per_element: float = 2, *, slots: int = 1
) -> int | None:
    """KV-cache size for `num_ctx` tokens (all `slots` together): per layer, 2 x kv heads x
    head dim x cells x bytes.

    K and V are counted separately so a model whose key and value heads differ in width
    (ARCH.attention.key_length / value_length) is right; with equal widths this is the
    usual 2 x block_count x head_count_kv x head_dim x num_ctx x bytes. head_dim is
    ARCH.attention.key_length when present, else embedding_length / head_count. Per-layer
    lists (hybrid models give 0 KV heads to non-attention layers) are summed. A missing
    head_count_kv means plain multi-head attention (GGUF's rule), so head_count is used.
    None when a needed key is missing.

    A sliding-window layer (see `sliding_window`) holds, per slot, the window plus one
    micro-batch (rounded up to 256 cells) or the slot's context if that is smaller, as
    llama.cpp's iSWA cache does; its head sizes may differ (ARCH.attention.key_length_swa).
    Still an upper bound for MLA models (deepseek2), whose real caches are smaller.
    """
    if num_ctx < 0:
        raise ValueError(f"num_ctx must be >= 0, got {num_ctx}")
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    layers = _layers(model_info)
    if layers is None:
        return None
    head_count = _per_layer(arch_value(model_info, "attention.head_count"), layers)
    raw_kv = arch_value(model_info, "attention.head_count_kv")
    kv_heads = head_count if raw_kv is None else _per_layer(raw_kv, layers)
    if kv_heads is None:
        return None
    key_len = _pos_int(arch_value(model_info, "attention.key_length"))
    value_len = _pos_int(arch_value(model_info, "attention.value_length"))
    embedding = _pos_int(arch_value(model_info, "embedding_length"))
    swa = sliding_window(model_info)
    swa_cells = 0
    if swa is not None:
        per_slot = num_ctx // slots
        swa_cells = slots * min(per_slot, pad_cells(swa.window + SWA_UBATCH))
        key_len_swa = _pos_int(arch_value(model_info, "attention.key_length_swa")) or key_len
        value_len_swa = _pos_int(arch_value(model_info, "attention.value_length_swa")) or value_len

    total = 0.0
    for i in range(layers):
        kv = kv_heads[i]
        if kv == 0:
            continue
        windowed = swa is not None and swa.layers[i]
        k_dim = key_len_swa if windowed else key_len
        if k_dim is None:
            hc = head_count[i] if head_count is not None else 0
            if embedding is None or hc <= 0:
                return None
            k_dim = embedding // hc
        v_dim = (value_len_swa if windowed else value_len) or k_dim
        cells = swa_cells if windowed else num_ctx
        total += kv * (k_dim + v_dim) * cells
    return int(math.ceil(total * bytes_per_element))


def _kv_missing_reason(model_info: Mapping[str, Any]) -> str:
    if _arch(model_info) is None:
        return "model_info has no general.architecture"
    for key in ("attention.head_count_kv", "attention.head_count"):
        v = arch_value(model_info, key)
        if isinstance(v, (list, tuple)) and len(v) == 0:
            return f"ARCH.{key} came back empty (ask /api/show with verbose: true)"
    for key in ("block_count", "attention.head_count"):
        if arch_value(model_info, key) is None:
            return f"model_info lacks ARCH.{key}"
    return "model_info lacks the sizes the KV cache needs"


# -- context --------------------------------------------------------------------------


def engine_default_context(total_gpu_memory_bytes: int) -> int:
    """Ollama's VRAM-tier default num_ctx for a server that sees this much GPU memory.

    Ollama sums TotalMemory - OLLAMA_GPU_OVERHEAD over its GPUs; on a Spark that is the
    unified pool (~120 GiB), so every model gets 262144 unless told otherwise.
    """
    if total_gpu_memory_bytes >= LARGE_TIER_MIN_BYTES:
        return DEFAULT_CTX_LARGE
    if total_gpu_memory_bytes >= MEDIUM_TIER_MIN_BYTES:
        return DEFAULT_CTX_MEDIUM
    return DEFAULT_CTX_SMALL


def default_context(
    total_memory_bytes: int,
    model_context_length: int | None,
    env_context: int | None = None,
) -> int:
    """The num_ctx Ollama gives a request that sets none.

    OLLAMA_CONTEXT_LENGTH (`env_context`) wins over the VRAM tier when set above 0; the
    result is then capped at the model's trained context, as the runner does on load.
    """
    ctx = env_context if env_context and env_context > 0 else engine_default_context(
        total_memory_bytes
    )
    if model_context_length and model_context_length > 0:
        ctx = min(ctx, model_context_length)
    return ctx


# -- estimate -------------------------------------------------------------------------


@dataclass(frozen=True)
class FitEstimate:
    """What loading a model would take, in bytes."""

    weights: int
    kv_cache: int | None  # None when model_info lacks the sizes; total then excludes it
    overhead: int
    total: int
    num_ctx: int  # the context the engine would actually run with
    context_source: str  # "user" | "config" | "engine default"
    notes: tuple[str, ...] = ()


def estimate_fit(
    model_size: int,
    model_info: Mapping[str, Any],
    num_ctx: int | None = None,
    *,
    context_source: str = "user",
    total_memory_bytes: int | None = None,
    env_context: int | None = None,
    modelfile_num_ctx: int | None = None,
    num_parallel: int = 1,
    kv_bytes_per_element: float = 2,
) -> FitEstimate:
    """Estimate the resident size of a model of `model_size` bytes on disk.

    `num_ctx` is the context sparkctl will request (from the user or from config, named
    by `context_source`). Without one the engine decides: the Modelfile's num_ctx,
    else OLLAMA_CONTEXT_LENGTH, else the VRAM tier of `total_memory_bytes`.
    """
    if model_size < 0:
        raise ValueError(f"model_size must be >= 0, got {model_size}")
    if num_parallel < 1:
        raise ValueError(f"num_parallel must be >= 1, got {num_parallel}")
    notes: list[str] = []
    trained = model_context_length(model_info)

    if num_ctx is not None and num_ctx > 0:
        if context_source not in ("user", "config"):
            raise ValueError(f"context_source must be 'user' or 'config', got {context_source!r}")
        source = context_source
        requested = num_ctx
    else:
        source = "engine default"
        if modelfile_num_ctx and modelfile_num_ctx > 0:
            requested = modelfile_num_ctx
            notes.append(f"num_ctx {requested} from the model's Modelfile")
        elif env_context and env_context > 0:
            requested = env_context
            notes.append(f"num_ctx {requested}: the server's default context (OLLAMA_CONTEXT_LENGTH, or its version's default)")
        elif total_memory_bytes is not None:
            requested = engine_default_context(total_memory_bytes)
            notes.append(
                f"num_ctx {requested}: Ollama's default for {gib(total_memory_bytes)} of GPU memory"
            )
        else:
            raise ValueError("no num_ctx given and no GPU memory total to derive Ollama's default")

    effective = requested
    if trained is not None and requested > trained:
        effective = trained
        notes.append(f"num_ctx {requested} capped at the model's trained context {trained}")

    runner_ctx = effective * num_parallel
    if num_parallel > 1:
        notes.append(f"KV cache sized for {num_parallel} parallel slots ({runner_ctx} tokens)")

    # llama.cpp rounds the cache up to whole 256-cell blocks
    kv = kv_cache_bytes(model_info, pad_cells(runner_ctx), kv_bytes_per_element, slots=num_parallel)
    if kv is None:
        notes.append(f"KV cache unknown: {_kv_missing_reason(model_info)}")
    else:
        swa = sliding_window(model_info)
        if swa is not None:
            notes.append(f"sliding-window attention: {swa.count} of {len(swa.layers)} layers keep only "
                         f"{swa.window} + {SWA_UBATCH} tokens (llama.cpp's iSWA cache)")
        elif arch_value(model_info, "attention.sliding_window") is not None:
            notes.append("sliding-window attention with an unknown layer pattern: every layer counted "
                         "in full, so the real KV cache is smaller than estimated")
        if arch_value(model_info, "attention.kv_lora_rank") is not None:
            notes.append("latent (MLA) attention: the real KV cache may be smaller than estimated")

    known = model_size + (kv or 0)
    overhead = OVERHEAD_FIXED_BYTES + int(math.ceil(OVERHEAD_FRACTION * known))
    return FitEstimate(
        weights=model_size,
        kv_cache=kv,
        overhead=overhead,
        total=known + overhead,
        num_ctx=effective,
        context_source=source,
        notes=tuple(notes),
    )


# -- verdict --------------------------------------------------------------------------


class FitKind(str, Enum):
    FITS = "fits"
    FITS_BY_EVICTING = "fits by evicting"
    DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class FitVerdict:
    kind: FitKind
    reason: str  # one line, for the user
    needed: int  # new bytes the load needs (0 when already resident)
    headroom: int  # available - reserve, before any eviction (may be negative)
    spare: int  # bytes left above the reserve after the plan; negative = shortfall
    evicts: tuple[str, ...] = ()  # in the order Ollama would evict them
    evicts_lanes: tuple[str, ...] = ()  # the subset of `evicts` that serve a lane

    @property
    def fits(self) -> bool:
        return self.kind is not FitKind.DOES_NOT_FIT

    @property
    def refused_by_default(self) -> bool:
        """sparkctl's default: refuse a plan below the reserve or one that evicts a lane model."""
        return self.kind is FitKind.DOES_NOT_FIT or bool(self.evicts_lanes)


def eviction_order(resident: Sequence[ResidentModel]) -> list[ResidentModel]:
    """Resident models in the order Ollama would unload them.

    Ollama sorts by keep-alive, shortest first, then by model path. /api/ps exposes
    expires_at instead; the earliest expiry stands in for the shortest keep-alive
    (a "forever" model expires ~290 years out and so comes last). Unknown expiries go
    last; names break ties.
    """

    def key(m: ResidentModel) -> tuple[bool, datetime, str]:
        return (m.expires_at is None, m.expires_at or datetime.max, m.name)

    return sorted(resident, key=key)


def _canon(name: str) -> str:
    try:
        return canonical_model_name(name)
    except InvalidModelName:
        return name.strip().lower()


def _lane_label(name: str, lanes: Mapping[str, str | None]) -> str | None:
    """The lane label of a model name, '' for a lane model with no label, None otherwise."""
    key = _canon(name)
    if key not in lanes:
        return None
    return lanes[key] or ""


def judge_fit(
    estimate: FitEstimate,
    available_bytes: int,
    reserve_bytes: int,
    resident: Sequence[ResidentModel],
    lane_models: Collection[str] | Mapping[str, str],
    already_resident: bool,
    *,
    model_name: str | None = None,
    unified_memory: bool = True,
    max_loaded_models: int | None = None,
) -> FitVerdict:
    """Compare an estimate with the memory above the reserve, evicting as Ollama would.

    `lane_models` is the set of model names that serve a lane, or a mapping from model
    name to lane name (then the reason names the lane). Names match by Ollama's rules
    ("qwen3" is "qwen3:latest", case-insensitive). On unified memory an evicted model
    frees its whole `size`; on a discrete GPU only its `size_vram` comes back to the
    GPU pool. `max_loaded_models` (OLLAMA_MAX_LOADED_MODELS) adds the evictions Ollama
    makes by count even when memory would suffice. A model that is `already_resident`
    needs nothing new, provided it is loaded with the same runner options.
    """
    headroom = available_bytes - reserve_bytes
    reserve_txt = f"the {gib(reserve_bytes)} reserve"

    if already_resident:
        return FitVerdict(
            kind=FitKind.FITS,
            reason=f"already resident: no new memory needed ({gib(headroom)} free above {reserve_txt})",
            needed=0,
            headroom=headroom,
            spare=headroom,
        )

    if isinstance(lane_models, Mapping):
        lanes: dict[str, str | None] = {_canon(m): lane for m, lane in lane_models.items()}
    else:
        lanes = {_canon(m): None for m in lane_models}

    def frees(m: ResidentModel) -> int:
        return m.size if unified_memory else m.size_vram

    # A loaded copy of the same model with other runner options is replaced on load
    # (Ollama reloads it), so its memory comes back without evicting anything else.
    self_key = _canon(model_name) if model_name else None
    ordered = eviction_order(resident)
    candidates = [m for m in ordered if _canon(m.name) != self_key]
    replaced = sum(frees(m) for m in ordered if _canon(m.name) == self_key)

    needed = max(0, estimate.total - replaced)
    kv_caveat = "; KV cache unknown, estimate is low" if estimate.kv_cache is None else ""

    forced = 0
    if max_loaded_models is not None and max_loaded_models > 0:
        forced = max(0, len(candidates) - max_loaded_models + 1)

    if forced == 0 and needed <= headroom:
        spare = headroom - needed
        return FitVerdict(
            kind=FitKind.FITS,
            reason=(
                f"fits: needs {gib(needed)} of {gib(headroom)} available above {reserve_txt} "
                f"({gib(spare)} spare){kv_caveat}"
            ),
            needed=needed,
            headroom=headroom,
            spare=spare,
        )

    evicted: list[ResidentModel] = []
    freed = 0
    for m in candidates:
        if len(evicted) >= forced and needed <= headroom + freed:
            break
        evicted.append(m)
        freed += frees(m)

    spare = headroom + freed - needed
    if spare < 0:
        after = " even after evicting every resident model" if candidates else ""
        return FitVerdict(
            kind=FitKind.DOES_NOT_FIT,
            reason=(
                f"does not fit: needs {gib(needed)} but only {gib(headroom + freed)} would be "
                f"available above {reserve_txt}{after} ({gib(-spare)} short){kv_caveat}"
            ),
            needed=needed,
            headroom=headroom,
            spare=spare,
        )

    names: list[str] = []
    lane_hits: list[str] = []
    for m in evicted:
        label = _lane_label(m.name, lanes)
        if label is None:
            names.append(m.name)
        else:
            lane_hits.append(m.name)
            names.append(f"{m.name} (lane {label})" if label else f"{m.name} (a lane model)")
    why = (
        f"Ollama keeps at most {max_loaded_models} models loaded"
        if forced and needed <= headroom
        else f"needs {gib(needed)}, {gib(headroom)} available above {reserve_txt}"
    )
    return FitVerdict(
        kind=FitKind.FITS_BY_EVICTING,
        reason=(
            f"fits only by evicting {', '.join(names)}: {why}; evicting frees {gib(freed)}"
            f"{kv_caveat}"
        ),
        needed=needed,
        headroom=headroom,
        spare=spare,
        evicts=tuple(m.name for m in evicted),
        evicts_lanes=tuple(lane_hits),
    )
