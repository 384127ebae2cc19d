"""Compare and regressions over runs the bench itself recorded: the REAL BenchRunner against
the FAKE Ollama (testkit/fakes/ollama_server.py, measured and jittered durations), written by
sparkctl's own recorder (spool, then MLflow on a REAL SQLite store). The fake's pace is the
independent expectation: a model paced 20% slower must come out about 20% slower."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sparkctl import cli
from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings
from sparkctl.services.runs.comparison import NothingToCompare, compare_models
from sparkctl.services.runs.regressions import find_regressions
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)

A, B = "llama3.2:3b", "qwen3:8b"


@pytest.fixture
def history(serve, mlflow_store, tmp_path):  # noqa: F811
    """A bench history: A at 100 and B at 80 tok/s on 0.12.6; then an engine upgrade to
    0.13.0 that costs A 14% and leaves B as it was."""
    state = bench_scenario(tokens_per_s=None)
    state.models[A].tokens_per_s = 100.0
    state.models[B].tokens_per_s = 80.0
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=1, reps=5, num_predict=24)
    return state, bench, mlflow_store


async def test_compare_on_one_engine_with_intervals_and_verdicts(history):
    state, bench, store = history
    await bench(A, B)
    cmp = compare_models(store, [A, B], lanes={"production": A})
    assert cmp.engine == {"kind": "ollama", "version": "0.12.6"}
    assert [len(s.values["decode_tps"]) for s in cmp.sides] == [5, 5]
    assert cmp.sides[0].note == "lane production"
    d = next(d for d in cmp.differences if d.metric == "decode_tps")
    assert d.a == A and d.b == B
    assert d.ci.diff_pct == pytest.approx(-20.0, abs=3.0)  # paced 80 vs 100 tok/s
    assert d.ci.ci_low_pct < d.ci.diff_pct < d.ci.ci_high_pct < 0
    assert d.verdict == "worse"
    # memory: the resident size the engine reported for each model, in the table and JSON
    models = cmp.to_dict()["models"]
    assert all(m["resident_gib"] and m["resident_gib"] > 0.5 for m in models)


async def test_an_engine_upgrade_that_costs_14_percent_is_flagged_and_exits_4(history, tmp_path, monkeypatch, capsys):
    state, bench, store = history
    await bench(A, B)
    state.version = "0.13.0"
    state.models[A].tokens_per_s = 86.0  # the story's 78.2 -> 67.6 tok/s: -13.6%
    await bench(A, B)
    rows = {r.model: r for r in find_regressions(store)}
    assert rows[A].result.flagged and rows[A].result.change_pct == pytest.approx(-14.0, abs=3.0)
    assert (rows[A].before.engine_version, rows[A].after.engine_version) == ("0.12.6", "0.13.0")
    assert not rows[B].result.flagged and abs(rows[B].result.change_pct) < 5  # same pace, new engine

    # the CLI, as cron would run it
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    code = cli.main(["--config", str(config), "regressions", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 4
    flagged = [r for r in out if r["flagged"]]
    assert [r["model"] for r in flagged] == [A]
    assert set(flagged[0]) >= {"model", "metric", "before", "after", "change_pct", "flagged"}
    assert flagged[0]["before"]["engine_version"] == "0.12.6"


async def test_runs_on_another_engine_are_not_mixed_in_silently(history, tmp_path, capsys):
    state, bench, store = history
    await bench(B)
    state.version = "0.13.0"
    await bench(A)
    with pytest.raises(NothingToCompare, match=r"no run of qwen3:8b on ollama 0.13.0 .*--any-engine"):
        compare_models(store, [A, B])
    mixed = compare_models(store, [A, B], any_engine=True)
    assert any("different engines" in n for n in mixed.notes)
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    assert cli.main(["--config", str(config), "compare", A, B]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--any-engine" in err
    assert cli.main(["--config", str(config), "compare", A, B, "--any-engine", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {m["model"] for m in doc["models"]} == {A, B}
    assert {d["metric"] for d in doc["differences"]} >= {"decode_tps", "ttft_s"}


async def test_until_resolved_stops_once_the_difference_is_clear(serve):
    """A at 100 and B at 80 tok/s: the interval excludes zero after a few rounds, long
    before the 30-repetition ceiling."""
    state = bench_scenario(tokens_per_s=None)
    state.models[A].tokens_per_s = 100.0
    state.models[B].tokens_per_s = 80.0
    server = serve(state)
    cfg = Config()
    s = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=5, num_predict=16, think=False,
                until_resolved=30)
    engine = OllamaEngine(server.url, timeout=5.0)
    try:
        runs = await BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s).run([A, B])
    finally:
        await engine.close()
    a, b = runs
    assert 3 <= len(a.reps) == len(b.reps) < 30
    assert any(f.startswith("until-resolved: resolved: interval excludes zero") for f in a.flags)


def test_until_resolved_needs_two_models(tmp_path, capsys):
    config = tmp_path / "sparkctl.toml"
    config.write_text("")
    assert cli.main(["--config", str(config), "bench", "--until-resolved", "llama3.2:3b"]) == 2
    assert "exactly two models" in capsys.readouterr().err


async def test_lanes_benched_on_an_older_engine_are_stale_and_rebench_repeats_their_settings(history):
    from sparkctl.services.runs.drift import rebench_overrides, stale_lanes

    state, bench, store = history
    await bench(A, B)
    lanes = {"production": A, "fast": B, "new": "qwen3:32b"}
    assert [s.lane for s in stale_lanes(store, lanes, "ollama", "0.12.6")] == ["new"]  # never benched
    state.version = "0.13.0"
    stale = {s.lane: s for s in stale_lanes(store, lanes, "ollama", "0.13.0")}
    assert set(stale) == {"production", "fast", "new"}
    assert stale["production"].message == "engine 0.13.0 since last bench of production (0.12.6): re-bench"
    overrides, notes = rebench_overrides(store, stale["production"].run)
    assert (overrides["reps"], overrides["warmup"], overrides["num_predict"]) == (5, 1, 24)
    assert overrides["cache"] == "cold" and overrides["prompt"].strip() and notes == []
    s = replace(BenchSettings.from_config(Config().bench), **overrides)  # the same settings as the last run
    assert s.reps == 5 and str(s.num_ctx) == stale["production"].run.num_ctx
    await bench(A)
    assert "production" not in {s.lane for s in stale_lanes(store, lanes, "ollama", "0.13.0")}
