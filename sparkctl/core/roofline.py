"""The memory-bandwidth ceiling on decode speed, and how close a run came to it.

Decoding one token reads every active weight once (plus the KV cache so far), so
tok/s <= bandwidth / bytes read per token. On a Spark (273 GB/s) a model that reads
4 GB a token cannot decode faster than ~68 tok/s whatever the software does. The
ceiling is an upper bound: compute, kernel launches and KV reads keep real runs below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkctl.core.fit import arch_value

SPARK_BANDWIDTH_BYTES_PER_S = 273e9  # LPDDR5X-8533 on a 256-bit bus

# Bits per weight of Ollama's quantization_level strings: the GGUF block size in bits
# (quantised values plus their per-block scales and mins) divided by the weights in a
# block. Q4_0 packs 32 weights in 18 bytes (16 of 4-bit values + an fp16 scale) = 4.5;
# Q8_0 32 in 34 = 8.5; the K-quants use 256-weight super-blocks (Q4_K 144 bytes = 4.5,
# Q6_K 210 bytes = 6.5625). The _S/_M/_L names are mixes that keep some tensors at a
# higher type, so their figures are typical averages from llama.cpp, not exact.
# MXFP4: 32 FP4 values + one E8M0 scale byte = 17 bytes / 32 = 4.25; NVFP4: 16 FP4
# values + one FP8 scale = 9 bytes / 16 = 4.5; MXFP8: 33 bytes / 32 = 8.25.
_BITS_PER_WEIGHT: dict[str, float] = {
    "F32": 32.0,
    "F16": 16.0,
    "BF16": 16.0,
    "FP8": 8.0,
    "MXFP8": 8.25,
    "Q8_0": 8.5,
    "Q8_K": 9.125,
    "Q6_K": 6.5625,
    "Q5_0": 5.5,
    "Q5_1": 6.0,
    "Q5_K": 5.5,
    "Q5_K_S": 5.54,  # mix
    "Q5_K_M": 5.69,  # mix
    "Q4_0": 4.5,
    "Q4_1": 5.0,
    "Q4_K": 4.5,
    "Q4_K_S": 4.58,  # mix
    "Q4_K_M": 4.85,  # mix
    "Q3_K": 3.4375,
    "Q3_K_S": 3.5,  # mix
    "Q3_K_M": 3.91,  # mix
    "Q3_K_L": 4.27,  # mix
    "Q2_K": 2.625,  # block size; the Q2_K mix runs nearer 3
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.25,
    "IQ3_S": 3.4375,
    "IQ3_XXS": 3.0625,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.3125,
    "IQ2_XXS": 2.0625,
    "IQ1_M": 1.75,
    "IQ1_S": 1.5625,
    "MXFP4": 4.25,
    "NVFP4": 4.5,
}


def bits_per_weight_from_quant(quant_level: str) -> float | None:
    """Bits per weight for a quantization_level such as "Q4_K_M"; None when unknown."""
    if not isinstance(quant_level, str):
        return None
    key = quant_level.strip().upper().replace("-", "_")
    return _BITS_PER_WEIGHT.get(key)


def bits_per_weight_from_size(file_size_bytes: int, parameter_count: int) -> float | None:
    """The file's average bits per weight: more faithful than the label for mixed quants,
    though it also counts the few non-weight bytes (tokenizer, metadata)."""
    if parameter_count <= 0 or file_size_bytes <= 0:
        return None
    return file_size_bytes * 8 / parameter_count


def active_params(model_info: Mapping[str, Any], total_params: int | None = None) -> int | None:
    """Parameters read per token: all of them for a dense model, fewer for a MoE.

    For a mixture of experts (ARCH.expert_count / expert_used_count present) only
    used/count of the routed experts run per token. The routed-expert share is
    approximated from the shapes as
        moe_layers x expert_count x 3 x embedding_length x expert_feed_forward_length
    (gate, up and down projections; moe_layers = block_count - leading_dense_block_count)
    and the rest (attention, embeddings, shared experts) counts in full. This lands near
    published figures (qwen3-30b-a3b ~3.3B, gpt-oss-20b ~4B vs 3.6B). Without the
    expert sizes it falls back to total x used / count, which undercounts the active
    share and so keeps the derived ceiling an upper bound.
    """
    total = total_params if total_params is not None else model_info.get("general.parameter_count")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total <= 0:
        return None
    total = int(total)
    count = arch_value(model_info, "expert_count")
    used = arch_value(model_info, "expert_used_count")
    if not isinstance(count, int) or not isinstance(used, int) or count <= 0 or used <= 0:
        return total
    if used >= count:
        return total
    unused_share = 1 - used / count

    layers = arch_value(model_info, "block_count")
    dense = arch_value(model_info, "leading_dense_block_count") or 0
    width = arch_value(model_info, "embedding_length")
    ffn = arch_value(model_info, "expert_feed_forward_length")
    if ffn is None:
        ffn = arch_value(model_info, "feed_forward_length")
    if all(isinstance(v, int) and v > 0 for v in (layers, width, ffn)) and isinstance(dense, int):
        moe_layers = max(0, layers - dense)
        expert_params = moe_layers * count * 3 * width * ffn
        expert_params = min(expert_params, total)
        return int(round(total - expert_params * unused_share))
    return int(round(total * used / count))


def bytes_per_token(active_params: float, bits_per_weight: float) -> float:
    """Weight bytes read to decode one token."""
    if active_params < 0 or bits_per_weight < 0:
        raise ValueError("active_params and bits_per_weight must be >= 0")
    return active_params * bits_per_weight / 8


def decode_ceiling_tps(bandwidth_bytes_per_s: float, bytes_per_token: float) -> float:
    """The fastest decode the memory bus allows, in tokens per second."""
    if bytes_per_token <= 0:
        raise ValueError(f"bytes_per_token must be > 0, got {bytes_per_token}")
    return bandwidth_bytes_per_s / bytes_per_token


@dataclass(frozen=True)
class Roofline:
    ceiling_tps: float
    pct_of_ceiling: float | None  # None without a measured speed
    bytes_per_token: float


def roofline(
    measured_tps: float | None,
    active_params: float,
    bits_per_weight: float,
    bandwidth_bytes_per_s: float = SPARK_BANDWIDTH_BYTES_PER_S,
    kv_bytes_per_token: float = 0.0,
) -> Roofline:
    """Ceiling for a model and the share of it a measured decode speed reached.

    `kv_bytes_per_token` adds the KV cache read per generated token (the cache size
    at the current position) when the caller knows it; without it the ceiling is a
    looser upper bound.
    """
    per_token = bytes_per_token(active_params, bits_per_weight) + kv_bytes_per_token
    ceiling = decode_ceiling_tps(bandwidth_bytes_per_s, per_token)
    pct = None if measured_tps is None else measured_tps / ceiling * 100.0
    return Roofline(ceiling_tps=ceiling, pct_of_ceiling=pct, bytes_per_token=per_token)
