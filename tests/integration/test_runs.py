"""Run history (`sparkctl runs`, services/runs) read back from a REAL MLflow SQLite store.

The store is seeded through sparkctl's own path: a real BenchRunner against the FAKE
Ollama (testkit/fakes/ollama_server.py, real HTTP, unpaced streams) with FAKE GB10 probes
(testkit/fakes/host.py), its records written by record_run (spool, then MLflow), so the rows
are read from exactly the params, tags and metrics a bench writes, not from a hand-written
imitation of them. The recorder moves each run's start back by some days (a history spans
weeks; a bench here takes a second), which is all it changes.

Seeded once per module (7 runs, ~6 s); the tests only read it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sparkctl.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, main
from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings
from sparkctl.services.runs import ROW_KEYS, list_runs, parse_since, quote
from sparkctl.services.runs import query as runs_query
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import DB_FILE_NAME, MlflowStore, default_tracking_uri
from sparkctl.tracking.sync import record_run
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, bench_scenario, make_model
from testkit.tracking import mlflow_template_db  # noqa: F401

CFG = Config()
EXPERIMENT = CFG.tracking.experiment
DAY_MS = 86_400_000
OLD, NEW = "0.12.6", "0.13.0"
RUNS_DOC = Path(__file__).resolve().parents[2] / "docs" / "runs.md"


def _settings(**kw) -> BenchSettings:
    return replace(BenchSettings.from_config(CFG.bench), **{
        "warmup": 0, "reps": 2, "num_predict": 16, "timeout_s": 30.0, "think": False, **kw})


def _smollm2():
    return make_model("smollm2:latest", size_gib=0.27, parameter_size="135M", block_count=30,
                      context_length=8192, embedding_length=576, head_count=9, head_count_kv=3,
                      parameter_count=134_515_008)


def _bench(version, models, days_ago, store, spool, *, probes=None, cpu_split=False, tokens_per_s=None):
    state = bench_scenario(tokens_per_s=tokens_per_s)
    state.version = version
    state.add_model(_smollm2())
    if cpu_split:
        state.models["llama3.2:3b"].vram_fraction = 0.7
    server = FakeOllama(state).start()
    base = int(time.time() * 1000 - days_ago * DAY_MS)

    def recorder(record):
        # the same record, started `days_ago` earlier (one minute apart per model, in order)
        i = models.index(record.params["model"])
        shift = record.start_ms - (base + i * 60_000)
        record.start_ms -= shift
        record.end_ms -= shift
        return record_run(record, spool, store)

    async def go():
        engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
        try:
            runner = BenchRunner(CFG, engine, probes or FakeProbes(spark_snapshot()),
                                 _settings(allow_cpu=cpu_split), recorder=recorder)
            return await runner.run(models)
        finally:
            await engine.close()

    try:
        return asyncio.run(go())
    finally:
        server.stop()


@pytest.fixture(scope="module")
def seeded(mlflow_template_db, tmp_path_factory):  # noqa: F811
    """A store holding 7 bench runs: 3 models on engine 0.12.6 ten days ago, the same on
    0.13.0 three days ago (smollm2 named 'smollm2' once and 'smollm2:latest' once), and one
    invalid llama3.2:3b run yesterday (30% on the CPU, GPU throttled)."""
    base = tmp_path_factory.mktemp("runs")
    folder = base / "mlflow"
    folder.mkdir()
    shutil.copy2(mlflow_template_db, folder / DB_FILE_NAME)
    uri = default_tracking_uri(folder)
    with pytest.MonkeyPatch.context() as mp:  # module scope: conftest's isolation is per test
        mp.setenv("SPARKCTL_DATA_DIR", str(base / "data"))
        mp.setenv("SPARKCTL_LOCK_DIR", str(base / "locks"))
        mp.setenv("XDG_DATA_HOME", str(base / "xdg"))
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        store = MlflowStore(uri, None, EXPERIMENT)
        spool = Spool(base / "spool.jsonl")
        runs = _bench(OLD, ["llama3.2:3b", "qwen3:8b", "smollm2"], 10, store, spool)
        runs += _bench(NEW, ["llama3.2:3b", "qwen3:8b", "smollm2:latest"], 3, store, spool)
        runs += _bench(NEW, ["llama3.2:3b"], 1, store, spool, cpu_split=True,
                       probes=FakeProbes(spark_snapshot(throttle=("hw_thermal_slowdown",))))
    assert all(r.run_id for r in runs), [r.sync_message for r in runs]
    cfg_file = base / "sparkctl.toml"
    cfg_file.write_text(f'[tracking]\nuri = "{uri}"\nexperiment = "{EXPERIMENT}"\n')
    return {"store": store, "runs": runs, "config": cfg_file}


def run_cli(config: Path, *args: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config", str(config), "runs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_rows_come_newest_first_with_what_the_bench_recorded(seeded):
    store = seeded["store"]
    rows = list_runs(store)
    assert len(rows) == 7
    starts = [r.start_ms for r in rows]
    assert starts == sorted(starts, reverse=True)
    assert [(r.model, r.engine_version) for r in rows[:4]] == [
        ("llama3.2:3b", NEW), ("smollm2:latest", NEW), ("qwen3:8b", NEW), ("llama3.2:3b", NEW)]
    # each row carries MLflow's own values for its run, read in one search
    raw = {d["run_id"]: d for d in store.search_runs(max_results=100)}
    for row in rows:
        d = raw[row.run_id]
        assert row.status == d["status"] == "FINISHED"
        assert row.decode_tps_median == d["metrics"]["decode_tps_median"] > 0
        assert row.ttft_s_median == d["metrics"]["ttft_s_median"]
        assert row.run_name == d["run_name"] == f"{row.model} @ ollama {row.engine_version}"
        assert row.engine_kind == "ollama" and row.host == "spark-01" and row.kind == "bench"
        assert len(row.prompt_sha256) == 64 and row.num_predict == "16" and row.cache_policy == "cold"
        assert row.dnf_count == 0
    assert {r.prompt_sha256 for r in rows} == {rows[0].prompt_sha256}  # one fixed prompt


def test_an_invalid_run_says_why_in_short_words(seeded, capsys):
    bad, *good = list_runs(seeded["store"])
    assert bad.valid is False
    assert {"invalid", "placement", "throttled"} <= set(bad.flags)
    assert all(r.valid is True and r.flags == () for r in good)
    code, out, _ = run_cli(seeded["config"], "-n", "1", capsys=capsys)
    assert code == EXIT_OK
    header, line = out.splitlines()
    assert header.split()[:2] == ["DATE", "MODEL"] and "FLAGS" in header
    assert "invalid,placement," in line and "throttled" in line and bad.run_id[:8] in line


@pytest.mark.parametrize("name, expected", [
    ("smollm2", 2), ("smollm2:latest", 2), ("SmolLM2", 2), ("library/smollm2:latest", 2),
    ("qwen3:8b", 2), ("llama3.2:3b", 3),
    ("qwen3", 0), ("llama3.2", 0),  # ':latest' of those was never benched
])
def test_model_filter_follows_ollama_names(seeded, name, expected):
    rows = list_runs(seeded["store"], model=name)
    assert len(rows) == expected
    assert {r.model.split(":")[0].lower() for r in rows} <= {name.split("/")[-1].split(":")[0].lower()}


def test_engine_version_since_and_combined_filters(seeded):
    store = seeded["store"]
    assert {r.engine_version for r in list_runs(store, engine_version=OLD)} == {OLD}
    assert len(list_runs(store, engine_version=OLD)) == 3
    assert len(list_runs(store, engine_version=NEW)) == 4
    assert list_runs(store, engine_version="it's \"odd\"") == []  # unquotable: checked here
    five_days_ago = int(time.time() * 1000) - 5 * DAY_MS
    recent = list_runs(store, since_ms=five_days_ago)
    assert len(recent) == 4 and all(r.start_ms >= five_days_ago for r in recent)
    (one,) = list_runs(store, model="smollm2", engine_version=OLD)
    assert one.model == "smollm2"
    assert [r.engine_version for r in list_runs(store, model="llama3.2:3b", since_ms=five_days_ago)] == [NEW, NEW]


def test_limit_order_and_kind(seeded):
    store = seeded["store"]
    newest = list_runs(store)
    assert list_runs(store, limit=2) == newest[:2]
    oldest = list_runs(store, order="start_time ASC", limit=3)
    assert [r.engine_version for r in oldest] == [OLD] * 3 and oldest == newest[::-1][:3]
    fastest = list_runs(store, order="metrics.decode_tps_median DESC")
    assert [r.decode_tps_median for r in fastest] == sorted((r.decode_tps_median for r in newest), reverse=True)
    assert list_runs(store, kind="eval") == []
    assert list_runs(store, kind="bench") == newest
    with pytest.raises(ValueError):
        list_runs(store, limit=0)


def test_rows_checked_here_are_paged_for_never_loaded_at_once(seeded, monkeypatch):
    calls = []
    store = seeded["store"]

    class Counting:
        def search_runs_page(self, filter_string, **kw):
            calls.append((filter_string, kw["max_results"]))
            return store.search_runs_page(filter_string, **kw)

    monkeypatch.setattr(runs_query, "_POST_FILTER_PAGE", 2)
    rows = list_runs(Counting(), kind="bench", limit=5)  # 'bench' is checked on this side
    assert rows == list_runs(store, limit=5) and calls == [("", 5)]
    calls.clear()
    # '3b' is not llama3.2:3b, but the suffix search '%3b' finds its 3 runs: each is
    # dropped, and the next pages are larger
    assert list_runs(Counting(), model="3b", limit=1) == []
    sizes = [n for f, n in calls if f.endswith("'%3b'")]
    assert sizes[:2] == [1, 2] and len(sizes) >= 2
    assert [n for f, n in calls if f.endswith("'%3b:latest'")] == [1]


def test_two_spellings_are_merged_in_mlflow_order(seeded):
    store = seeded["store"]
    assert [r.model for r in list_runs(store, model="smollm2")] == ["smollm2:latest", "smollm2"]
    assert [r.model for r in list_runs(store, model="smollm2", order="start_time ASC")] == ["smollm2", "smollm2:latest"]
    by_speed = list_runs(store, model="smollm2", order="metrics.decode_tps_median DESC")  # merged
    assert len(by_speed) == 2
    assert [r.decode_tps_median for r in by_speed] == sorted((r.decode_tps_median for r in by_speed), reverse=True)
    (newest,) = list_runs(store, model="smollm2", limit=1)
    assert newest.model == "smollm2:latest"
    assert runs_query.parse_order("metrics.`decode_tps_median` DESC, created") == [
        ("metrics", "decode_tps_median", True), ("attr", "start_time", False)]


def test_quote_never_breaks_the_filter():
    assert quote("0.13.0") == "'0.13.0'"
    assert quote("it's") == "\"it's\""
    assert quote("it's \"x\"") is None


def test_json_and_csv_keys_are_the_documented_ones(seeded, capsys):
    code, out, _ = run_cli(seeded["config"], "--json", capsys=capsys)
    assert code == EXIT_OK
    data = json.loads(out)
    assert len(data) == 7 and all(list(d) == list(ROW_KEYS) for d in data)
    assert data[0]["flags"][:2] == ["invalid", "placement"] and data[0]["valid"] is False
    code, out, _ = run_cli(seeded["config"], "--csv", "--model", "smollm2", capsys=capsys)
    assert code == EXIT_OK
    import csv
    import io

    table = list(csv.DictReader(io.StringIO(out)))
    assert list(table[0]) == list(ROW_KEYS) and len(table) == 2
    assert [t["model"] for t in table] == ["smollm2:latest", "smollm2"]
    section = RUNS_DOC.read_text().split("## Runs", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{k}`" in section for k in ROW_KEYS), [k for k in ROW_KEYS if f"`{k}`" not in section]


def test_since_accepts_dates_and_iso_and_refuses_the_rest(seeded, capsys):
    assert parse_since("2025-06-01T12:00:00Z") == 1748779200000
    assert parse_since("2025-06-01T14:00:00+02:00") == 1748779200000
    code, out, _ = run_cli(seeded["config"], "--since", "2000-01-01", "-n", "3", capsys=capsys)
    assert code == EXIT_OK and len(out.splitlines()) == 4
    code, out, err = run_cli(seeded["config"], "--since", "last tuesday", capsys=capsys)
    assert code == EXIT_BAD_INPUT and out == ""
    assert err.count("\n") == 1 and "--since" in err and "YYYY-MM-DD" in err
    code, _, err = run_cli(seeded["config"], "-n", "0", capsys=capsys)
    assert code == EXIT_BAD_INPUT


def test_empty_store_says_no_runs(mlflow_template_db, tmp_path, capsys):  # noqa: F811
    shutil.copy2(mlflow_template_db, tmp_path / DB_FILE_NAME)
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[tracking]\nuri = "{default_tracking_uri(tmp_path)}"\n')
    code, out, err = run_cli(cfg, capsys=capsys)
    assert (code, out, err) == (EXIT_OK, "no runs\n", "")
    code, out, _ = run_cli(cfg, "--json", capsys=capsys)
    assert (code, json.loads(out)) == (EXIT_OK, [])


def test_unreachable_server_is_one_line_exit_3_without_credentials(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text('[tracking]\nuri = "http://alice:s3cret-token@127.0.0.1:9"\n')
    started = time.monotonic()
    code, out, err = run_cli(cfg, capsys=capsys)
    assert code == EXIT_UNREACHABLE and out == ""
    assert err.count("\n") == 1 and "unreachable" in err and "127.0.0.1:9" in err
    assert "s3cret" not in err and "alice" not in err
    assert time.monotonic() - started < 10
