"""A full disk under the data dir (a real tmpfs, tests/integration/small_disk.py): every
writer says so in one line; no logging traceback reaches the terminal. The engine is the
FAKE Ollama (testkit/fakes/ollama_server.py); MLflow is the real one, on SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from testkit.fakes.ollama_server import bench_scenario
from tests.integration.small_disk import fill, tiny_tmpfs


@pytest.fixture
def full_data_dir(tmp_path):
    with tiny_tmpfs(tmp_path / "disk") as disk:
        yield disk


def sparkctl(data, *argv, config=None):
    env = {**os.environ, "SPARKCTL_DATA_DIR": str(data)}
    cmd = [sys.executable, "-m", "sparkctl.cli"] + (["--config", str(config)] if config else []) + list(argv)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)


def test_sync_on_a_full_disk_says_so_in_one_line_each(full_data_dir):
    data = full_data_dir / "data"
    data.mkdir()
    now = int(time.time() * 1000)
    record = RunRecord(experiment="sparkctl-bench", run_name="seeded", status="FINISHED", start_ms=now,
                       end_ms=now + 1000, params={"model": "qwen3:8b"})
    Spool(data / "spool.jsonl").append(record)
    fill(full_data_dir)
    done = sparkctl(data, "sync")
    assert done.returncode == 3
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr
    assert done.stderr.splitlines() == [
        f"sparkctl: cannot write MLflow's log {data / 'mlflow.log'}: the disk is full (no space left on the "
        f"device); its lines are dropped"]
    assert done.stdout.splitlines()[1] == (f"  not written: {record.record_id}: MLflow write failed: the disk "
                                           f"holding {data} is full; free space there")


def test_a_bench_on_a_full_disk_says_so_without_tracebacks(full_data_dir, serve, tmp_path):
    server = serve(bench_scenario())
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[bench]\nwarmup = 0\nreps = 2\nnum_predict = 8\n')
    data = full_data_dir / "data"
    data.mkdir()
    fill(full_data_dir)
    done = sparkctl(data, "bench", "llama3.2:3b", config=config)
    full = "the disk is full (no space left on the device)"
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr
    # one line per file that could not be written, each naming it and saying why, and the
    # run's own line: nothing took it (exit 7, docs/troubleshooting.md)
    assert done.returncode == 7
    not_saved = (f"llama3.2:3b: run NOT saved: spool: {full}; MLflow: MLflow write failed: the disk holding {data} "
                 "is full; free space there")
    assert sorted(done.stderr.splitlines()) == sorted([
        f"sparkctl: residency journal not written ({full}): if this process dies, what the bench changed "
        "cannot be put back at the next start",
        f"could not spool run {_record_id(done.stderr)} to {data / 'spool.jsonl'}: {full}",
        f"sparkctl: cannot write MLflow's log {data / 'mlflow.log'}: {full}; its lines are dropped",
        f"sparkctl: {not_saved}",
    ])


def _record_id(stderr: str) -> str:
    import re

    m = re.search(r"^could not spool run ([0-9a-f]{32}) to ", stderr, re.M)
    return m.group(1) if m else "?"
