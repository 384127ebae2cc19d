"""One context per decision (issue 30), through the CLI as a user runs it: production is
resident at 4096 tokens of context, the contender is not; `sparkctl bench` and `sparkctl
eval` of the pair with the defaults run both at 4096 (said before the first request), and
`sparkctl compare` then compares them, speed and quality, instead of refusing the pair as
"not like for like". FAKE Ollama (testkit/fakes), FAKE Spark probes, a REAL MLflow SQLite
store."""

from __future__ import annotations

import json

from sparkctl import cli
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.test_decision_seams import answers_for, write_gsm8k
from testkit.tracking import TEST_EXPERIMENT, copy_template_store, mlflow_template_db  # noqa: F401

INC, CON = "llama3.2:3b", "qwen3:8b"


def run_cli(config, capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--config", str(config), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_and_eval_of_a_pair_with_the_defaults_compare_like_for_like(
        serve, tmp_path, monkeypatch, capsys, mlflow_template_db):  # noqa: F811
    data = tmp_path / "data"
    store = copy_template_store(mlflow_template_db, data)  # the CLI's default store
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(data))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: FakeProbes(spark_snapshot()))
    for var in ("OLLAMA_HOST", "OLLAMA_CONTEXT_LENGTH"):
        monkeypatch.delenv(var, raising=False)
    state = bench_scenario(tokens_per_s=None)
    state.answers = answers_for({INC: 90, CON: 88})
    state.add_resident(INC, context_length=4096, expires_in_s=None)  # production, kept forever
    server = serve(state)
    suites = write_gsm8k(tmp_path / "suites")
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[lanes]\nproduction = "{INC}"\n'
                      f'[tracking]\nexperiment = "{TEST_EXPERIMENT}"\n'
                      f'[eval]\nsuites_dir = "{suites}"\nnum_predict = 64\n')

    code, out, err = run_cli(config, capsys, "bench", CON, INC, "--reps", "3", "--warmup", "0",
                             "--num-predict", "12", "--no-think")
    assert code == 0, err
    said = out + err
    assert "num_ctx 4096: lane production's llama3.2:3b is resident at that context" in said
    code, out, err = run_cli(config, capsys, "eval", CON, INC, "--suite", "gsm8k", "--n", "20", "--no-think")
    assert code == 0, err
    recorded = store.search_runs()
    assert {r["params"]["num_ctx"] for r in recorded} == {"4096"}, [r["params"]["num_ctx"] for r in recorded]

    code, out, err = run_cli(config, capsys, "compare", CON, INC, "--json")
    assert code == 0, err  # not "no like-for-like benches"
    got = json.loads(out)
    assert "not like for like" not in out, got["notes"]
    assert all(m.get("gsm8k_run_id") for m in got["models"])  # the eval pair is compared too
    (decision,) = got["decision"]["decisions"]
    gsm8k = next(r for r in decision["rows"] if r["metric"].startswith("GSM8K"))
    assert gsm8k["verdict"] != "not compared" and "20 paired" in gsm8k["note"], gsm8k
    # production as it was: resident at its context; the contender unloaded again
    code, out, err = run_cli(config, capsys, "status", "--json")
    assert code == 0, err
    models = {m["name"]: m for m in json.loads(out)["resident"]}
    assert models[INC]["context_length"] == 4096 and CON not in models, models
