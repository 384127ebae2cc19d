from datetime import datetime, timedelta, timezone

import pytest

from sparkctl.core.fit import (
    OVERHEAD_FIXED_BYTES,
    OVERHEAD_FRACTION,
    FitEstimate,
    FitKind,
    default_context,
    engine_default_context,
    estimate_fit,
    eviction_order,
    judge_fit,
    kv_cache_bytes,
)
from sparkctl.core.snapshots import GIB, ResidentModel

MIB = 1024**2


def info(arch="qwen3", **keys):
    out = {"general.architecture": arch}
    out.update({f"{arch}.{k.replace('__', '.')}": v for k, v in keys.items()})
    return out


# A 48-layer model with 8 KV heads of width 128 and a 256k context.
QWEN_LIKE = info(
    block_count=48,
    embedding_length=5120,
    attention__head_count=40,
    attention__head_count_kv=8,
    attention__key_length=128,
    attention__value_length=128,
    context_length=262144,
)


# -- kv_cache_bytes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_info, num_ctx, bpe, expected",
    [
        # the brief's example: 48 x 8 x 128 at 262144 -> 48 GiB
        (QWEN_LIKE, 262144, 2, 48 * GIB),
        (QWEN_LIKE, 32768, 2, 6 * GIB),
        (QWEN_LIKE, 4096, 2, 768 * MIB),
        (QWEN_LIKE, 262144, 34 / 32, int(48 * GIB * 34 / 64)),  # q8_0 cache
        # head_dim from embedding_length / head_count when key_length is absent (4096/32 = 128)
        (info("llama", block_count=32, embedding_length=4096, attention__head_count=32,
              attention__head_count_kv=8), 8192, 2, 1 * GIB),
        # no head_count_kv: plain multi-head attention, kv heads = heads
        (info("llama", block_count=32, embedding_length=4096, attention__head_count=32), 8192, 2, 4 * GIB),
        # per-layer list: a hybrid with attention in 2 of 4 layers
        (info("hybrid", block_count=4, embedding_length=1024, attention__head_count=8,
              attention__head_count_kv=[0, 4, 0, 4]), 1000, 2, 2 * 8 * 128 * 1000 * 2),
        # key and value widths differ: 1 layer, 2 heads, K 192 + V 128, 10 tokens, 2 bytes
        (info("x", block_count=1, attention__head_count=2, attention__head_count_kv=2,
              attention__key_length=192, attention__value_length=128), 10, 2, 2 * (192 + 128) * 10 * 2),
        (QWEN_LIKE, 0, 2, 0),
    ],
)
def test_kv_cache_bytes(model_info, num_ctx, bpe, expected):
    assert kv_cache_bytes(model_info, num_ctx, bpe) == expected


@pytest.mark.parametrize(
    "model_info",
    [
        {},
        {"qwen3.block_count": 48},  # no general.architecture
        info(embedding_length=4096, attention__head_count=32),  # no block_count
        info(block_count=32, attention__head_count=32),  # no embedding_length, no key_length
        info(block_count=32, embedding_length=4096),  # no head counts
        # /api/show without verbose empties arrays longer than 5: unknown, not zero
        info(block_count=32, embedding_length=4096, attention__head_count=32, attention__head_count_kv=[]),
        info(block_count=3, embedding_length=4096, attention__head_count=32, attention__head_count_kv=[8, 8]),
    ],
)
def test_kv_cache_bytes_missing_keys_gives_none(model_info):
    assert kv_cache_bytes(model_info, 4096) is None


# -- default context ------------------------------------------------------------------


@pytest.mark.parametrize(
    "total, expected",
    [
        (0, 4096),
        (16 * GIB, 4096),
        (23 * GIB - 1, 4096),
        (23 * GIB, 32768),  # 24 GiB card reporting a little less
        (47 * GIB - 1, 32768),
        (47 * GIB, 262144),
        (int(119.6 * GIB), 262144),  # a Spark
        (141 * GIB, 262144),  # an H200
    ],
)
def test_engine_default_context_tiers(total, expected):
    assert engine_default_context(total) == expected


@pytest.mark.parametrize(
    "total, model_ctx, env, expected",
    [
        (120 * GIB, 131072, None, 131072),  # capped at the model's own context
        (120 * GIB, 1_000_000, None, 262144),
        (120 * GIB, None, None, 262144),
        (30 * GIB, 131072, None, 32768),
        (8 * GIB, 131072, None, 4096),
        (120 * GIB, 131072, 8192, 8192),  # OLLAMA_CONTEXT_LENGTH wins
        (120 * GIB, 4096, 8192, 4096),  # ...but is capped too
        (120 * GIB, 131072, 0, 131072),  # 0 means unset
    ],
)
def test_default_context(total, model_ctx, env, expected):
    assert default_context(total, model_ctx, env) == expected


# -- estimate_fit ---------------------------------------------------------------------


def test_estimate_spark_default_context_makes_kv_dominate():
    est = estimate_fit(12 * GIB, QWEN_LIKE, total_memory_bytes=int(119.6 * GIB))
    assert est.num_ctx == 262144
    assert est.context_source == "engine default"
    assert est.weights == 12 * GIB
    assert est.kv_cache == 48 * GIB
    assert est.overhead == OVERHEAD_FIXED_BYTES + int(OVERHEAD_FRACTION * 60 * GIB)
    assert est.total == 60 * GIB + est.overhead  # 64 GiB for a 12 GiB download
    assert est.total == 64 * GIB
    assert any("Ollama's default" in n for n in est.notes)


@pytest.mark.parametrize(
    "kwargs, num_ctx, source",
    [
        (dict(num_ctx=8192), 8192, "user"),
        (dict(num_ctx=8192, context_source="config"), 8192, "config"),
        (dict(num_ctx=1_000_000), 262144, "user"),  # capped at trained context
        (dict(total_memory_bytes=30 * GIB), 32768, "engine default"),
        (dict(total_memory_bytes=120 * GIB, env_context=16384), 16384, "engine default"),
        (dict(total_memory_bytes=120 * GIB, env_context=16384, modelfile_num_ctx=2048), 2048, "engine default"),
    ],
)
def test_estimate_context_resolution(kwargs, num_ctx, source):
    est = estimate_fit(12 * GIB, QWEN_LIKE, **kwargs)
    assert est.num_ctx == num_ctx
    assert est.context_source == source
    assert est.kv_cache == 48 * GIB * num_ctx // 262144


def test_estimate_notes_cap():
    est = estimate_fit(12 * GIB, QWEN_LIKE, num_ctx=1_000_000)
    assert "num_ctx 1000000 capped at the model's trained context 262144" in est.notes


def test_estimate_parallel_slots_multiply_kv():
    est = estimate_fit(12 * GIB, QWEN_LIKE, num_ctx=32768, num_parallel=4)
    assert est.num_ctx == 32768
    assert est.kv_cache == 24 * GIB


def test_estimate_without_kv_keys_says_so():
    est = estimate_fit(4 * GIB, info(block_count=32), num_ctx=4096)
    assert est.kv_cache is None
    assert est.total == 4 * GIB + est.overhead
    assert any(n.startswith("KV cache unknown") for n in est.notes)


def test_estimate_needs_a_context_or_memory_total():
    with pytest.raises(ValueError):
        estimate_fit(4 * GIB, QWEN_LIKE)


def test_estimate_sliding_window_note():
    est = estimate_fit(4 * GIB, {**QWEN_LIKE, "qwen3.attention.sliding_window": 4096}, num_ctx=4096)
    assert any("sliding-window" in n for n in est.notes)


# -- judge_fit ------------------------------------------------------------------------

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


def resident(name, size_gib, expires_in_min):
    return ResidentModel(
        name=name,
        size=int(size_gib * GIB),
        size_vram=int(size_gib * GIB),
        expires_at=T0 + timedelta(minutes=expires_in_min),
    )


def estimate(total_gib):
    t = int(total_gib * GIB)
    return FitEstimate(weights=t, kv_cache=0, overhead=0, total=t, num_ctx=4096, context_source="user")


PROD = resident("qwen3.5:35b-a3b", 30, expires_in_min=60 * 24 * 365 * 100)  # keep_alive -1
SCRATCH = resident("llama3.2:3b", 4, expires_in_min=3)
OTHER = resident("gemma3:12b", 12, expires_in_min=5)


def test_fits_with_spare():
    v = judge_fit(estimate(20), available_bytes=60 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD], lane_models={"qwen3.5:35b-a3b"}, already_resident=False)
    assert v.kind is FitKind.FITS
    assert v.spare == 24 * GIB
    assert v.evicts == ()
    assert not v.refused_by_default
    assert v.reason == "fits: needs 20.0 GiB of 44.0 GiB available above the 16.0 GiB reserve (24.0 GiB spare)"


def test_below_reserve_without_residents_does_not_fit():
    v = judge_fit(estimate(50), available_bytes=60 * GIB, reserve_bytes=16 * GIB,
                  resident=[], lane_models=set(), already_resident=False)
    assert v.kind is FitKind.DOES_NOT_FIT
    assert v.spare == -6 * GIB
    assert v.refused_by_default
    assert v.reason == (
        "does not fit: needs 50.0 GiB but only 44.0 GiB would be available above the 16.0 GiB reserve "
        "(6.0 GiB short)"
    )


def test_evicts_in_ollama_order_shortest_keep_alive_first():
    # needs 10 more than available: scratch (4) goes first, then gemma (12) -> enough.
    v = judge_fit(estimate(38), available_bytes=44 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD, OTHER, SCRATCH], lane_models={"qwen3.5:35b-a3b"},
                  already_resident=False)
    assert v.kind is FitKind.FITS_BY_EVICTING
    assert v.evicts == ("llama3.2:3b", "gemma3:12b")
    assert v.evicts_lanes == ()
    assert v.spare == 6 * GIB
    assert not v.refused_by_default
    assert v.reason.startswith("fits only by evicting llama3.2:3b, gemma3:12b:")


def test_verdict_names_the_production_model_when_it_must_be_evicted():
    v = judge_fit(estimate(60), available_bytes=44 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD, SCRATCH], lane_models={"qwen3.5:35b-a3b": "production"},
                  already_resident=False)
    assert v.kind is FitKind.FITS_BY_EVICTING
    assert v.evicts == ("llama3.2:3b", "qwen3.5:35b-a3b")
    assert v.evicts_lanes == ("qwen3.5:35b-a3b",)
    assert v.refused_by_default
    assert "qwen3.5:35b-a3b (lane production)" in v.reason
    assert "\n" not in v.reason


def test_lane_match_uses_ollama_name_rules():
    prod = resident("qwen3:latest", 30, expires_in_min=1)
    v = judge_fit(estimate(40), available_bytes=44 * GIB, reserve_bytes=16 * GIB,
                  resident=[prod], lane_models={"Qwen3"}, already_resident=False)
    assert v.evicts_lanes == ("qwen3:latest",)
    assert "qwen3:latest (a lane model)" in v.reason


def test_does_not_fit_even_after_evicting_everything():
    v = judge_fit(estimate(100), available_bytes=44 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD, SCRATCH], lane_models=set(), already_resident=False)
    assert v.kind is FitKind.DOES_NOT_FIT
    assert v.evicts == ()
    assert v.spare == (28 + 34 - 100) * GIB
    assert "even after evicting every resident model" in v.reason


def test_already_resident_needs_nothing():
    v = judge_fit(estimate(100), available_bytes=20 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD], lane_models=set(), already_resident=True)
    assert v.kind is FitKind.FITS
    assert v.needed == 0
    assert v.reason.startswith("already resident")


def test_reloading_same_model_reuses_its_memory():
    old = resident("contender:7b", 10, expires_in_min=1)
    v = judge_fit(estimate(36), available_bytes=44 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD, old], lane_models=set(), already_resident=False,
                  model_name="contender:7b")
    assert v.kind is FitKind.FITS
    assert v.needed == 26 * GIB


def test_max_loaded_models_forces_eviction_by_count():
    v = judge_fit(estimate(1), available_bytes=100 * GIB, reserve_bytes=16 * GIB,
                  resident=[PROD, OTHER, SCRATCH], lane_models={"qwen3.5:35b-a3b"},
                  already_resident=False, max_loaded_models=3)
    assert v.kind is FitKind.FITS_BY_EVICTING
    assert v.evicts == ("llama3.2:3b",)
    assert "Ollama keeps at most 3 models loaded" in v.reason


def test_discrete_gpu_frees_only_vram():
    split = ResidentModel(name="big:70b", size=40 * GIB, size_vram=10 * GIB, expires_at=T0)
    v = judge_fit(estimate(20), available_bytes=20 * GIB, reserve_bytes=2 * GIB,
                  resident=[split], lane_models=set(), already_resident=False, unified_memory=False)
    assert v.kind is FitKind.FITS_BY_EVICTING
    assert v.spare == 8 * GIB


def test_unknown_kv_is_flagged_in_reason():
    est = FitEstimate(weights=GIB, kv_cache=None, overhead=0, total=GIB, num_ctx=4096, context_source="user")
    v = judge_fit(est, 40 * GIB, 16 * GIB, [], set(), False)
    assert v.reason.endswith("KV cache unknown, estimate is low")


def test_eviction_order_unknown_expiry_last_then_name():
    a = ResidentModel(name="b", size=1, size_vram=1, expires_at=None)
    b = ResidentModel(name="a", size=1, size_vram=1, expires_at=None)
    c = resident("z", 1, expires_in_min=1)
    assert [m.name for m in eviction_order([a, b, c])] == ["z", "a", "b"]
