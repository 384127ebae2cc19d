"""Workload sweeps (issue 12) against a FAKE Ollama (testkit/fakes/ollama_server.py with the
concurrency model of testkit/fakes/serving.py: OLLAMA_NUM_PARALLEL slots, decode shared by the
sequences running at once). sparkctl's percentiles, queue counts and goodput are checked
against the request timings the fake itself logged (its own clock readings at the server
side), computed here with numpy, not with sparkctl's own functions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from sparkctl.config import Config
from sparkctl.core.latency import parse_slo
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRefused, BenchSettings
from sparkctl.services.bench.profiles import resolve
from sparkctl.services.bench.sweep import SweepRunner
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import bench_scenario

CFG = Config(lanes={"production": "gpt-oss:120b"})
PREDICT = 30


async def sweep(server, depths, conc, *, slo=None, reps=2, records=None):
    engine = OllamaEngine(server.url, timeout=10.0, connect_timeout=1.0)
    s = replace(BenchSettings.from_config(CFG.bench), warmup=1, reps=reps, num_predict=PREDICT, timeout_s=30.0,
                reload_threshold_s=0.5)
    runner = SweepRunner(CFG, engine, FakeProbes(spark_snapshot()), s, resolve("prose", CFG.bench, PREDICT),
                         depths, conc, parse_slo(slo) if slo else None,
                         recorder=(lambda rec: records.append(rec)) if records is not None else None)
    try:
        return await runner.run(["llama3.2:3b"])
    finally:
        await engine.close()


def measured(state):
    """The fake's log of the measured requests: calibration asks for one token, and the one
    warm-up (a full request) comes first."""
    return sorted((t for t in state.request_log if t.eval_count == PREDICT and t.done), key=lambda t: t.received)[1:]


async def test_concurrency_past_num_parallel_queues_and_percentiles_match_the_fakes_log(serve):
    state = bench_scenario(tokens_per_s=100.0, response_tokens=[" word"] * 80)
    state.num_parallel = 2  # OLLAMA_NUM_PARALLEL=2: the 3rd and 4th request of a round wait
    server = serve(state)
    records: list = []
    res = await sweep(server, [0], [1, 2, 4], slo="ttft=150ms", records=records)
    cells = {c.cell.concurrency: c for c in res.cells}
    log = measured(state)
    assert len(log) == 2 + 4 + 8
    served = {1: log[:2], 2: log[2:6], 4: log[6:]}  # cells run one after another, c rising
    for k, cell in cells.items():
        st = cell.result.stats
        fake_ttft = [t.ttft_s for t in served[k]]
        # the client's clock adds only the HTTP round trip to the server's reading
        assert st.ttft_s_p50 == pytest.approx(float(np.percentile(fake_ttft, 50)), abs=0.03)
        # 2 to 8 requests: no p90 (needs 10) and no p99 (needs 100), the n said instead
        assert st.ttft_s_p90 is None and st.ttft_s_p99 is None and st.ttft_n == len(fake_ttft)
        gaps = [b - a for t in served[k] for a, b in zip(t.chunks, t.chunks[1:])]
        assert st.itl_ms_p50 == pytest.approx(float(np.percentile(gaps, 50)) * 1000, rel=0.2, abs=1.0)
        # queueing: the requests that waited for a slot in the fake are the ones sparkctl counts
        assert st.queued == sum(t.queued_s > 0.05 for t in served[k])
        # goodput: the share of the fake's requests whose first chunk came within 150 ms
        assert st.goodput_pct == pytest.approx(100.0 * np.mean([x <= 0.15 for x in fake_ttft]))
    assert cells[1].result.stats.queued == cells[2].result.stats.queued == 0
    assert cells[4].result.stats.queued == 4  # two rounds, two waiting each
    assert cells[4].result.stats.goodput_pct == 50.0 and cells[2].result.stats.goodput_pct == 100.0
    assert any(f.startswith("queued:") for f in cells[4].run.flags)
    assert not any(f.startswith("queued:") for f in cells[2].run.flags)
    assert not any(c.run.invalid for c in res.cells)  # its own queueing is not foreign load
    # shared decode: two streams decode slower each, faster together, less than twice as fast
    one, two = cells[1].result.stats, cells[2].result.stats
    assert two.decode_tps_per_request_median < 0.9 * one.decode_tps_per_request_median
    assert one.throughput_tps < two.throughput_tps < 2 * one.throughput_tps
    # the sweep's own run first, then one MLflow run per cell, its child, grouped by tags too
    parent, records = records[0], records[1:]
    assert parent.tags["sparkctl.kind"] == "sweep" and parent.summary_metrics["cells_finished"] == 3
    assert all(r.tags["sparkctl.parent_record_id"] == parent.record_id for r in records)
    assert len(records) == 3 and len({r.tags["sweep.id"] for r in records + [parent]}) == 1
    assert sorted(r.tags["sweep.concurrency"] for r in records) == ["1", "2", "4"]
    assert records[0].summary_metrics["ttft_s_p50"] > 0 and records[0].params["profile"] == "prose"
    assert "ttft_s_p99" not in records[0].summary_metrics and records[0].summary_metrics["ttft_n"] == 2
    # each cell is a run of its own kind and coordinates, spanning only its own requests
    by_c = {r.tags["sweep.concurrency"]: r for r in records}
    assert all(r.tags["sparkctl.kind"] == "sweep-cell" and r.tags["workload.kind"] == "sweep-cell" for r in records)
    assert [by_c[c].tags["workload.concurrency"] for c in ("1", "2", "4")] == ["1", "2", "4"]
    assert by_c["1"].end_ms <= by_c["2"].start_ms and by_c["2"].end_ms <= by_c["4"].start_ms


async def test_depth_text_is_counted_by_the_engine_and_too_deep_is_refused_before_any_request(serve):
    state = bench_scenario(tokens_per_s=400.0, response_tokens=[" word"] * 40)
    server = serve(state)
    res = await sweep(server, [0, 2048], [1], reps=1)
    deep = next(c for c in res.cells if c.cell.depth == 2048)
    shallow = next(c for c in res.cells if c.cell.depth == 0)
    # the fake's own prompt count (one token a word) grew by about the depth asked for
    grown = deep.run.reps[0].prompt_eval_count - shallow.run.reps[0].prompt_eval_count
    assert grown == pytest.approx(2048, rel=0.1)
    assert not any("depth" in f for f in deep.run.flags)
    state.request_log.clear()
    # llama3.2:3b was trained for 131072 tokens: a deeper context is refused (by the memory
    # fit at that num_ctx, or by the trained context), and nothing is generated
    with pytest.raises(BenchRefused, match=r"llama3.2:3b's trained context \(131072 tokens\)"):
        await sweep(server, [0, 140000], [1], reps=1)
    assert state.request_log == []


def test_cli_json_cells_have_exactly_the_issue_keys(serve, tmp_path):
    server = serve(bench_scenario(tokens_per_s=400.0, response_tokens=[" word"] * 40))
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[budget]\nreserve_gib = 0.0\nwarn_gib = 0.0\n')
    env = {k: v for k, v in os.environ.items() if k != "OLLAMA_HOST"}
    env.update(SPARKCTL_CONFIG=str(cfg), SPARKCTL_DATA_DIR=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    proc = subprocess.run([sys.executable, "-m", "sparkctl.cli", "bench", "llama3.2:3b", "--concurrency", "1,2",
                           "--reps", "1", "--warmup", "0", "--num-predict", "10", "--slo", "ttft=5s,itl=1s", "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cells = json.loads(proc.stdout)["cells"]
    assert [c["concurrency"] for c in cells] == [1, 2]
    assert list(cells[0]) == ["model", "profile", "depth", "concurrency", "requests",
                              "decode_tps_per_request_median", "throughput_tps", "ttft_s_p50", "ttft_s_p90",
                              "ttft_s_p99", "itl_ms_p50", "itl_ms_p99", "goodput_pct", "dnf", "run_id"]
    assert cells[1]["requests"] == 2 and cells[1]["goodput_pct"] == 100.0 and cells[0]["run_id"]
