"""Quality runs end to end: the REAL EvalRunner and `sparkctl eval` against the FAKE Ollama
(testkit/fakes/ollama_server.py; its `answers` hook gives each question its own answer, as a
real model does), scored by sparkctl's own scorers, recorded through the spool into a REAL
MLflow SQLite store.

The suites here are small files written by the tests in the suites' own formats (so the
expected scores are known by construction); tests/integration/test_eval_suites.py reads the
real GSM8K and IFEval files the package ships."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sparkctl import cli
from sparkctl.config import Config, EvalConfig, TrackingConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.evals import EvalRunner, EvalSettings, load_suite
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401

A, B, T = "llama3.2:3b", "qwen3:8b", "qwen3:8b"  # T: the fake's thinking model

QUESTIONS = [(f"Sam has {i} apples and buys {i + 3} more. How many apples does Sam have?", 2 * i + 3)
             for i in range(1, 21)]


def write_gsm8k(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "gsm8k-test.jsonl", "w") as fh:
        for q, a in QUESTIONS:
            fh.write(json.dumps({"question": q, "answer": f"{a - 3} + 3 = <<{a - 3}+3={a}>>{a}\n#### {a}"}) + "\n")
    return folder


def gold_of(prompt: str) -> int | None:
    m = re.search(r"Sam has (\d+) apples", prompt)
    return None if m is None else 2 * int(m.group(1)) + 3


def config(suites: Path, **eval_overrides) -> Config:
    return Config(tracking=TrackingConfig(experiment=TEST_EXPERIMENT),
                  eval=EvalConfig(suites_dir=str(suites), **eval_overrides))


async def run_eval(url: str, cfg: Config, store, spool_path: Path, models, **settings):
    suite = load_suite(cfg, settings.pop("suite", "gsm8k"))
    s = EvalSettings.from_config(cfg, suite.name, **settings)
    spool = Spool(spool_path)
    engine = OllamaEngine(url, timeout=5.0)
    events = []
    try:
        runner = EvalRunner(cfg, engine, FakeProbes(spark_snapshot()), s, suite, sink=events.append,
                            recorder=lambda rec: record_run(rec, spool, store), journal=spool.journal)
        runs = await runner.run(list(models))
    finally:
        await engine.close()
    return runner, runs, events


def run_in_store(store, run_id: str) -> dict:
    (run,) = [r for r in store.search_runs() if r["run_id"] == run_id]
    return run


@pytest.fixture
def answering(serve):
    """The fake: A answers every question right; B gets the ones with an odd number of
    apples wrong (off by one). Both end with "The answer is N." as the prompt asks."""
    state = bench_scenario(tokens_per_s=None)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        if gold is None:
            return None
        n = (gold - 3) // 2
        said = gold if (model.startswith("llama") or n % 2 == 0) else gold + 1
        return f"{n} plus {n + 3} makes {said}. The answer is {said}."

    state.answers = answers
    return state, serve(state)


async def test_two_models_same_items_scored_and_recorded(answering, mlflow_store, tmp_path):  # noqa: F811
    state, server = answering
    cfg = config(write_gsm8k(tmp_path / "suites"))
    runner, runs, events = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A, B],
                                          n=10, seed=7, think=False)
    a, b = runs
    assert a.item_ids == b.item_ids and len(a.item_ids) == 10  # the same sample for both
    assert len(set(a.item_ids)) == 10
    # B is wrong exactly where the apples are odd: the expected score by construction
    expected_b = sum((int(i) + 1) % 2 == 0 for i in b.item_ids) / 10
    assert a.summary["gsm8k_strict"] == 1.0 and a.summary["gsm8k_flexible"] == 1.0
    assert b.summary["gsm8k_strict"] == pytest.approx(expected_b)
    assert a.summary["dnf_count"] == 0 and a.status == "FINISHED"
    lo, hi = b.summary["gsm8k_strict_ci_low"], b.summary["gsm8k_strict_ci_high"]
    assert lo < expected_b < hi

    rec = run_in_store(mlflow_store, b.run_id)
    assert rec["tags"]["sparkctl.kind"] == "eval" and rec["tags"]["eval.suite"] == "gsm8k"
    assert rec["tags"]["engine.version"] == state.version
    assert rec["tags"]["guard.placement_before"] == "100% GPU"
    assert rec["tags"]["model.thinking"] == "off"  # qwen3:8b can think; it was asked not to
    assert rec["params"]["seed"] == "7" and rec["params"]["sample_size"] == "10"
    assert rec["params"]["suite_sha256"] == runner.suite.sha256
    assert rec["metrics"]["gsm8k_strict"] == pytest.approx(expected_b)
    rows = [json.loads(line) for line in mlflow_store.read_artifact(b.run_id, "items.jsonl").splitlines()]
    assert [r["item_id"] for r in rows] == list(b.item_ids)
    assert all(set(r) >= {"prompt_sha256", "response", "verdict", "tokens", "seconds", "dnf"} for r in rows)
    wrong = [r for r in rows if not r["passed"]]
    assert all(r["verdict"]["strict"] != r["verdict"]["gold"] for r in wrong)


async def test_the_sample_changes_with_the_seed_and_not_with_the_model(answering, mlflow_store, tmp_path):  # noqa: F811
    _state, server = answering
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (x,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "s1.jsonl", [A], n=5, seed=1)
    _r, (y,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "s2.jsonl", [A], n=5, seed=1)
    _r, (z,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "s3.jsonl", [A], n=5, seed=2)
    assert x.item_ids == y.item_ids
    assert x.item_ids != z.item_ids


async def test_a_runaway_item_is_cancelled_and_scored_dnf_apart_from_wrong_answers(serve, mlflow_store, tmp_path):  # noqa: F811
    state = bench_scenario(tokens_per_s=40.0)

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        if gold == 5:  # "Sam has 1 apples": rambles far past the ceiling
            return " ".join(["hmm"] * 400) + " The answer is 5."
        if gold == 7:
            return "The answer is 8."  # wrong, and finished
        return f"The answer is {gold}."

    state.answers = answers
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (run,), events = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A],
                                        n="all", timeout_s=1.0, seed=3)
    s = run.summary
    assert s["items"] == 20 and s["dnf_count"] == 1 and s["answered"] == 19
    assert s["gsm8k_strict"] == pytest.approx(18 / 20)  # DNF and the wrong one both fail over all items
    assert s["gsm8k_strict_answered"] == pytest.approx(18 / 19)  # the DNF is left out here
    dnf = run.items["0"]
    assert dnf.dnf and dnf.verdict is None and 0.9 < dnf.seconds < 3.0
    assert 10 < dnf.client_tokens < 200  # it was cut off, not run to the end
    assert any("did not finish" in f for f in run.guard.flags)
    rec = run_in_store(mlflow_store, run.run_id)
    assert rec["metrics"]["dnf_count"] == 1.0
    # the live feed showed the runaway's token count climbing
    from sparkctl.services.evals import ItemLive

    counts = [e.tokens for e in events if isinstance(e, ItemLive) and e.item_id == "0"]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] > counts[0]


async def test_a_thinking_model_is_scored_on_its_answer_not_its_thinking(serve, mlflow_store, tmp_path):  # noqa: F811
    state = bench_scenario(tokens_per_s=None, thinking_tokens=["Maybe", " the", " answer", " is", " 999."])

    def answers(model: str, prompt: str) -> str | None:
        gold = gold_of(prompt)
        return None if gold is None else f"Sam ends with {gold}. The answer is {gold}."

    state.answers = answers
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    _r, (run,), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [T], n=4, think=True)
    assert run.thinking is True
    assert run.summary["gsm8k_strict"] == 1.0
    assert all(r.thinking_tokens == 5 and "999" in r.thinking and "999" not in r.response for r in run.items.values())
    rec = run_in_store(mlflow_store, run.run_id)
    assert rec["tags"]["model.thinking"] == "on"
    assert rec["metrics"]["thinking_tokens_total"] == 20.0


# ---- the command line ----------------------------------------------------------------------------


def cli_config(tmp_path: Path, url: str, suites: Path) -> Path:
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{url}"\n[tracking]\nexperiment = "{TEST_EXPERIMENT}"\n'
                   f'[eval]\nsuites_dir = "{suites}"\n')
    return cfg


@pytest.fixture
def data_dir(tmp_path, monkeypatch, mlflow_template_db):  # noqa: F811
    from testkit.tracking import copy_template_store

    data = tmp_path / "data"
    copy_template_store(mlflow_template_db, data)  # the CLI's default store, migrated
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(data))
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    return data


def test_cli_eval_json_and_the_saved_responses_rescore_the_same(answering, data_dir, tmp_path, capsys):
    _state, server = answering
    suites = write_gsm8k(tmp_path / "suites")
    cfg = cli_config(tmp_path, server.url, suites)
    assert cli.main(["--config", str(cfg), "eval", A, B, "--suite", "gsm8k", "--n", "6", "--seed", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in out] == [A, B]
    assert out[0]["item_ids"] == out[1]["item_ids"]
    assert out[0]["summary"]["gsm8k_strict"] == 1.0 and out[0]["mlflow_run_id"]

    # the per-item responses, saved as the reference's input format, rescore to the same verdicts
    questions = {str(i): q for i, (q, _a) in enumerate(QUESTIONS)}
    saved = tmp_path / "responses.jsonl"
    saved.write_text("".join(json.dumps({"prompt": questions[r["item_id"]], "response": r["response"]}) + "\n"
                             for r in out[1]["items"]))
    assert cli.main(["--config", str(cfg), "eval", "score", "--suite", "gsm8k", str(saved), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["suite"] == "gsm8k"
    assert [s["strict_ok"] for s in scored["samples"]] == [r["verdict"]["strict_ok"] for r in out[1]["items"]]
    assert scored["summary"]["gsm8k_strict"] == pytest.approx(out[1]["summary"]["gsm8k_strict"])
    assert set(scored["samples"][0]) == {"prompt", "gold", "strict", "flexible", "strict_ok", "flexible_ok"}


def test_cli_eval_text_shows_the_table_and_the_grid(answering, data_dir, tmp_path, capsys):
    _state, server = answering
    cfg = cli_config(tmp_path, server.url, write_gsm8k(tmp_path / "suites"))
    assert cli.main(["--config", str(cfg), "eval", B, "--suite", "gsm8k", "--n", "all"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"qwen3:8b\s+20\s+0\s+0\s+50\.0\s+50\.0", out), out  # 10 of 20 right
    grid = [line.strip() for line in out.splitlines() if set(line.strip()) <= {"✓", "✗"} and line.strip()]
    assert grid == ["✗✓" * 10]  # suite order: item 0 has 1 apple (odd), so B gets it wrong, and so on
    assert "written to MLflow" in out or "MLflow" in out


def test_cli_eval_score_errors_name_the_line(tmp_path, data_dir, capsys):
    cfg = cli_config(tmp_path, "http://127.0.0.1:9", write_gsm8k(tmp_path / "suites"))
    bad = tmp_path / "r.jsonl"
    bad.write_text(json.dumps({"prompt": QUESTIONS[0][0], "response": "The answer is 5."}) + "\n"
                   + json.dumps({"prompt": "What is the capital of Mars?", "response": "x"}) + "\n")
    assert cli.main(["--config", str(cfg), "eval", "score", "--suite", "gsm8k", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sparkctl: {bad}:2: prompt not in the GSM8K") and "\n" not in err
    bad.write_text("{not json\n")
    assert cli.main(["--config", str(cfg), "eval", "score", "--suite", "gsm8k", str(bad)]) == 2
    assert f"{bad}:1: not JSON" in capsys.readouterr().err
    assert cli.main(["--config", str(cfg), "eval", "score", "--suite", "gsm8k", str(tmp_path / "nope.jsonl")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_cli_missing_suite_says_how_to_get_it(tmp_path, data_dir, capsys):
    cfg = cli_config(tmp_path, "http://127.0.0.1:9", tmp_path / "empty")
    assert cli.main(["--config", str(cfg), "eval", A, "--suite", "ifeval"]) == 2
    err = capsys.readouterr().err.strip()
    assert "IFEval" in err and str(tmp_path / "empty") in err and "\n" not in err
    assert "remove [eval] suites_dir from the config to read the shipped copy" in err


@pytest.mark.parametrize("argv, message", [
    (["--n", "0"], "--n must be at least 1"),
    (["--n", "many"], "--n must be a whole number or 'all'"),
    (["--n", "21"], "--n:"),
    (["--timeout", "0"], "--timeout must be above 0"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
])
def test_cli_eval_bad_flags_are_one_line_exit_2(answering, data_dir, tmp_path, capsys, argv, message):
    _state, server = answering
    cfg = cli_config(tmp_path, server.url, write_gsm8k(tmp_path / "suites"))
    assert cli.main(["--config", str(cfg), "eval", A, "--suite", "gsm8k", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


async def test_compare_pairs_the_same_items_and_reports_the_accuracy_difference(answering, mlflow_store, tmp_path):  # noqa: F811
    """Bench and eval both models, then compare: the quality difference is paired on the
    items both answered (same seed and suite file), with the discordant counts the fake's
    answers imply."""
    from sparkctl.services.runs.comparison import compare_models
    from testkit.tracking import recording_bench

    _state, server = answering
    cfg = config(write_gsm8k(tmp_path / "suites"))
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=3, num_predict=8)
    await bench(A, B)
    _r, (a, b), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A, B], n="all",
                                   think=False)
    cmp = compare_models(mlflow_store, [A, B], lanes={"production": A})
    (q,) = cmp.quality
    assert q.suite == "gsm8k" and q.a == A and q.b == B and q.paired
    odd = sum(int(i) % 2 == 0 for i in a.item_ids)  # item i has i+1 apples: B misses the odd ones
    assert (q.ci.n, q.ci.only_a, q.ci.only_b) == (20, odd, 0)
    assert q.ci.diff_pp == pytest.approx(-100 * odd / 20)
    assert q.verdict == "worse" and q.ci.p_value < 0.01
    sides = cmp.to_dict()["models"]
    assert sides[0]["gsm8k_strict"] == 1.0 and sides[1]["gsm8k_strict"] == pytest.approx(0.5)
    assert any(d["metric"] == "gsm8k_strict" and d["verdict"] == "worse" for d in cmp.to_dict()["differences"])


def write_ifeval(folder: Path) -> Path:
    """Six IFEval-format items: three ask for all lowercase, three for no commas."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(3):
        rows.append({"key": 100 + k, "prompt": f"Describe place number {k} in lowercase letters only.",
                     "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]})
        rows.append({"key": 200 + k, "prompt": f"List three fruits for day {k} without using any commas.",
                     "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]})
    (folder / "ifeval-input.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


async def test_ifeval_scores_instructions_strict_and_loose(serve, mlflow_store, tmp_path):  # noqa: F811
    """A follows both instructions; B shouts, and puts commas in its list, but only on its
    first line (which the loose reading drops): strict fails, loose passes for the commas."""
    state = bench_scenario(tokens_per_s=None)

    def answers(model: str, prompt: str) -> str | None:
        good = model.startswith("llama")
        if "lowercase" in prompt:
            return "a quiet town by the sea." if good else "A QUIET TOWN BY THE SEA."
        if "commas" in prompt:
            return "apple pear plum" if good else "Sure, here you go:\napple pear plum"
        return None

    state.answers = answers
    server = serve(state)
    cfg = config(write_ifeval(tmp_path / "suites"))
    _r, (a, b), _ = await run_eval(server.url, cfg, mlflow_store, tmp_path / "spool.jsonl", [A, B], suite="ifeval",
                                   n="all", think=False)
    assert a.summary["ifeval_prompt_strict"] == 1.0 and a.summary["ifeval_inst_loose"] == 1.0
    assert b.summary["ifeval_prompt_strict"] == 0.0
    assert b.summary["ifeval_prompt_loose"] == pytest.approx(0.5)  # the comma items pass loose
    rec = run_in_store(mlflow_store, b.run_id)
    assert set(rec["metrics"]) >= {"ifeval_prompt_strict", "ifeval_inst_strict", "ifeval_prompt_loose",
                                   "ifeval_inst_loose", "dnf_count"}
    rows = [json.loads(line) for line in mlflow_store.read_artifact(b.run_id, "items.jsonl").splitlines()]
    comma = next(r for r in rows if r["item_id"] == "200")
    assert comma["verdict"]["instructions"] == [{"id": "punctuation:no_comma", "strict": False, "loose": True}]


async def test_an_engine_that_sends_nothing_makes_the_item_dnf_not_the_run_failed(serve, mlflow_store, tmp_path):  # noqa: F811
    """The fake prefills so slowly that no byte arrives within the engine's read timeout:
    each such item is DNF and the run still FINISHED (a busy engine is not a gone one)."""
    state = bench_scenario(tokens_per_s=None)
    state.answers = lambda model, prompt: "The answer is 5."
    server = serve(state)
    cfg = config(write_gsm8k(tmp_path / "suites"))
    suite = load_suite(cfg, "gsm8k")
    s = EvalSettings.from_config(cfg, "gsm8k", n=2, think=False, timeout_s=30.0)
    engine = OllamaEngine(server.url, timeout=5.0, load_timeout=0.4)
    try:
        runner = EvalRunner(cfg, engine, FakeProbes(spark_snapshot()), s, suite)
        state.prefill_tokens_per_s = 20.0  # after the load: every item's prompt takes ~2 s
        (run,) = await runner.run([A])
    finally:
        await engine.close()
    assert run.status == "FINISHED" and run.summary["dnf_count"] == 2
    assert all(r.dnf and r.error is None for r in run.items.values())


def test_a_bad_ifeval_row_is_one_line_naming_it_before_any_request(tmp_path, data_dir, capsys):
    folder = write_ifeval(tmp_path / "suites")
    rows = (folder / "ifeval-input.jsonl").read_text().splitlines()
    rows[3] = json.dumps({"key": 9, "prompt": "x", "instruction_id_list": ["made:up"], "kwargs": [{}]})
    (folder / "ifeval-input.jsonl").write_text("\n".join(rows) + "\n")
    cfg = cli_config(tmp_path, "http://127.0.0.1:9", folder)  # nothing listens: no request could be sent
    assert cli.main(["--config", str(cfg), "eval", A, "--suite", "ifeval"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sparkctl: {folder / 'ifeval-input.jsonl'}:4: instruction made:up") and "\n" not in err
    assert cli.main(["--config", str(cfg), "eval", "score", "--suite", "ifeval", str(tmp_path / "r.jsonl")]) == 2


def test_kill_9_mid_eval_keeps_every_finished_item(serve, tmp_path, mlflow_template_db):  # noqa: F811
    """A real `sparkctl eval` process killed with SIGKILL after some items: the next
    `sparkctl sync` writes its run KILLED with the finished items (from the run's own items
    file, which the journal points at), nothing lost."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from testkit.tracking import copy_template_store

    state = bench_scenario(tokens_per_s=40.0)
    state.answers = lambda model, prompt: (f"Let me count carefully {'and again ' * 8}. The answer is "
                                           f"{gold_of(prompt)}.")
    server = serve(state)
    data = tmp_path / "data"
    store = copy_template_store(mlflow_template_db, data)
    cfg = cli_config(tmp_path, server.url, write_gsm8k(tmp_path / "suites"))
    env = dict(os.environ, SPARKCTL_DATA_DIR=str(data))
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "eval", A,
                             "--suite", "gsm8k", "--n", "all", "--no-think"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        sidecars = []
        while time.monotonic() < deadline:
            sidecars = list((data / "evals").glob("*.items.jsonl")) if (data / "evals").is_dir() else []
            if sidecars and len(sidecars[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.1)
        assert sidecars, "no item finished in time"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    done = len(sidecars[0].read_text().splitlines())
    sync = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "sync", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert sync.returncode == 0, sync.stderr
    assert json.loads(sync.stdout)["recovered"] == 1
    (run,) = [r for r in store.search_runs() if r["tags"].get("sparkctl.kind") == "eval"]
    assert run["status"] == "KILLED"
    rows = [json.loads(line) for line in store.read_artifact(run["run_id"], "items.jsonl").splitlines()]
    assert len(rows) >= done >= 3 and all(r["passed"] for r in rows)  # every finished item, none lost
