"""Speculative decoding on vLLM, SGLang and Ollama (issue 22 point 2), through the REAL
BenchRunner and recorder (spool, then MLflow on a real SQLite file). vLLM and SGLang are
FAKES (testkit/fakes/openai_server.py) exposing the metric names their code documents; Ollama
is the FAKE of testkit/fakes/ollama_server.py. llama-server's own figures are checked on the
real engine in test_llama_engine_facts.py.

The expectations are the fakes' configured acceptance and their own counters, never a
figure sparkctl computed."""

from __future__ import annotations

import json

import pytest

from sparkctl import cli
from sparkctl.engines.openai_compat import OpenAICompatEngine
from sparkctl.services.runs.comparison import compare_models
from sparkctl.services.runs.regressions import find_regressions
from testkit.fakes.model_scenarios import header_state
from testkit.fakes.openai_server import FakeOpenAI, OpenAIState
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)

N_PREDICT = 40


def openai_bench(url, store, tmp_path, **kw):
    settings = {"warmup": 1, "reps": 4, "num_predict": N_PREDICT, **kw}
    return recording_bench(url, store, tmp_path / "spool.jsonl",
                           make_engine=lambda u: OpenAICompatEngine(u, timeout=5.0), **settings)


def vllm(model="org/model-a", version="0.11.0", acceptance=0.75, tokens_per_s=200.0, **kw) -> FakeOpenAI:
    return FakeOpenAI(OpenAIState(flavor="vllm", model_id=model, version=version, spec_acceptance=acceptance,
                                  tokens_per_s=tokens_per_s, **kw)).start()


async def test_vllm_counters_are_differenced_per_repetition(mlflow_store, tmp_path):  # noqa: F811
    server = vllm(acceptance=0.75, kv_cache_dtype="fp8")
    try:
        before = (server.state.spec_draft_tokens, server.state.spec_accepted)
        (run,) = await openai_bench(server.url, mlflow_store, tmp_path)("org/model-a")
        drafted = server.state.spec_draft_tokens - before[0]
        accepted = server.state.spec_accepted - before[1]
    finally:
        server.stop()
    assert [r.spec.acceptance for r in run.reps] == [pytest.approx(0.75, abs=0.05)] * 4
    # every request's drafts are counted once, the measured ones in the run's totals
    assert run.summary["spec_draft_tokens_total"] < drafted and run.summary["spec_accepted_tokens_total"] < accepted
    assert run.summary["spec_acceptance_pct_total"] == pytest.approx(75.0, abs=5.0)
    # vLLM's convention: 1 + accepted / drafts (3 tokens drafted per step here)
    assert run.summary["spec_accept_len_total"] == pytest.approx(1 + 0.75 * 3, abs=0.2)
    (landed,) = mlflow_store.search_runs()
    assert landed["tags"]["spec.source"].startswith("vLLM /metrics counters")
    assert landed["tags"]["engine.kv_cache_type"] == "fp8"  # from vllm:cache_config_info
    # one value per repetition: the run's pooled figure is kept under its own key
    assert mlflow_store.metric_history(landed["run_id"], "spec_acceptance_pct") == \
        [pytest.approx(r.spec.acceptance * 100) for r in run.reps]
    assert landed["metrics"]["spec_acceptance_pct_total"] == pytest.approx(run.summary["spec_acceptance_pct_total"])


async def test_sglang_accept_length_is_recorded_as_server_wide(mlflow_store, tmp_path):  # noqa: F811
    server = FakeOpenAI(OpenAIState(flavor="sglang", model_id="org/model-a", spec_acceptance=0.5,
                                    tokens_per_s=None, attention_backend="flashinfer")).start()
    try:
        (run,) = await openai_bench(server.url, mlflow_store, tmp_path)("org/model-a")
        final = server.state.accept_length()
    finally:
        server.stop()
    assert run.reps[-1].spec.mean_accepted_length == pytest.approx(final)
    assert run.reps[-1].spec.acceptance is None  # SGLang reports no drafted/accepted counts
    (landed,) = mlflow_store.search_runs()
    assert "server-wide" in landed["tags"]["spec.source"]
    assert landed["tags"]["engine.flash_attn"] == "flashinfer"


def llama(build: str, acceptance: float, tokens_per_s: float, model="smollm2-135m") -> FakeOpenAI:
    """llama.cpp's server (FAKE): per-response timings, so the engine's decode tok/s and the
    draft counts of every response."""
    return FakeOpenAI(OpenAIState(flavor="llama.cpp", model_id=model, build_info=build, spec_acceptance=acceptance,
                                  tokens_per_s=tokens_per_s)).start()


async def test_an_acceptance_drop_is_flagged_beside_the_speed_drop(mlflow_store, tmp_path, capsys):  # noqa: F811
    """The GB10 story (llama.cpp#26750): MTP acceptance 66.7% -> 52.4% between two llama.cpp
    builds, with decode tok/s following it down."""
    # paced slowly enough (25 ms a token) that a loaded CI box's sleep overshoot stays noise
    old = llama("b6500-3f4b3c2a", acceptance=0.667, tokens_per_s=40.0)
    try:
        await openai_bench(old.url, mlflow_store, tmp_path, reps=5, num_predict=24)("smollm2-135m")
    finally:
        old.stop()
    new = llama("b6600-9c1d2e3f", acceptance=0.524, tokens_per_s=32.0)
    try:
        await openai_bench(new.url, mlflow_store, tmp_path, reps=5, num_predict=24)("smollm2-135m")
    finally:
        new.stop()
    (row,) = find_regressions(mlflow_store)
    assert row.result.flagged and row.result.change_pct == pytest.approx(-20.0, abs=4.0)
    assert row.acceptance.flagged and row.acceptance.median_before == pytest.approx(66.7, abs=6.0)
    assert row.acceptance.median_after == pytest.approx(52.4, abs=6.0)
    assert "version b6500-3f4b3c2a -> b6600-9c1d2e3f" in row.identity_changes
    assert "runner build b6500-3f4b3c2a -> b6600-9c1d2e3f" in row.identity_changes

    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    assert cli.main(["--config", str(config), "regressions"]) == 4
    text = capsys.readouterr().out
    assert "REGRESSION" in text and "ACCEPTANCE DROP" in text and "runner build b6500-3f4b3c2a -> b6600" in text
    assert cli.main(["--config", str(config), "regressions", "--json"]) == 4
    (out,) = json.loads(capsys.readouterr().out)
    assert out["acceptance"]["flagged"] is True and "runner build b6500-3f4b3c2a -> b6600-9c1d2e3f" in out["engine_changes"]


async def test_compare_states_the_acceptance_difference_with_its_interval(mlflow_store, tmp_path):  # noqa: F811
    for model, acceptance in (("model-a", 0.8), ("model-b", 0.5)):
        server = llama("b6500-3f4b3c2a", acceptance, 200.0, model=model)
        try:
            await openai_bench(server.url, mlflow_store, tmp_path)(model)
        finally:
            server.stop()
    cmp = compare_models(mlflow_store, ["model-a", "model-b"])
    d = next(d for d in cmp.differences if d.metric == "acceptance")
    assert d.ci.n_a == d.ci.n_b == 4
    assert d.ci.diff_pct == pytest.approx((50 - 80) / 80 * 100, abs=6.0)
    assert d.ci.ci_high_pct < 0 and d.verdict == "worse"
    assert [s.run.spec_acceptance_pct for s in cmp.sides] == [pytest.approx(80, abs=5), pytest.approx(50, abs=5)]


async def test_ollama_records_the_draft_layer_and_that_acceptance_is_not_exposed(serve, mlflow_store, tmp_path):  # noqa: F811
    state = header_state("chatml", 40)
    state.tokens_per_s = None
    (model,) = state.models.values()
    model.draft = "/usr/share/ollama/.ollama/models/blobs/sha256-" + "d" * 64
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=2, num_predict=8)
    (run,) = await bench(model.name)
    (landed,) = mlflow_store.search_runs()
    assert landed["tags"]["spec.draft"].startswith("draft model (DRAFT layer)")
    assert landed["tags"]["spec.acceptance"] == "not exposed by Ollama's API"
    assert not any(k.startswith("spec_") for k in run.summary)


async def test_the_sweep_matrix_shows_acceptance_per_profile(tmp_path):
    """JSON drafts better than prose (the seeds' ~85 vs ~72 tok/s story): the matrix says so
    per profile. llama.cpp's server is a FAKE whose structured-output requests accept 90% of
    drafts and prose 60%."""
    from dataclasses import replace

    from sparkctl.config import Config
    from sparkctl.core.sweep import acceptance_by_profile, matrix_text, sweep_from_runs
    from sparkctl.services.bench import BenchSettings
    from sparkctl.services.bench.profiles import resolve
    from sparkctl.services.bench.sweep import SweepRunner
    from sparkctl.tui.screens.sweep_matrix import render_matrix
    from testkit.fakes.host import FakeProbes, spark_snapshot

    state = OpenAIState(flavor="llama.cpp", spec_acceptance=0.6, spec_acceptance_structured=0.9, tokens_per_s=None)
    server = FakeOpenAI(state).start()
    cfg = Config()
    records: list = []
    engine = OpenAICompatEngine(server.url, timeout=5.0)
    try:
        s = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=2, num_predict=N_PREDICT, timeout_s=30.0)
        profiles = resolve("prose", cfg.bench, N_PREDICT) + resolve("json", cfg.bench, N_PREDICT)
        runner = SweepRunner(cfg, engine, FakeProbes(spark_snapshot()), s, profiles, [0], [1],
                             recorder=records.append)
        res = await runner.run([state.model_id])
    finally:
        await engine.close()
        server.stop()
    by_profile = acceptance_by_profile(res.results)
    assert by_profile[(state.model_id, "json")][0] == pytest.approx(90.0, abs=5.0)
    assert by_profile[(state.model_id, "prose")][0] == pytest.approx(60.0, abs=5.0)
    json_acc, prose_acc = by_profile[(state.model_id, "json")][0], by_profile[(state.model_id, "prose")][0]
    text = matrix_text(res.results)
    assert f"speculative decoding smollm2-135m json: acceptance {json_acc:.1f}%" in text
    assert f" a{json_acc:.0f}%" in text and f" a{prose_acc:.0f}%" in text
    # the TUI's matrix, rebuilt from the recorded cell runs as the Runs screen does it
    runs = [{"params": r.params, "tags": r.tags, "metrics": r.summary_metrics, "run_id": f"r{i}", "status": r.status}
            for i, r in enumerate(records)]
    drawn = render_matrix(sweep_from_runs(res.sweep_id, runs), 100).plain
    assert f"acc {json_acc:.0f}%" in drawn and f"acc {prose_acc:.0f}%" in drawn
