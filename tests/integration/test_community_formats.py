"""The Spark community's formats in and out (issue 22 point 4), through the CLI, with MLflow
on a real SQLite file. Bench runs come from the REAL BenchRunner against the FAKE Ollama.

llama-benchy's formats are read and checked here with the names its own code writes
(eugr/llama-benchy, src/llama_benchy/results.py: `save_report`'s CSV header list, the JSON of
BenchmarkReport/BenchmarkRun/BenchmarkMetric, `_generate_rows`' test names); the files below
are written in those formats by this test, with made-up figures."""

from __future__ import annotations

import csv
import json
import re
import statistics

import pytest

from sparkctl import cli
from testkit.fakes.ollama_server import bench_scenario
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
    recording_bench,
)

MODEL = "llama3.2:3b"
OTHER = "qwen3:8b"
# llama-benchy's CSV columns, in the order its save_report(format="csv") writes them
BENCHY_CSV_HEADER = ["model", "test_name", "t_s_mean", "t_s_std", "t_s_req_mean", "t_s_req_std", "peak_ts_mean",
                     "peak_ts_std", "peak_ts_req_mean", "peak_ts_req_std", "ttfr_mean", "ttfr_std", "est_ppt_mean",
                     "est_ppt_std", "e2e_ttft_mean", "e2e_ttft_std"]


def metric(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values), "values": values}


def benchy_json(tg: list[float], pp: list[float]) -> dict:
    """A llama-benchy --format json result: depth 0 and 4096 at concurrency 1."""
    def run(depth: int, scale: float) -> dict:
        return {"concurrency": 1, "context_size": depth, "prompt_size": 2048, "response_size": 32,
                "is_context_prefill_phase": False,
                "pp_throughput": metric([v * scale for v in pp]), "pp_req_throughput": metric([v * scale for v in pp]),
                "tg_throughput": metric([v * scale for v in tg]), "tg_req_throughput": metric([v * scale for v in tg]),
                "peak_throughput": metric([v * scale + 2 for v in tg]),
                "peak_req_throughput": metric([v * scale + 2 for v in tg]),
                "ttfr": metric([550.0, 560.0]), "est_ppt": metric([548.0, 558.0]), "e2e_ttft": metric([552.0, 562.0])}

    return {"version": "0.2.2", "timestamp": "2026-02-07 19:09:00Z", "latency_mode": "api", "latency_ms": 1.3,
            "model": "meta-llama/Llama-3.2-3B-Instruct", "prefix_caching_enabled": False, "max_concurrency": 1,
            "benchmarks": [run(0, 1.0), run(4096, 0.7)]}


@pytest.fixture
def config(mlflow_store, tmp_path):  # noqa: F811
    path = tmp_path / "sparkctl.toml"
    path.write_text(f'[tracking]\nuri = "{mlflow_store.uri}"\nexperiment = "{TEST_EXPERIMENT}"\n')
    return str(path)


@pytest.fixture
async def benched(serve, mlflow_store, tmp_path):  # noqa: F811
    """llama3.2:3b (50 tok/s) and qwen3:8b benched on the fake Ollama: llama3.2:3b's run."""
    state = bench_scenario(tokens_per_s=None)
    state.models["llama3.2:3b"].tokens_per_s = 50.0
    state.models["qwen3:8b"].tokens_per_s = 40.0
    server = serve(state)
    bench = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=1, reps=3, num_predict=16)
    runs = await bench(MODEL, OTHER)
    return runs[0]


def sparkctl(config, capsys, *argv):
    code = cli.main(["--config", config, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


async def test_a_llama_benchy_json_becomes_import_runs_shown_beside_ours_never_compared(
        benched, config, tmp_path, capsys):
    tg, pp = [59.9, 60.3, 59.5], [3783.0, 3790.0, 3770.0]
    path = tmp_path / "gpt.json"
    path.write_text(json.dumps(benchy_json(tg, pp)))
    code, out, err = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--model", MODEL,
                              "--engine-kind", "llama.cpp", "--json")
    assert code == 0, err
    cells = sorted(r["cell"] for r in json.loads(out))
    assert cells == ["d0/c1", "d4096/c1"]
    # they are runs of kind import, listed as such
    code, out, _ = sparkctl(config, capsys, "runs", "--kind", "import", "--json")
    rows = json.loads(out)
    assert len(rows) == 2 and {r["kind"] for r in rows} == {"import"} and {r["model"] for r in rows} == {MODEL}
    d0 = next(r for r in rows if r["decode_tps_median"] == pytest.approx(statistics.median(tg)))
    assert d0["prefill_tps_median"] == pytest.approx(statistics.median(pp))
    # never mixed with sparkctl's measurements: a model with only an import has no bench
    assert sparkctl(config, capsys, "import", "llama-benchy", str(path), "--model", "gpt-oss:20b")[0] == 0
    code, _, err = sparkctl(config, capsys, "compare", MODEL, "gpt-oss:20b")
    assert code == 4 and "no finished, valid bench run of gpt-oss:20b" in err
    # compare --community: the community figure at our runs' depth (0), apart from the comparison
    code, out, _ = sparkctl(config, capsys, "compare", MODEL, OTHER, "--community")
    assert code == 0
    table, community = out.split("community figures", 1)
    assert "import" not in table
    assert f"{MODEL} @ d0 c1: decode {statistics.median(tg):.1f}" in community
    assert "@ d4096" not in community  # another depth than ours
    assert "llama.cpp" in community and "gpt.json" in community
    code, out, _ = sparkctl(config, capsys, "compare", MODEL, OTHER, "--community", "--json")
    data = json.loads(out)
    assert [c["model"] for c in data["community"]] == [MODEL]
    assert all(m["run_id"] != data["community"][0]["run_id"] for m in data["models"])
    # importing the same file again adds nothing
    assert sparkctl(config, capsys, "import", "llama-benchy", str(path), "--model", MODEL)[0] == 0
    assert len(json.loads(sparkctl(config, capsys, "runs", "--kind", "import", "--json")[1])) == 4  # + gpt-oss


async def test_a_llama_benchy_csv_is_read_with_its_test_names(config, tmp_path, capsys):
    path = tmp_path / "bench.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=BENCHY_CSV_HEADER)
        w.writeheader()
        w.writerow({"model": "openai/gpt-oss-20b", "test_name": "pp2048", "t_s_mean": 3783.0, "t_s_std": 12.0,
                    "ttfr_mean": 560.0, "ttfr_std": 4.0, "e2e_ttft_mean": 562.0, "e2e_ttft_std": 4.0})
        w.writerow({"model": "openai/gpt-oss-20b", "test_name": "tg32", "t_s_mean": 84.1, "t_s_std": 0.3})
        w.writerow({"model": "openai/gpt-oss-20b", "test_name": "pp2048 @ d32768", "t_s_mean": 1899.0, "t_s_std": 5.0})
        w.writerow({"model": "openai/gpt-oss-20b", "test_name": "tg32 @ d32768", "t_s_mean": 59.9, "t_s_std": 0.2})
    code, out, err = sparkctl(config, capsys, "import", "llama-benchy", str(path), "--json")
    assert code == 0, err
    by_cell = {r["cell"]: r["summary"] for r in json.loads(out)}
    assert by_cell["d0/c1"]["decode_tps_median"] == 84.1 and by_cell["d0/c1"]["prefill_tps_median"] == 3783.0
    assert by_cell["d32768/c1"]["decode_tps_median"] == 59.9
    assert by_cell["d0/c1"]["ttft_s_median"] == pytest.approx(0.562)


async def test_a_file_that_is_not_a_llama_benchy_result_is_refused_in_one_line(config, tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text('{"results": []}')
    code, _, err = sparkctl(config, capsys, "import", "llama-benchy", str(path))
    assert code == 2 and err.count("\n") == 1 and "no 'benchmarks' list" in err and "Traceback" not in err
    code, _, err = sparkctl(config, capsys, "import", "llama-benchy", str(tmp_path / "missing.csv"))
    assert code == 2 and "cannot read it" in err


async def test_an_arena_bundle_reads_back_in_llama_benchys_columns(benched, config, tmp_path, capsys,
                                                                   mlflow_store):  # noqa: F811
    run = benched
    out_dir = tmp_path / "bundle"
    code, out, err = sparkctl(config, capsys, "export", "arena", run.run_id[:8], "--out", str(out_dir))
    assert code == 0, err
    with open(out_dir / "benchmark.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == BENCHY_CSV_HEADER
        rows = list(reader)
    tests = {r["test_name"]: r for r in rows}
    prompt_tokens = int(statistics.median(mlflow_store.metric_history(run.run_id, "prompt_eval_count")))
    assert set(tests) == {f"pp{prompt_tokens}", "tg16"}  # llama-benchy's names: pp<tokens>, tg<num_predict>
    decode = mlflow_store.metric_history(run.run_id, "engine_decode_tps")
    tg = tests["tg16"]
    assert float(tg["t_s_mean"]) == pytest.approx(statistics.fmean(decode), rel=1e-6)
    # the fake's pace; Ollama divides eval_count by the time of eval_count - 1 decode steps
    assert float(tg["t_s_mean"]) == pytest.approx(50.0 * 16 / 15, rel=0.1)
    assert float(tg["t_s_std"]) == pytest.approx(statistics.pstdev(decode), rel=1e-6, abs=1e-9)
    pp = tests[f"pp{prompt_tokens}"]
    ttft = mlflow_store.metric_history(run.run_id, "ttft_s")
    assert float(pp["e2e_ttft_mean"]) == pytest.approx(statistics.fmean(ttft) * 1000, rel=1e-6)
    assert pp["peak_ts_mean"] == "" and tg["ttfr_mean"] == ""  # columns llama-benchy leaves empty there
    meta = json.loads((out_dir / "metadata.json").read_text())
    # the fake's llama3.2:3b: 28 layers, 8 KV heads, 3072 / 24 = 128 wide heads, Q4_K_M
    # (no kv_dtype: the fake's process is not an Ollama binary, so its KV cache type is unknown)
    assert meta["model"] == {"dtype": "Q4_K_M", "params": 3212749888, "num_layers": 28, "num_kv_heads": 8,
                             "head_dim": 128, "quantization": "Q4_K_M", "quant_bits": pytest.approx(4.85, abs=0.2)}
    assert meta["recipe"]["runtime"] == "ollama" and meta["runtime_info"]["engine_version"] == "0.12.6"
    assert meta["sparkctl"]["runs"] == [run.run_id]
    # and the bundle's CSV is a llama-benchy file sparkctl itself can import back
    code, out, err = sparkctl(config, capsys, "import", "llama-benchy", str(out_dir / "benchmark.csv"), "--json")
    assert code == 0, err
    (back,) = json.loads(out)
    assert back["summary"]["decode_tps_median"] == pytest.approx(statistics.fmean(decode))
    assert re.fullmatch(r"d0/c1", back["cell"])


async def test_an_arena_bundle_is_one_model_and_one_workload(serve, mlflow_store, config, tmp_path,
                                                             capsys):  # noqa: F811
    """Review of issue 31: `export arena` wrote one bundle from runs of two models (its
    metadata then named only the first) or of two workloads (rows that do not belong to one
    schedule). Both are refused in one line, exit 2, and no file is written. Runs from the
    REAL BenchRunner against the FAKE Ollama."""
    state = bench_scenario(tokens_per_s=None)
    server = serve(state)
    short = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=2, num_predict=16)
    longer = recording_bench(server.url, mlflow_store, tmp_path / "spool.jsonl", warmup=0, reps=2, num_predict=32)
    a, b = await short(MODEL, OTHER)
    (c,) = await longer(MODEL)
    out_dir = tmp_path / "bundle"
    code, out, err = sparkctl(config, capsys, "export", "arena", a.run_id, b.run_id, "--out", str(out_dir))
    assert code == 2 and out == "" and not out_dir.exists()
    assert err.strip() == (f"sparkctl: export arena: the runs measured 2 models ({MODEL}, {OTHER}): "
                           "one submission is one model"), err
    code, out, err = sparkctl(config, capsys, "export", "arena", a.run_id, c.run_id, "--out", str(out_dir))
    assert code == 2 and out == "" and not out_dir.exists()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (f"the runs measured different workloads (num_predict 16 ({a.run_id[:8]}) vs 32 ({c.run_id[:8]})): "
            "one submission is one workload") in err, err
    code, out, err = sparkctl(config, capsys, "export", "arena", a.run_id, "--out", str(out_dir))
    assert code == 0 and (out_dir / "benchmark.csv").exists(), err
