"""The pure pieces of issue 22: reading llama-server's and Ollama's settings from their
command lines and environment, what changed between two runs' engines, speculative
decoding's arithmetic, llama-benchy's test names, Ollama's Modelfile directives and vLLM's
Prometheus page. Inputs are written the way the real programs write them."""

from __future__ import annotations

import pytest

from sparkctl.core import benchy, engine_identity as ei
from sparkctl.core.specdec import SpecCounts, summary
from sparkctl.engines.base import DoneEvent, ShowInfo
from sparkctl.engines.ollama import modelfile_directive
from sparkctl.engines.specdec import ollama_draft, parse_vllm_metrics
from sparkctl.services.bench import coldness


@pytest.mark.parametrize("cmdline, env, fa, kv", [
    (["llama-server", "-m", "x.gguf", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0"], {}, "on", "q8_0"),
    (["llama-server", "-m", "x.gguf", "--flash-attn=off"], {}, "off", "f16"),
    (["llama-server", "-m", "x.gguf", "-fa", "--port", "8080"], {}, "on", "f16"),  # older builds: a bare -fa
    (["llama-server", "-m", "x.gguf", "--cache-type-k", "q4_0"], {"LLAMA_ARG_FLASH_ATTN": "auto"}, "auto", "K q4_0 / V f16"),
    (["llama-server", "-m", "x.gguf"], {"LLAMA_ARG_CACHE_TYPE_K": "q8_0", "LLAMA_ARG_CACHE_TYPE_V": "q8_0"}, "auto", "q8_0"),
])
def test_llama_server_settings_from_its_command_line_and_environment(cmdline, env, fa, kv):
    tags = ei.llama_server_settings(cmdline, env)
    assert (tags[ei.FLASH_ATTN], tags[ei.KV_CACHE_TYPE]) == (fa, kv)


def test_ollama_runner_children_are_told_apart_and_matched_to_the_model():
    blob = "/usr/share/ollama/.ollama/models/blobs/sha256-abc"
    children = [("/usr/lib/ollama/llama-server", "--model", "/blobs/sha256-other", "--port", "40001"),
                ("/usr/lib/ollama/llama-server", "--model", blob, "--port", "40002", "--flash-attn", "auto"),
                ("/usr/local/bin/ollama", "runner", "--mlx-engine", "--model", "/blobs/mlx")]
    name, cmd = ei.ollama_runner(children, blob)
    assert name == "llama-server" and ei.runner_port(cmd) == 40002
    assert ei.ollama_runner(children, "/blobs/mlx")[0] == "mlx"
    assert ei.ollama_runner(children, "/blobs/none") == ("", None)  # several runners, none of this model


def test_what_changed_between_two_engines_is_named_and_unrecorded_facts_are_not_changes():
    before = {ei.KIND: "llama.cpp", ei.VERSION: "b6500", ei.RUNNER_BUILD: "b6500", ei.FLASH_ATTN: "on"}
    after = {ei.KIND: "llama.cpp", ei.VERSION: "b6600", ei.RUNNER_BUILD: "b6600", ei.FLASH_ATTN: "on",
             ei.KV_CACHE_TYPE: "q8_0"}
    assert ei.changes(before, after) == ["version b6500 -> b6600", "runner build b6500 -> b6600"]
    assert ei.parse_compact(ei.compact(after)) == {k: v for k, v in after.items() if k not in (ei.KIND, ei.VERSION)}
    assert ei.version_at_least("0.30.1", (0, 30)) and not ei.version_at_least("0.12.6", (0, 30))
    assert not ei.version_at_least("unknown", (0, 30))


def test_speculative_figures_follow_each_engines_convention():
    # llama-server: 48 tokens, 35 drafted, 35 accepted -> 13 target steps
    ls = SpecCounts(drafted=35, accepted=35, tokens=48)
    assert ls.acceptance == 1.0 and ls.mean_accepted_length == pytest.approx(48 / 13)
    # vLLM counters, differenced: 1 + accepted / drafts
    before, after = SpecCounts(300, 200, drafts=100), SpecCounts(420, 290, drafts=140)
    d = after.minus(before)
    assert (d.drafted, d.accepted, d.drafts) == (120, 90, 40)
    assert d.acceptance == 0.75 and d.mean_accepted_length == pytest.approx(1 + 90 / 40)
    # SGLang: its own accept length, no counts
    assert SpecCounts(accept_length=3.2).mean_accepted_length == 3.2 and SpecCounts(accept_length=3.2).acceptance is None
    s = summary([SpecCounts(10, 9, tokens=20), SpecCounts(10, 7, tokens=20), None])
    assert s["spec_draft_tokens_total"] == 20 and s["spec_accepted_tokens_total"] == 16 and s["spec_acceptance_pct_total"] == 80.0
    assert s["spec_acceptance_pct_median"] == 80.0 and (s["spec_acceptance_pct_min"], s["spec_acceptance_pct_max"]) == (70, 90)
    assert summary([None, SpecCounts()]) == {}


def test_vllms_prometheus_page_is_read_per_model_and_summed_over_engines():
    page = "\n".join([
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0',
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0',
        "# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_created gauge",
        'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09',
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 45.0',
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="other"} 999.0',
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 30.0', ""])
    c = parse_vllm_metrics(page, "m")
    assert (c.drafts, c.drafted, c.accepted) == (15, 45, 30)
    assert parse_vllm_metrics('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n', "m") is None


@pytest.mark.parametrize("modelfile, system", [
    ('FROM /b/sha256-1\nSYSTEM You are terse.\nPARAMETER stop "<|im_end|>"\n', "You are terse."),
    ('FROM /b/sha256-1\nSYSTEM "You are\nterse."\n', "You are\nterse."),
    ('FROM /b/sha256-1\nSYSTEM """Say "hi"\nthen stop."""\n', 'Say "hi"\nthen stop.'),
    ('# FROM qwen3\nFROM /b/sha256-1\n', ""),
])
def test_ollamas_modelfile_directives_are_read_as_its_parser_quotes_them(modelfile, system):
    assert modelfile_directive(modelfile, "SYSTEM") == system
    assert modelfile_directive(modelfile, "FROM") == "/b/sha256-1"


def test_an_ollama_draft_is_described_from_show():
    draft = ShowInfo("m", draft="/b/sha256-d", parameters="draft_num_predict 6")
    assert ollama_draft(draft) == "draft model (DRAFT layer), draft_num_predict 6"
    mtp = ShowInfo("m", model_info={"general.architecture": "qwen35", "qwen35.nextn_predict_layers": 1})
    assert "inactive" in ollama_draft(mtp)
    assert ollama_draft(ShowInfo("m")) == "none"


def test_llama_benchy_test_names_round_trip():
    for args, name in [(("pp", 2048, 0, 1, 1), "pp2048"), (("tg", 32, 4096, 1, 1), "tg32 @ d4096"),
                       (("tg", 32, 4096, 2, 4), "tg32 @ d4096 (c2)"), (("ctx_pp", None, 8192, 1, 1), "ctx_pp @ d8192")]:
        assert benchy.test_name(*args) == name
        kind, size, depth, conc = benchy.parse_test_name(name)
        assert (kind, size, depth, conc) == (args[0], args[1], args[2], args[3])
    with pytest.raises(ValueError):
        benchy.parse_test_name("decode 32")


def test_evaluated_tokens_subtract_the_opening_only_where_the_count_includes_it():
    whole = coldness.Opening(40, "ids", counts_shared=True)
    uncached = coldness.Opening(40, "ids", counts_shared=False)
    assert coldness.evaluated_tokens(DoneEvent("stop", prompt_eval_count=300), whole) == 260
    assert coldness.evaluated_tokens(DoneEvent("stop", prompt_eval_count=260), uncached) == 260
    # the engine's own reused-token count wins over the measured opening
    assert coldness.evaluated_tokens(DoneEvent("stop", prompt_eval_count=300, prompt_cached_count=0), whole) == 300


def test_the_falloff_table_says_which_attention_each_ratio_was_measured_with():
    from sparkctl.core.sweep import Cell, CellResult, CellStats, falloff_table

    def cell(depth: int, tps: float) -> CellResult:
        return CellResult(Cell("8b-shape", "prose", depth, 1), CellStats(requests=3, decode_tps_per_request_median=tps))

    identity = {"8b-shape": {"engine.flash_attn": "on", "engine.kv_cache_type": "f16", "engine.runner_build": "b11434"}}
    table = falloff_table([cell(0, 200.0), cell(32768, 120.0)], identity, gpu="NVIDIA H200").splitlines()
    ours = next(line for line in table if line.startswith("| sparkctl"))
    assert ours == ("| sparkctl | 8b-shape (prose) | NVIDIA H200 | b11434 | on | f16 | 200.0 | 120.0 @ d32768 | "
                    "0.600 |")
    refs = [line for line in table if line.startswith("| llama.cpp")]
    assert [r.rsplit("|", 2)[1].strip() for r in refs] == ["0.712", "0.506"]  # 59.85/84.10, 30.80/60.92
