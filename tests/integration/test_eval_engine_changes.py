"""Evals that compare across engine versions (issue 31 point 2).

- The sampling sent and the sampling that really ran are recorded per eval: from the REAL
  llama-server runner's /slots beside a stand-in Ollama (testkit/fakes/ollama_standin.py),
  else inferred from Ollama's defaults (the FAKE Ollama, testkit/fakes/ollama_server.py, has
  no runner). Ollama 0.32.10 dropped its default repeat_penalty 1.1; a quality comparison
  across that upgrade names the change.
- Thinking is removed before scoring: the engine's separate field, or inline text up to the
  last `</think>` as lm-eval's think_end_token does; the record says how.
Runs go through the spool into a REAL MLflow SQLite store.
"""

from __future__ import annotations

import json

import pytest


from testkit.fakes.ollama_server import bench_scenario
from tests.integration.test_eval import A, B, T, config, gold_of, run_eval, run_in_store, write_gsm8k
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401


async def test_inline_thinking_is_cut_at_its_end_marker_before_scoring(serve, mlflow_store, tmp_path):  # noqa: F811
    """A model without Ollama's "thinking" capability that thinks anyway: its reasoning comes
    in the content. Scored whole, the strict rule would take the reasoning's "The answer is
    999." (the first match); cut at the last </think> as lm-eval does, every item is right."""
    state = bench_scenario(tokens_per_s=None)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        return None if gold is None else (f"<think>Guessing. The answer is 999. No, recount.</think>\n"
                                           f"Sam ends with {gold}. The answer is {gold}.")

    state.answers = answers
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (run,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A], n=4)
    assert run.thinking is None  # the engine does not think for this model: no separate field
    assert run.summary["gsm8k_strict"] == 1.0
    for r in run.items.values():
        assert "999" not in r.response and r.response.startswith("Sam ends with")
        assert r.thinking.endswith("</think>") and "999" in r.thinking
        assert r.thinking_removed == "text before the last </think> removed"
    rec = run_in_store(mlflow_store, run.run_id)
    assert rec["tags"]["eval.thinking_removal"] == (
        "text before the last </think> removed, as lm-eval's think_end_token (4 items)")
    rows = [json.loads(x) for x in mlflow_store.read_artifact(run.run_id, "items.jsonl").splitlines()]
    assert {row["thinking_removed"] for row in rows} == {"text before the last </think> removed"}


async def test_thinking_in_its_own_field_is_said_so(serve, mlflow_store, tmp_path):  # noqa: F811
    state = bench_scenario(tokens_per_s=None, thinking_tokens=["Maybe", " 999."])

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        return None if gold is None else f"The answer is {gold}."

    state.answers = answers
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (run,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [T], n=2, think=True)
    rec = run_in_store(mlflow_store, run.run_id)
    assert rec["tags"]["eval.thinking_removal"] == "the engine's separate thinking field, not scored (2 items)"


@pytest.mark.parametrize("version, params, penalty", [("0.32.9", "", 1.1), ("0.32.10", "", 1.0),
                                                       ("0.32.9", "repeat_penalty 1.05", 1.05)])
async def test_without_a_runner_the_effective_sampling_is_inferred_from_ollamas_defaults(
        serve, mlflow_store, tmp_path, version, params, penalty):  # noqa: F811
    state = bench_scenario(tokens_per_s=None)
    state.version = version
    state.find_model(A).parameters = params
    state.answers = lambda model, prompt: None if gold_of(prompt) is None else f"The answer is {gold_of(prompt)}."
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (run,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A], n=2)
    tags = run_in_store(mlflow_store, run.run_id)["tags"]
    sent = json.loads(tags["sampling.sent"])
    assert sent["temperature"] == 0 and "repeat_penalty" not in sent  # sparkctl never sends one
    effective = json.loads(tags["sampling.effective"])
    assert effective["repeat_penalty"] == penalty and effective["temperature"] == 0
    assert tags["sampling.effective_source"].startswith(f"inferred: Ollama {version}'s defaults")
    assert "runner not read" in tags["sampling.effective_source"]


@pytest.mark.llama
async def test_a_quality_change_across_an_engine_upgrade_names_the_sampling_that_changed(
        mlflow_store, tmp_path):  # noqa: F811
    """The same eval on Ollama 0.32.9 and 0.32.10 (stand-ins, each with a REAL llama-server
    runner): the runner's /slots shows the repeat_penalty each request really ran with (1.1,
    then 1.0: what the stand-in sent, as Ollama does), and `sparkctl regressions` names it."""
    from sparkctl.services.runs.regressions import regression_report
    from sparkctl.services.runs.report_text import render_regressions
    from tests.integration.ollama_standin_proc import MODEL, running_standin

    cfg = config(write_gsm8k(tmp_path / "suites"))
    sent_penalties = {}
    runs = {}
    for version in ("0.32.9", "0.32.10"):
        with running_standin(tmp_path / version, version=version, claim_gpu=True) as standin:
            _r, (run,), _ = await run_eval(standin.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [MODEL],
                                           n=2, num_predict=8, timeout_s=120.0)
            sent_penalties[version] = {r["request"]["repeat_penalty"] for r in standin.requests()}
            runs[version] = run
    assert sent_penalties == {"0.32.9": {1.1}, "0.32.10": {1.0}}
    for version, penalty in (("0.32.9", 1.1), ("0.32.10", 1.0)):
        tags = run_in_store(mlflow_store, runs[version].run_id)["tags"]
        effective = json.loads(tags["sampling.effective"])
        assert effective["repeat_penalty"] == penalty and effective["temperature"] == 0
        assert tags["sampling.effective_source"].startswith("Ollama's llama-server runner /slots")
        assert tags["runner.n_ctx"] == "512"
    report = regression_report(mlflow_store)
    (change,) = report.quality
    assert (change.before.engine_version, change.after.engine_version) == ("0.32.9", "0.32.10")
    assert change.sampling_changes == ["repeat_penalty 1.1 -> 1.0 (runner /slots)"]
    text = render_regressions(report.rows, report.notes, report.quality)
    assert "sampling changes: repeat_penalty 1.1 -> 1.0 (runner /slots)" in text
    assert "engine changes: version 0.32.9 -> 0.32.10" in text
    assert change.diff.verdict == "not resolved" and not change.flagged  # 2 items say nothing either way


# what an eval recorded as its scoring rules before inline thinking was cut (the whole text scored)
GSM8K_RULES_BEFORE_THE_CUT = "lm-eval gsm8k_cot_zeroshot v3.0 @4e7e0d47"


async def test_an_eval_scored_before_thinking_was_cut_is_never_paired_with_one_after(
        serve, mlflow_store, tmp_path, monkeypatch):  # noqa: F811
    """Review of issue 31: cutting inline thinking changes scores, so it is part of the scoring
    rules in the workload identity. An eval recorded by the sparkctl before it (simulated:
    that version's rule string put back for one run) and one recorded now are neither
    compared (compare, the promotion gate) nor set side by side across an engine upgrade
    (regressions)."""
    from sparkctl.core.suites import gsm8k
    from sparkctl.services.runs.comparison import compare_models
    from sparkctl.services.runs.regressions import regression_report
    from sparkctl.services.runs.quality import eval_rows, suite_evidence
    from testkit.tracking import recording_bench

    state = bench_scenario(tokens_per_s=None)
    state.answers = lambda model, prompt: None if gold_of(prompt) is None else f"The answer is {gold_of(prompt)}."
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    await recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=8)(A, B)
    with monkeypatch.context() as m:
        m.setattr(gsm8k, "RULES_VERSION", GSM8K_RULES_BEFORE_THE_CUT)
        _r, (old_a,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A], n="all",
                                         think=False)
    _r, (new_b,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [B], n="all",
                                     think=False)
    # compare and the promotion gate: not like for like, said
    cmp = compare_models(mlflow_store, [A, B], lanes={"production": A})
    assert cmp.quality == []
    ev = suite_evidence(mlflow_store, "gsm8k", A, B, eval_rows(mlflow_store, A), eval_rows(mlflow_store, B),
                        "ollama", None, 2.0)
    assert ev.diff is None and "scoring rules" in ev.problem, ev.problem

    # regressions: the same model before and after an engine upgrade, across the change
    state.version = "0.13.0"
    _r, (new_a,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A], n="all",
                                     think=False)
    assert new_a.run_id != old_a.run_id
    assert not [q for q in regression_report(mlflow_store).quality if q.model == A]
    rules = {r: run_in_store(mlflow_store, r)["tags"]["workload.rule_version"] for r in (old_a.run_id, new_b.run_id)}
    assert rules[old_a.run_id] == GSM8K_RULES_BEFORE_THE_CUT
    assert rules[new_b.run_id] != GSM8K_RULES_BEFORE_THE_CUT and "</think>" in rules[new_b.run_id]


def test_every_suite_s_rules_name_how_thinking_is_cut():
    """IFEval's answers are cut the same way (review of issue 31): its rule version moves too."""
    from sparkctl.core.suites import gsm8k, ifeval, thinking

    assert ifeval.RULES_VERSION != "google instruction_following_eval, sparkctl checkers 1"
    for rules in (gsm8k.RULES_VERSION, ifeval.RULES_VERSION):
        assert rules.endswith(thinking.RULES_VERSION)
