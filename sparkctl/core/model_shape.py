"""A model's shape as the engine describes it (Ollama's /api/show model_info, GGUF keys;
llama-server's /v1/models meta): layers, KV heads, head dimension, parameters, the weights'
type. Recorded with every bench (tags `model.*`), so a run can be exported with the model
facts a Spark Arena submission carries (dtype, quantization, KV heads, head dim). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# GGUF general.file_type (llama.cpp's llama_ftype) for the types whose weights are not
# quantized: the dtype of an unquantized model.
_FLOAT_FTYPES = {0: "F32", 1: "F16", 32: "BF16"}


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and v > 0:
        return v
    if isinstance(v, float) and v.is_integer() and v > 0:
        return int(v)
    if isinstance(v, (list, tuple)):  # per-layer counts (hybrid models): the attention layers' value
        vals = [x for x in (_int(i) for i in v) if x]
        return max(vals) if vals else None
    return None


def shape(model_info: Mapping[str, Any], quantization: str = "") -> dict[str, str]:
    """`model.*` tags: layers, kv_heads, head_dim, parameter_count, dtype (only what is known)."""
    arch = model_info.get("general.architecture")
    get = (lambda key: model_info.get(f"{arch}.{key}")) if isinstance(arch, str) and arch else (lambda key: None)
    out: dict[str, str] = {}
    layers = _int(get("block_count"))
    heads = _int(get("attention.head_count"))
    kv = _int(get("attention.head_count_kv")) or heads  # no head_count_kv: plain multi-head attention
    head_dim = _int(get("attention.key_length"))
    embedding = _int(get("embedding_length"))
    if head_dim is None and embedding and heads:
        head_dim = embedding // heads
    params = _int(model_info.get("general.parameter_count"))
    for key, value in (("layers", layers), ("kv_heads", kv), ("head_dim", head_dim), ("parameter_count", params)):
        if value:
            out[f"model.{key}"] = str(value)
    ftype = model_info.get("general.file_type")
    if isinstance(ftype, int) and ftype in _FLOAT_FTYPES:
        out["model.dtype"] = _FLOAT_FTYPES[ftype]
    elif quantization:
        out["model.dtype"] = quantization  # a quantized GGUF: its quantization is the weights' type
    return out
