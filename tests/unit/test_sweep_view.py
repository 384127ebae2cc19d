"""core.sweep.sweep_from_runs: a recorded sweep's cells rebuilt from MLflow run dicts."""

from sparkctl.core.sweep import concurrency_series, depth_series, heat_share, sweep_from_runs


def run(rid, model, depth, conc, decode, start=1000, slo="ttft=2s"):
    return {"run_id": rid, "start_time": start, "status": "FINISHED",
            "params": {"model": model, "slo": slo, "num_predict": "32"},
            "tags": {"sweep.id": "s1", "sweep.cell": f"prose/d{depth}/c{conc}", "sweep.profile": "prose",
                     "sweep.depth": str(depth), "sweep.concurrency": str(conc), "engine.kind": "ollama",
                     "engine.version": "0.13.0"},
            "metrics": {"decode_tps_per_request_median": decode, "throughput_tps": decode * conc,
                        "tpot_ms_median": 1000 / decode, "requests": 2.0, "dnf": 0.0}}


def test_cells_in_order_a_replayed_cell_keeps_its_newest_run_and_plain_runs_are_left_out():
    runs = [run("b", "qwen3:8b", 0, 1, 40.0), run("a2", "llama3.2:3b", 4096, 2, 70.0, start=2000),
            run("a1", "llama3.2:3b", 4096, 2, 1.0), run("a0", "llama3.2:3b", 0, 1, 100.0),
            {"run_id": "plain", "params": {"model": "x"}, "tags": {}, "metrics": {}}]
    view = sweep_from_runs("s1", runs)
    assert [r.run_id for r in view.results] == ["a0", "b", "a2"]
    assert view.models == ["llama3.2:3b", "qwen3:8b"] and view.slo == "ttft=2s" and view.engine == "ollama 0.13.0"
    assert view.columns == [("prose", 0, 1), ("prose", 4096, 2)]
    assert view.get("qwen3:8b", ("prose", 4096, 2)) is None
    assert heat_share(70.0, 100.0) == 0.7 and heat_share(None, 100.0) is None
    assert depth_series(view.results)[0] == (("llama3.2:3b", "prose", 1), [(0, 100.0)])
    assert concurrency_series(view.results)[-1] == (("llama3.2:3b", "prose", 4096), [(2, 140.0, 1000 / 70.0)])
    assert sweep_from_runs("s1", [run("a", "m", 0, 1, 1.0, slo="none")]).slo == ""
