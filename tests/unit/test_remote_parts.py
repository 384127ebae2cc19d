"""The pure parts of fit-before-download: where a name leads (Ollama's `ParseName` and
`BaseURL` rules), reading a GGUF header from a prefix of the file, and which layers a
sliding window covers (llama.cpp's per-architecture patterns)."""

from __future__ import annotations

import pytest

from sparkctl.core.fit import sliding_window
from sparkctl.core.gguf_header import HeaderIncomplete, NotGGUF, parse_gguf_header
from sparkctl.engines.registry import registry_override, registry_ref


@pytest.mark.parametrize(
    ("name", "override", "url"),
    [
        ("qwen3", "", "https://registry.ollama.ai/v2/library/qwen3/manifests/latest"),
        ("qwen3:8b", "", "https://registry.ollama.ai/v2/library/qwen3/manifests/8b"),
        ("someone/model:q4", "", "https://registry.ollama.ai/v2/someone/model/manifests/q4"),
        ("hf.co/org/repo:Q4_K_M", "", "https://hf.co/v2/org/repo/manifests/Q4_K_M"),
        ("localhost:5000/team/m:1", "", "https://localhost:5000/v2/team/m/manifests/1"),
        ("http://localhost:5000/team/m:1", "", "http://localhost:5000/v2/team/m/manifests/1"),
        # the override replaces the default registry only: a name with its own host keeps it
        ("qwen3:8b", "http://127.0.0.1:8999", "http://127.0.0.1:8999/v2/library/qwen3/manifests/8b"),
        ("mirror.example/ns/m", "http://127.0.0.1:8999", "https://mirror.example/v2/ns/m/manifests/latest"),
    ],
)
def test_registry_url_follows_ollamas_name_rules(name, override, url):
    assert registry_ref(name, override).manifest_url == url


def test_the_environment_wins_over_the_config():
    assert registry_override("https://cfg.example/", {"SPARKCTL_REGISTRY": "http://127.0.0.1:1/"}) == "http://127.0.0.1:1"
    assert registry_override("https://cfg.example/", {}) == "https://cfg.example"


def test_header_read_from_prefixes(smol_gguf):
    data = smol_gguf.read_bytes()[: 4 * 1024 * 1024]
    whole = parse_gguf_header(data)
    assert whole.metadata["general.architecture"] == "llama" and len(whole.tensors) == 272
    # a prefix that stops anywhere inside the header asks for more, never returns half a header
    needs = []
    for cut in (0, 7, 30, 4096, 300_000, whole.header_bytes - 1):
        with pytest.raises(HeaderIncomplete) as exc:
            parse_gguf_header(data[:cut])
        assert cut < exc.value.needed <= whole.header_bytes
        needs.append(exc.value.needed)
    assert needs == sorted(needs)
    assert parse_gguf_header(data[: whole.header_bytes]).tensors == whole.tensors


@pytest.mark.parametrize("start", [b"PK\x03\x04", b"\x00\x00\x00\x00", b'{"__metadata__"'])
def test_not_gguf(start):
    with pytest.raises(NotGGUF):
        parse_gguf_header(start + b"\x00" * 64)


def _info(arch: str, layers: int, **kv) -> dict:
    return {"general.architecture": arch, f"{arch}.block_count": layers,
            **{f"{arch}.{k.replace('__', '.')}": v for k, v in kv.items()}}


@pytest.mark.parametrize(
    ("info", "window", "windowed"),
    [
        # llama.cpp: gemma3 set_swa_pattern(6): layers 5, 11 attend to everything
        (_info("gemma3", 12, attention__sliding_window=1024), 1024, [i for i in range(12) if i % 6 != 5]),
        # gemma2: every other layer, window 4096 when the GGUF does not say
        (_info("gemma2", 4), 4096, [0, 2]),
        # a GGUF that lists its pattern per layer wins over the table
        (_info("gemma3", 3, attention__sliding_window=512, attention__sliding_window_pattern=[True, False, True]),
         512, [0, 2]),
        # a period given in the GGUF
        (_info("newarch", 8, attention__sliding_window=128, attention__sliding_window_pattern=4), 128, [0, 1, 2, 4, 5, 6]),
    ],
)
def test_sliding_window_layers(info, window, windowed):
    swa = sliding_window(info)
    assert swa is not None and swa.window == window
    assert [i for i, w in enumerate(swa.layers) if w] == windowed


def test_unknown_pattern_is_not_guessed():
    assert sliding_window(_info("qwen3", 36, attention__sliding_window=4096)) is None
    assert sliding_window(_info("llama", 32)) is None
