"""Decisions that cannot be silently wrong (issue 18): the REAL BenchRunner, SweepRunner and
EvalRunner against the FAKE Ollama (testkit/fakes/ollama_server.py: paced, jittered
durations, a prompt cache, shared decode under concurrency, per-question answers), every
run recorded by sparkctl's own recorder (spool, then MLflow on a REAL SQLite store), then
`regressions`, `compare` and `promote` as a user runs them.

The expectations come from how the fake was set up (paces, which questions each model gets
right, which requests it serves from its cache), never from sparkctl's formulas."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from sparkctl import cli
from sparkctl.core import prefill
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, Notice
from sparkctl.services.bench.profiles import resolve
from sparkctl.services.bench.sweep import SweepRunner
from sparkctl.services.runs.comparison import NothingToCompare, compare_models
from sparkctl.services.runs.regressions import regression_report
from sparkctl.tracking.sync import record_run
from testkit.decision_scenario import CFG, CON, INC, QUESTIONS, answers_for, evaluate, spool, write_gsm8k
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)

async def sweep(url: str, store, tmp_path: Path, models, concurrencies, reps=1):
    engine = OllamaEngine(url, timeout=20.0, connect_timeout=1.0)
    s = replace(BenchSettings.from_config(CFG.bench), warmup=0, reps=reps, num_predict=16, timeout_s=30.0,
                think=False)
    sp = spool(tmp_path)
    runner = SweepRunner(CFG, engine, FakeProbes(spark_snapshot()), s, resolve("prose", CFG.bench, 16), [0],
                         concurrencies, None, recorder=lambda rec: record_run(rec, sp, store))
    try:
        return await runner.run(list(models))
    finally:
        await engine.close()


def user_config(tmp_path: Path, url: str, store) -> Path:
    path = tmp_path / "sparkctl.toml"
    path.write_text(f'[engine]\nhost = "{url}"\n[lanes]\nproduction = "{INC}"\n'
                    f'[tracking]\nuri = "{store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    return path


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: FakeProbes(spark_snapshot()))
    for var in ("OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)


def run_cli(config: Path, capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--config", str(config), *argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------- the scenario


def test_plain_benches_a_sweep_after_an_upgrade_and_an_eval_pair_give_the_right_decision(
        serve, mlflow_store, tmp_path, host, capsys):  # noqa: F811
    """The issue's "done when": plain benches on engine A, a sweep on engine B at unchanged
    speed, an eval pair, then regressions, compare and promote. No false regression (the
    concurrency-8 cell is not the plain bench's successor), the plain runs compared, and the
    promotion refused with the margin explanation: the contender is 7 points worse on 100
    items (85% -> 78%, paired), an interval (-13.0 to -1.5) that reaches inside the 2-point
    margin, so not resolved rather than worse (issue 30)."""
    state = bench_scenario(tokens_per_s=None)
    state.models[INC].tokens_per_s = 100.0
    state.models[CON].tokens_per_s = 100.0
    state.answers = answers_for({INC: 85, CON: 78})
    state.num_parallel = 8  # OLLAMA_NUM_PARALLEL=8: concurrent streams share the decode
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=16)

    asyncio.run(bench(INC, CON))  # engine A: 0.12.6
    state.version = "0.13.0"  # engine B, the same speed
    res = asyncio.run(sweep(server.url, mlflow_store, tmp_path, [INC, CON], [4, 8]))
    c8 = next(c for c in res.cells if c.cell.concurrency == 8 and c.cell.model == INC)
    # the cell really is slower per request (decode shared by 8 streams): the trap
    assert c8.result.stats.decode_tps_per_request_median < 0.8 * 100.0
    suites = write_gsm8k(tmp_path / "suites")
    inc_eval, con_eval = asyncio.run(evaluate(server.url, mlflow_store, tmp_path, [INC, CON], suites))
    assert (inc_eval.summary["gsm8k_strict"], con_eval.summary["gsm8k_strict"]) == (0.85, 0.78)
    config = user_config(tmp_path, server.url, mlflow_store)

    # regressions: nothing to compare across versions (the cells have no earlier cells), no flag
    code, out, _ = run_cli(config, capsys, "regressions", "--json")
    assert code == 0 and not any(r["flagged"] for r in json.loads(out))

    # compare: the plain benches (on 0.12.6), not the cells on 0.13.0, and the evals say why
    # they are not set beside them (another engine version)
    code, out, _ = run_cli(config, capsys, "compare", CON, INC, "--json")
    doc = json.loads(out)
    assert code == 0
    assert [m["model"] for m in doc["models"]] == [INC, CON]  # the incumbent is the baseline
    assert all(m["identity"]["kind"] == "bench" and m["engine_version"] == "0.12.6" for m in doc["models"])
    assert any("gsm8k" in n and "0.12.6" in n for n in doc["notes"])

    # promote: refused; the c8 cell is not bench evidence, and the quality gate explains the margin
    code, out, err = run_cli(config, capsys, "promote", CON, "--lane", "production", "--json")
    plan = json.loads(out)
    assert code == 4 and set(plan["unmet"]) == {"bench", "quality"}
    bench_check, quality = plan["preconditions"][0], plan["preconditions"][1]
    assert "no bench of qwen3:8b on ollama 0.13.0" in bench_check["summary"]
    assert "qwen3:8b vs llama3.2:3b: 85.0% -> 78.0%, -7.0 pp [" in quality["summary"]
    assert "on 100 items (paired)" in quality["summary"]
    assert "not resolved at the 2 pp margin ([promote] quality_margin_pp)" in quality["summary"]
    assert "paired items would resolve it at the observed spread" in quality["summary"]
    assert "more items would not show it" not in quality["summary"]


# ------------------------------------------------------------------------------ point by point


async def test_1_a_sweep_cell_is_never_compared_with_a_plain_bench(serve, mlflow_store, tmp_path):  # noqa: F811
    """Point 1: after a sweep, compare took the contender's concurrency cell as its newest
    bench, and regressions paired the c8 cell with the plain bench (-39%)."""
    state = bench_scenario(tokens_per_s=None)
    state.models[INC].tokens_per_s = 100.0
    state.models[CON].tokens_per_s = 100.0
    state.num_parallel = 8
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=16)
    await bench(INC, CON)
    plain_ids = {r.model: r.run_id for r in await bench(INC, CON)}
    state.version = "0.13.0"
    await sweep(server.url, mlflow_store, tmp_path, [CON], [8])
    report = regression_report(mlflow_store)
    assert not any(r.result.flagged for r in report.rows)
    cmp = compare_models(mlflow_store, [INC, CON], lanes={"production": INC})
    assert {s.model: s.run.run_id for s in cmp.sides} == plain_ids


async def test_2_one_bench_runs_every_model_at_one_context_said_before_any_request(
        serve, mlflow_store, tmp_path):  # noqa: F811
    """Point 2, as issue 30 changed it: a bench of several models runs them at one context.
    The contender is resident at 4096, the incumbent is not: both run at [bench] num_ctx
    (the contender reloaded for the bench and put back after), so compare pairs them."""
    state = bench_scenario(tokens_per_s=None)
    state.add_resident(CON, context_length=4096, expires_in_s=None)
    server = serve(state)
    said: list = []
    cfg = CFG
    s = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=3, num_predict=12, think=False, timeout_s=30.0)
    sp = spool(tmp_path)
    engine = OllamaEngine(server.url, timeout=5.0)
    try:
        runs = await BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s, sink=said.append,
                                 recorder=lambda rec: record_run(rec, sp, mlflow_store)).run([INC, CON])
        resident = {r.name: r.context_length for r in await engine.ps()}
    finally:
        await engine.close()
    notices = [e.text for e in said if isinstance(e, Notice)]
    assert {r.num_ctx for r in runs} == {8192}
    assert not any("contexts differ" in n for n in notices)
    assert resident[CON] == 4096  # put back at its own context
    cmp = compare_models(mlflow_store, [INC, CON], lanes={"production": INC})
    assert {s.run.identity.num_ctx for s in cmp.sides} == {"8192"}


async def test_2_runs_at_different_contexts_are_refused_naming_the_context_and_the_command(
        serve, mlflow_store, tmp_path):  # noqa: F811
    """Point 2: runs at two contexts (each model benched alone, at a context given with
    --ctx): compare names num_ctx (not a generic list) and the command to match."""
    server = serve(bench_scenario(tokens_per_s=None))
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=12)
    base = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=12,
                           num_ctx=4096, ctx_explicit=True)
    await bench(INC)
    await base(CON)
    with pytest.raises(NothingToCompare) as exc:
        compare_models(mlflow_store, [INC, CON], lanes={"production": INC})
    message = str(exc.value)
    assert "num_ctx 8192 (llama3.2:3b) vs 4096 (qwen3:8b)" in message
    assert "sparkctl bench llama3.2:3b qwen3:8b --ctx 8192" in message
    assert exc.value.num_ctx == 8192 and exc.value.models == [INC, CON]


async def test_4_compare_reads_the_repetitions_the_run_used_and_says_what_it_left_out(
        serve, mlflow_store, tmp_path, monkeypatch):  # noqa: F811
    """Point 4: compare read every repetition's TTFT, cache hits included. The fake serves a
    repetition from its prompt cache when the same prompt comes twice in a row: here the
    last two of five (the cold preamble is dropped from the 4th request on)."""
    real = prefill.cold_prompt
    monkeypatch.setattr(prefill, "cold_prompt", lambda body, nonce, k: body if k >= 3 else real(body, nonce, k))
    state = bench_scenario(tokens_per_s=None)
    state.prompt_cache = "whole_count"
    state.prefill_tokens_per_s = 4000.0
    server = serve(state)
    body = " ".join(f"w{i % 89}" for i in range(800))  # long enough for a cold prefill to show
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=1, reps=5, num_predict=8,
                            prompt=body)
    runs = await bench(INC, CON)
    assert all([r.prefill_cached for r in run.reps] == [False, False, False, True, True] for run in runs)
    cmp = compare_models(mlflow_store, [INC, CON], lanes={"production": INC})
    ttft = next(d for d in cmp.differences if d.metric == "ttft_s")
    decode = next(d for d in cmp.differences if d.metric == "decode_tps")
    assert (ttft.ci.n_a, ttft.ci.n_b) == (3, 3) and (decode.ci.n_a, decode.ci.n_b) == (5, 5)
    assert ttft.excluded_a == ttft.excluded_b == "2 cached, excluded"
    # every TTFT compared paid a whole prefill: 800 tokens at 4000 tok/s take 0.2 s at least
    assert min(cmp.sides[0].values["ttft_s"] + cmp.sides[1].values["ttft_s"]) >= 0.9 * 800 / 4000.0


async def test_5_until_resolved_checks_even_when_its_ceiling_equals_the_reps(serve):
    """Point 5: `--until-resolved` was silently off when --max-reps equalled [bench] reps."""
    state = bench_scenario(tokens_per_s=None)
    state.models[INC].tokens_per_s = 100.0
    state.models[CON].tokens_per_s = 70.0
    server = serve(state)
    s = replace(BenchSettings.from_config(CFG.bench), warmup=0, reps=6, num_predict=16, think=False,
                until_resolved=6)
    engine = OllamaEngine(server.url, timeout=5.0)
    try:
        a, b = await BenchRunner(CFG, engine, FakeProbes(spark_snapshot()), s).run([INC, CON])
    finally:
        await engine.close()
    assert any(f.startswith("until-resolved: resolved: interval excludes zero") for f in a.flags)
    assert 3 <= len(a.reps) == len(b.reps) < 6


async def test_6_the_gsm8k_template_is_part_of_the_identity_and_lm_eval_s_can_be_asked(
        serve, mlflow_store, tmp_path):  # noqa: F811
    """Point 6: a template change still paired runs as "same sample"; the rule version was not
    recorded; lm-eval's own prompt could not be asked."""
    state = bench_scenario(tokens_per_s=None)
    state.answers = answers_for({INC: 90, CON: 90})
    server = serve(state)
    suites = write_gsm8k(tmp_path / "suites")
    (inc,) = await evaluate(server.url, mlflow_store, tmp_path, [INC], suites)
    (con,) = await evaluate(server.url, mlflow_store, tmp_path, [CON], suites, template="lm-eval")
    prompts = [c.body.get("prompt", "") for c in server.calls("/api/generate") if "Sam has" in c.body.get("prompt", "")]
    asked_con = [p for p in prompts if p.endswith("A: Let's think step by step.")]
    assert len(asked_con) == QUESTIONS  # the contender got lm-eval's prompt, unmodified
    tags = {r["run_id"]: r["tags"] for r in mlflow_store.search_runs()}
    from sparkctl.core.suites.gsm8k import RULES_VERSION, template_sha256

    assert tags[con.run_id]["workload.template_sha256"] == template_sha256("lm-eval")
    assert tags[inc.run_id]["workload.template_sha256"] == template_sha256("sparkctl")
    assert tags[inc.run_id]["workload.rule_version"] == RULES_VERSION
    from sparkctl.services.runs.quality import eval_rows, suite_evidence

    ev = suite_evidence(mlflow_store, "gsm8k", INC, CON, eval_rows(mlflow_store, INC), eval_rows(mlflow_store, CON),
                        "ollama", ["0.12.6"], 2.0)
    assert ev.diff is None and "template sha256" in ev.problem  # never paired as one measurement


async def test_7_the_decision_table_puts_the_incumbent_first_and_ends_in_one_recommendation(
        serve, mlflow_store, tmp_path, host, capsys):  # noqa: F811
    """Point 7: no overall verdict, memory listed not compared, the baseline whichever model
    was named first. Here the contender, named first, is five times as fast (so that one
    repetition slowed by a busy test machine cannot widen the interval across zero) and as
    accurate on the same 100 items: the table still starts from the incumbent, and the
    recommendation is not "promote" while 100 items cannot show the 2-point margin."""
    state = bench_scenario(tokens_per_s=None)
    state.models[INC].tokens_per_s = 20.0
    state.models[CON].tokens_per_s = 100.0
    state.answers = answers_for({INC: 90, CON: 90})
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=1, reps=5, num_predict=16)
    await bench(INC, CON)
    state.models[INC].tokens_per_s = 100.0  # the evals' pace does not enter the decode row
    await evaluate(server.url, mlflow_store, tmp_path, [INC, CON], write_gsm8k(tmp_path / "suites"))
    config = user_config(tmp_path, server.url, mlflow_store)
    code, out, _ = run_cli(config, capsys, "compare", CON, INC, "--table")
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| metric |"))
    assert lines[head] == "| metric | llama3.2:3b (incumbent) | qwen3:8b | difference [95% CI] | verdict |"
    rows = {line.split("|")[1].strip(): line for line in lines[head + 2:] if line.startswith("| ")}
    assert list(rows) == ["decode tok/s", "TTFT s", "GSM8K strict %", "IFEval prompt strict %", "resident GiB",
                          "J/token"]
    assert "| better |" in rows["decode tok/s"] and "(n=5)" in rows["decode tok/s"]
    assert "+0.0 pp [" in rows["GSM8K strict %"] and "| not resolved: too few items (about " in rows["GSM8K strict %"]
    assert "one reading each" in rows["resident GiB"]
    rec = next(line for line in lines if line.startswith("**Recommendation: "))
    assert rec.startswith("**Recommendation: not resolved: run about ")
    assert " more gsm8k items; evaluate both on ifeval (gsm8k +0.0 pp [" in rec
    assert "sparkctl eval llama3.2:3b qwen3:8b --suite ifeval --for-promotion" in rec
    code, out, _ = run_cli(config, capsys, "compare", CON, INC, "--json")
    decision = json.loads(out)["decision"]["decisions"][0]
    assert decision["baseline"] == INC and decision["action"] == "not resolved"


async def test_7_regressions_name_the_newer_run_that_is_not_usable(serve, mlflow_store, tmp_path):  # noqa: F811
    """Point 7: with the new-version run invalid, regressions said "no model has runs on two
    engine versions with the same settings" instead of naming it."""
    state = bench_scenario(tokens_per_s=None)
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=12)
    await bench(INC)
    state.version = "0.13.0"
    state.models[INC].vram_fraction = 0.6  # spilled to the CPU: recorded invalid (--allow-cpu)
    state.resident.clear()  # loaded afresh, as after a restart of the upgraded engine
    bench_cpu = recording_bench(server.url, mlflow_store, tmp_path / "spool2.jsonl", warmup=0, reps=3, num_predict=12,
                                allow_cpu=True)
    (bad,) = await bench_cpu(INC)
    assert bad.invalid
    report = regression_report(mlflow_store)
    assert report.rows == []
    (note,) = report.notes
    assert note.startswith(f"llama3.2:3b on ollama 0.13.0: run {bad.run_id[:8]} is not usable (invalid: ")
    assert "re-bench it" in note
    from sparkctl.services.runs.report_text import render_regressions

    assert bad.run_id[:8] in render_regressions(report.rows, report.notes)


def test_3_eval_for_promotion_runs_the_whole_suite_at_one_context(serve, tmp_path, monkeypatch, capsys,
                                                                   mlflow_template_db):  # noqa: F811
    """Point 3: `sparkctl eval --for-promotion` runs what the gate needs: every item, every
    model at one context (here the contender is resident at 4096 and is evaluated at
    [bench] num_ctx 8192 like the incumbent), so the two runs pair item by item."""
    from testkit.tracking import copy_template_store

    data = tmp_path / "data"
    store = copy_template_store(mlflow_template_db, data)  # the CLI's default store
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(data))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: FakeProbes(spark_snapshot()))
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    state = bench_scenario(tokens_per_s=None)
    state.answers = answers_for({INC: 90, CON: 88})
    state.add_resident(CON, context_length=4096, expires_in_s=None)
    server = serve(state)
    suites = write_gsm8k(tmp_path / "suites")
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nexperiment = "{TEST_EXPERIMENT}"\n'
                      f'[eval]\nsuites_dir = "{suites}"\nnum_predict = 64\n')
    code, out, err = run_cli(config, capsys, "eval", INC, CON, "--suite", "gsm8k", "--for-promotion", "--no-think",
                             "--json")
    assert code == 0, err
    runs = json.loads(out)
    assert [len(r["item_ids"]) for r in runs] == [QUESTIONS, QUESTIONS]
    recorded = {r["tags"]["model.name"]: r for r in store.search_runs()}
    assert {recorded[m]["params"]["num_ctx"] for m in (INC, CON)} == {"8192"}
    assert recorded[CON]["tags"]["workload.num_ctx"] == "8192"
    code, _, err = run_cli(config, capsys, "eval", INC, "--suite", "gsm8k", "--for-promotion", "--n", "10")
    assert code == 2 and "--for-promotion runs the whole suite" in err


async def test_1_regressions_name_a_changed_workload_and_the_bench_that_repeats_it(serve, mlflow_store,
                                                                                   tmp_path):  # noqa: F811
    """Point 1 (where no match exists): a bench after the upgrade at another context has no
    earlier run to be compared with; regressions say what differs and how to repeat it."""
    state = bench_scenario(tokens_per_s=None)
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=12)
    await bench(INC)
    state.version = "0.13.0"
    small = recording_bench(server.url, mlflow_store, tmp_path / "spool2.jsonl", warmup=0, reps=3, num_predict=12,
                            num_ctx=4096, ctx_explicit=True)
    await small(INC)
    report = regression_report(mlflow_store)
    assert report.rows == []
    (note,) = report.notes
    assert note.startswith("llama3.2:3b: its newest bench on ollama 0.13.0 (run ")
    assert "differ: num_ctx 8192 (0.12.6) vs 4096 (0.13.0);" in note
    assert "`sparkctl bench llama3.2:3b --ctx 8192 --num-predict 12 --no-think` repeats the earlier workload" in note
