"""What `sparkctl bench` tells a script when the run is not a result or was not kept: real
processes against the FAKE Ollama (testkit/fakes/ollama_server.py), with a REAL read-only
filesystem under the data dir (a tmpfs mounted read-only, where this user may mount one;
else a directory without write permission, which stops any user but root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkctl.tracking.spool import Spool
from testkit.fakes.ollama_server import bench_scenario


def sparkctl(config: Path, *argv: str, data: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARKCTL_DATA_DIR": str(data)}
    return subprocess.run([sys.executable, "-m", "sparkctl", "--config", str(config), *argv],
                          capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture
def read_only_data_dir(tmp_path):
    """A data dir that exists but takes no write: a disk remounted read-only under sparkctl."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() == 0:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode().strip()}); root ignores file modes")
        try:
            (mnt / "data").mkdir()
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, capture_output=True)
            yield mnt / "data"
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)
    else:
        (mnt / "data").mkdir()
        (mnt / "data").chmod(0o555)
        try:
            yield mnt / "data"
        finally:
            (mnt / "data").chmod(0o755)


def test_a_run_neither_the_spool_nor_mlflow_took_exits_7_not_0(serve, read_only_data_dir, tmp_path):
    server = serve(bench_scenario(tokens_per_s=None))
    config = tmp_path / "sparkctl.toml"  # the default store: SQLite in the (read-only) data dir
    config.write_text(f'[engine]\nhost = "{server.url}"\n[bench]\nwarmup = 0\nreps = 2\nnum_predict = 20\n')
    done = sparkctl(config, "bench", "llama3.2:3b", data=read_only_data_dir)
    assert done.returncode == 7, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sparkctl: llama3.2:3b: run NOT saved: spool: ") and "MLflow" in last
    assert "Traceback" not in done.stderr
    assert len(server.calls("/api/generate")) >= 2  # the bench itself ran: only its record was lost


def test_a_bench_whose_every_repetition_is_dnf_is_failed_and_exits_5(serve, tmp_path):
    server = serve(bench_scenario(tokens_per_s=100.0, runaway="response"))
    config = tmp_path / "sparkctl.toml"  # tracking unreachable on purpose: the run waits in the spool
    config.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "http://127.0.0.1:9"\n'
                      "[bench]\nwarmup = 0\nreps = 2\nnum_predict = 100000\n")
    data = tmp_path / "data"
    done = sparkctl(config, "bench", "llama3.2:3b", "--timeout", "0.6", data=data)
    assert done.returncode == 5, (done.stdout, done.stderr)
    assert "nothing measured: all 2 repetition(s) were DNF" in done.stdout
    (record,) = Spool(data / "spool.jsonl").pending()
    assert record.status == "FAILED"


def test_a_promotion_whose_record_neither_store_took_exits_7(serve, read_only_data_dir, tmp_path):
    state = bench_scenario(tokens_per_s=None)
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=8192)
    server = serve(state)
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[lanes]\nproduction = "qwen3:8b"\n')
    done = sparkctl(config, "promote", "llama3.2:3b", "--lane", "production", "--force", data=read_only_data_dir)
    assert done.returncode == 7, (done.stdout, done.stderr)
    assert "lane production: qwen3:8b -> llama3.2:3b" in done.stdout  # the lane did change
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sparkctl: promote of lane production: run NOT saved: spool: ")
