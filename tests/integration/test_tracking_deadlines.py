"""A tracking server that answers one byte at a time (a FAKE: testkit/fakes/slow_drip.py,
real HTTP on loopback) must not hold sparkctl: every write and read has a total deadline
(`[tracking] timeout_s`), and a stop signal ends a bench within seconds, its run kept in the
spool. The bench's engine is the FAKE Ollama (testkit/fakes/ollama_server.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sparkctl import cli
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from testkit.fakes.ollama_server import bench_scenario
from testkit.fakes.slow_drip import SlowDrip


@pytest.fixture
def drip():
    with SlowDrip(interval_s=0.2, max_s=40) as server:
        yield server


def write_config(tmp_path, drip, extra: str = "") -> str:
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "http://127.0.0.1:9"\n[tracking]\nuri = "{drip.url}"\n{extra}')
    return str(config)


def test_runs_gives_up_on_a_dripping_server_at_its_deadline(drip, tmp_path, capsys):
    config = write_config(tmp_path, drip, "timeout_s = 2\n")
    started = time.monotonic()
    code = cli.main(["--config", config, "runs"])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err == (f"sparkctl: MLflow server {drip.url} did not finish the search within 2 s "
                   f"([tracking] timeout_s)\n")
    assert took < 8, f"runs took {took:.0f} s"
    assert drip.paths  # it was asked, and answered (slowly)


def test_sync_gives_up_on_a_dripping_server_and_keeps_the_run(drip, tmp_path, capsys):
    from sparkctl import paths

    config = write_config(tmp_path, drip, "timeout_s = 2\n")
    now = int(time.time() * 1000)
    record = RunRecord(experiment="sparkctl-bench", run_name="seeded", status="FINISHED", start_ms=now,
                       end_ms=now + 1000, params={"model": "qwen3:8b"})
    Spool(paths.spool_file()).append(record)
    started = time.monotonic()
    code = cli.main(["--config", config, "sync"])
    took = time.monotonic() - started
    out, _ = capsys.readouterr()
    assert code == 3 and took < 15, f"sync took {took:.0f} s"
    assert out.splitlines()[0] == f"0 of 1 spooled run(s) written to MLflow ({drip.url})"
    assert f"not written: {record.record_id}: MLflow server {drip.url} did not finish the write within 2 s" \
           in out
    assert [r.record_id for r in Spool(paths.spool_file()).pending()] == [record.record_id]


def test_sigterm_while_the_run_is_written_ends_the_bench_within_seconds(serve, drip, tmp_path):
    """The bench measured and put the lanes back; its run is spooled; the server drips. A
    SIGTERM then ends the process within seconds (the full deadline is a minute)."""
    server = serve(bench_scenario())
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "{drip.url}"\n'
                      "[bench]\nwarmup = 0\nreps = 1\nnum_predict = 8\n")
    env = {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "bench", "llama3.2:3b"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert drip.asked.wait(60), "the bench never wrote its run"
        time.sleep(0.5)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert took < 10, f"the bench took {took:.0f} s to end after SIGTERM"
    # the bench had finished measuring: its run is FINISHED, kept in the spool for `sparkctl sync`
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "stopping: putting lane models back and recording the runs first" in err
    assert (f"llama3.2:3b: MLflow write failed, run kept in spool {tmp_path / 'data' / 'spool.jsonl'}: MLflow "
            f"server {drip.url} did not finish the write (stopped by a signal)") in out
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "FINISHED" and record.params["model"] == "llama3.2:3b"
    assert record.summary_metrics["decode_tps_median"] > 0


def test_sigterm_mid_bench_with_a_dripping_server_ends_within_seconds(serve, drip, tmp_path):
    """Stopped while measuring: the KILLED run is spooled, its write is given up on within
    seconds, and the bench exits 130 as any interrupted bench does."""
    server = serve(bench_scenario(tokens_per_s=50.0, runaway="response"))
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "{drip.url}"\n'
                      "[bench]\nwarmup = 0\nreps = 3\nnum_predict = 100000\n")
    env = {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "bench", "llama3.2:3b"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while len(server.calls("/api/generate")) < 2:
            assert time.monotonic() < deadline, "the bench never started streaming"
            time.sleep(0.1)
        time.sleep(1.0)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert took < 12, f"the bench took {took:.0f} s to end after SIGTERM"
    assert "Traceback" not in err and "recorded as KILLED" in err
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED"
