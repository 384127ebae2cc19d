"""A credential in a URI is never shown: `sparkctl config`, `sparkctl sync` against an
unreachable team server, MlflowStore's errors and repr, the spool-then-MLflow message,
MLflow's log file, and `sparkctl status` (text and JSON) for engine URLs.

The tracking server is 127.0.0.1:9 (discard: nothing listens, so the connection is refused
at once); MLflow itself is real."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sparkctl import cli, paths
from sparkctl.config import parse_config
from sparkctl.core.snapshots import EngineStatus
from sparkctl.services.status import build_report, openai_engines_status, report_to_dict
from sparkctl.cli.textreport import render_status
from sparkctl.tracking import store as store_module
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.store import MlflowStore, TrackingError
from sparkctl.tracking.sync import record_run
from testkit.fakes.host import spark_snapshot

SECRET = "s3cret"
URI = f"http://alice:{SECRET}@127.0.0.1:9"


def _record() -> RunRecord:
    now = int(time.time() * 1000)
    return RunRecord(experiment="sparkctl-bench", run_name="qwen3:8b", start_ms=now - 1000, end_ms=now,
                     params={"model": "qwen3:8b"}, tags={"engine.kind": "ollama"},
                     summary_metrics={"decode_tps_median": 42.0})


@pytest.fixture
def team_config(tmp_path: Path) -> Path:
    path = tmp_path / "sparkctl.toml"
    path.write_text(f'[tracking]\nuri = "{URI}"\nexperiment = "sparkctl-bench"\n', encoding="utf-8")
    return path


def test_config_command_hides_the_tracking_password(team_config, capsys):
    assert cli.main(["--config", str(team_config), "config"]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "alice" not in out + err
    assert 'uri = "http://***@127.0.0.1:9"' in out
    assert 'experiment = "sparkctl-bench"' in out


def test_sync_to_an_unreachable_server_prints_no_secret(team_config, capsys):
    record = _record()
    Spool(paths.spool_file()).append(record)
    assert cli.main(["--config", str(team_config), "sync"]) == cli.EXIT_UNREACHABLE
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "0 of 1 spooled run(s) written to MLflow (http://***@127.0.0.1:9)" in out
    assert f"not written: {record.record_id}: MLflow server http://***@127.0.0.1:9 is unreachable" in out

    assert cli.main(["--config", str(team_config), "sync", "--json"]) == cli.EXIT_UNREACHABLE
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    failed = json.loads(out)["failed"]
    assert [f["record_id"] for f in failed] == [record.record_id]
    # MLflow's own log lines for this run went to the data dir, redacted
    log = paths.data_dir() / store_module.LOG_FILE_NAME
    assert not log.exists() or SECRET not in log.read_text(encoding="utf-8")


def test_store_errors_and_repr_hide_the_secret(tmp_path):
    store = MlflowStore(URI + "/?token=tok123", None, "sparkctl-bench", timeout_s=1, log_dir=tmp_path)
    assert SECRET not in repr(store) and "tok123" not in repr(store)
    assert store.display_uri == "http://***@127.0.0.1:9/?token=***"
    assert store.uri == URI + "/?token=tok123"  # MLflow still gets the real one

    with pytest.raises(TrackingError) as caught:
        store.write(_record())
    assert caught.value.unreachable
    text = str(caught.value)
    assert SECRET not in text and "tok123" not in text
    assert "http://***@127.0.0.1:9" in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # the cause quotes the URL

    with pytest.raises(TrackingError) as caught:
        store.search_runs()
    assert SECRET not in str(caught.value)

    # any TrackingError, whoever raises it, and the spool-then-MLflow message
    assert SECRET not in str(TrackingError(f"failed on {URI}/api/2.0/mlflow/runs/create"))
    result = record_run(_record(), Spool(tmp_path / "spool.jsonl"), store)
    assert result.spooled and not result.synced
    assert result.message.startswith("MLflow write failed, run kept in spool")
    assert SECRET not in result.message and "tok123" not in result.message


def test_mlflow_log_lines_are_redacted(tmp_path):
    previous = store_module._routed_to
    log_file = tmp_path / "mlflow.log"
    store_module.route_mlflow_logging(log_file)
    try:
        logging.getLogger("mlflow.tracking").warning("retrying %s/api/2.0/mlflow/runs/create", URI)
        store_module._handler.flush()
        text = log_file.read_text(encoding="utf-8")
        assert "retrying http://***@127.0.0.1:9/api/2.0/mlflow/runs/create" in text
        assert SECRET not in text
    finally:
        if previous is not None:
            store_module.route_mlflow_logging(previous)


def test_status_hides_engine_credentials():
    cfg = parse_config(
        '[engine]\nhost = "http://127.0.0.1:9"\n'
        '[engines.llama]\nkind = "openai"\nurl = "http://127.0.0.1:9/v1?api_key=sk-abc"\n'
        '[engines.vllm]\nkind = "openai"\nurl = "http://127.0.0.1:9/v1"\n',
        env={},
    )
    named = asyncio.run(openai_engines_status(cfg))
    assert [n.name for n in named] == ["llama", "vllm"]
    # an engine status built from the config, as the dashboard's "connecting…" one is
    engine = EngineStatus("ollama", "http://bob:hunter2@box:11434", False,
                          error="cannot connect to Ollama at http://bob:hunter2@box:11434 (is it running?)")
    report = build_report(cfg, engine, spark_snapshot(), datetime.now(timezone.utc), named)
    text = render_status(report)
    blob = json.dumps(report_to_dict(report))
    for shown in (text, blob, repr(report)):
        assert "sk-abc" not in shown
        assert "hunter2" not in shown and "bob" not in shown
    assert "engine   ollama at http://***@box:11434: UNREACHABLE" in text
    assert "api_key=***" in text
    assert json.loads(blob)["engine"]["host"] == "http://***@box:11434"
