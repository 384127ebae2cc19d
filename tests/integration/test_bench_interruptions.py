"""A bench interrupted the ways a real Spark user's are: an ssh session that drops (SIGHUP,
then EIO on every write to the dead terminal), and a second bench started on the same
engine. `sparkctl bench` runs as a real subprocess; the Ollama is a FAKE
(testkit/fakes/ollama_server.py, Ollama's wire format over real HTTP, paced tokens)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sparkctl.tracking.spool import Spool
from testkit.fakes.ollama_server import FakeOllama, default_state
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
FOREVER_AFTER_S = 100 * 365 * 86400


@pytest.fixture
def slow_fake():
    """llama3.2:3b streams at 40 tok/s without end; qwen3:8b is the production lane model,
    resident forever at 32768 context."""
    state = default_state()
    state.tokens_per_s = 40.0
    state.runaway = "response"
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=32768)
    server = FakeOllama(state).start()
    yield server
    server.stop()


def write_config(tmp_path: Path, server: FakeOllama) -> Path:
    cfg = tmp_path / "sparkctl.toml"
    # the tracking server is unreachable on purpose: the run must wait in the spool
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[lanes]\nproduction = "qwen3:8b"\n'
                   '[tracking]\nuri = "http://127.0.0.1:9"\n'
                   "[bench]\nwarmup = 0\nreps = 3\nnum_predict = 100000\ntimeout_s = 60\n")
    return cfg


def env_for(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SPARKCTL_DATA_DIR": str(tmp_path / "data"),
            "SPARKCTL_LOCK_DIR": str(tmp_path / "locks"), "PYTHONPATH": str(REPO)}


def wait_for(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def streaming(server: FakeOllama) -> bool:
    return len([c for c in server.calls("/api/generate") if c.body.get("prompt")]) >= 1


def test_ssh_hangup_records_killed_and_restores_lanes(slow_fake, tmp_path):
    """The terminal goes away mid-bench: the kernel sends SIGHUP and every later write to
    the terminal fails with EIO. The run must still be KILLED (not FAILED), and solo mode
    must still put the production model back."""
    cfg = write_config(tmp_path, slow_fake)
    argv = [sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "--solo", "llama3.2:3b"]
    pid, master = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        os.execve(sys.executable, argv, env_for(tmp_path))
    seen = bytearray()

    def drain():  # the progress line redraws constantly: keep the pty from filling up
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            seen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        wait_for(lambda: streaming(slow_fake), "the bench never started streaming")
        wait_for(lambda: b"tokens" in seen, "no progress line was drawn on the terminal")
        time.sleep(0.5)
    finally:
        os.close(master)  # hang up: SIGHUP to the session, EIO on the terminal from now on
    deadline = time.monotonic() + 40
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the bench did not stop after the hang-up")
        time.sleep(0.1)
    assert os.WIFEXITED(status), f"killed by signal {os.WTERMSIG(status) if os.WIFSIGNALED(status) else '?'}"
    assert os.waitstatus_to_exitcode(status) == 130  # stopped, not an error (1) or a crash
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED"
    assert record.step_metrics["client_tokens"][0] > 5  # the repetition in flight is kept, marked
    r = slow_fake.state.resident.get("qwen3:8b")
    assert r is not None and r.context_length == 32768
    assert (r.expires_at_ns - time.time_ns()) / 1e9 > FOREVER_AFTER_S
    assert record.tags["guard.lane_restore"].startswith("restored")


def test_a_second_bench_on_the_same_engine_waits_or_refuses(slow_fake, tmp_path):
    cfg = write_config(tmp_path, slow_fake)
    env = env_for(tmp_path)
    first = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "llama3.2:3b"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(lambda: streaming(slow_fake), "the first bench never started streaming")
        refused = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench",
                                  "--no-wait", "qwen3:8b"], capture_output=True, text=True, env=env, timeout=60)
        assert refused.returncode == 4, refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        assert f"pid {first.pid} benching llama3.2:3b" in line and "Traceback" not in refused.stderr
        waiting = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench",
                                    "--reps", "1", "--num-predict", "5", "qwen3:8b"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(3.0)
        assert waiting.poll() is None  # still waiting: it sent nothing to the engine
        assert not [c for c in slow_fake.calls("/api/generate") if c.body.get("model") == "qwen3:8b"
                    and c.body.get("prompt")]
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
        slow_fake.state.runaway = None
        out, err = waiting.communicate(timeout=60)
        assert f"waiting for another bench to finish: pid {first.pid}" in err
        assert waiting.returncode == 0, err
    finally:
        for p in (first,):
            if p.poll() is None:
                p.kill()


def test_kill_9_mid_bench_loses_only_the_repetition_in_flight(tmp_path, mlflow_store):  # noqa: F811
    """A crash (kill -9, or a Spark power-cycled after a memory freeze) right after the
    second repetition: the next `sparkctl sync` closes the run KILLED with both."""
    import json

    state = default_state()
    state.tokens_per_s = 100.0  # 20 tokens: ~0.2 s per repetition
    server = FakeOllama(state).start()
    try:
        cfg = tmp_path / "sparkctl.toml"
        cfg.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "{mlflow_store.uri}"\n'
                       f'experiment = "{mlflow_store.experiment}"\n'
                       "[bench]\nwarmup = 0\nreps = 50\nnum_predict = 20\n")
        env = env_for(tmp_path)
        proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "llama3.2:3b"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        spool = Spool(tmp_path / "data" / "spool.jsonl")

        def journaled(n: int) -> bool:
            return any(len(rec.step_metrics.get("ttft_s", [])) >= n for rec, _ in spool.in_progress())

        wait_for(lambda: journaled(2), "two repetitions were never journaled", timeout=30)
        proc.kill()  # SIGKILL: no handler runs, nothing is flushed
        proc.communicate(timeout=10)
        (rec_so_far, _), = spool.in_progress()
        done_reps = len(rec_so_far.step_metrics["ttft_s"])
        assert spool.pending() == []  # a journal is not a finished run
        sync = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "sync", "--json"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert sync.returncode == 0, sync.stderr
        assert json.loads(sync.stdout)["recovered"] == 1
        (landed,) = mlflow_store.search_runs()
        assert landed["status"] == "KILLED"
        assert landed["tags"]["sparkctl.recovered"] == "true"
        assert f"with {done_reps} repetition(s)" in landed["tags"]["guard.recovery"]
        assert done_reps >= 2 and landed["metrics"]["decode_tps_median"] > 0
    finally:
        server.stop()


def test_signals_during_the_wrap_up_do_not_cut_the_lane_restore_short(slow_fake, tmp_path):
    """A dropped ssh session sends SIGHUP twice (the shell forwards one, the kernel another
    when the session leader exits), and users press Ctrl-C again while the bench stops."""
    slow_fake.state.models["qwen3:8b"].load_s = 0.5  # the restore takes a while
    cfg = write_config(tmp_path, slow_fake)
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), "bench", "--solo",
                             "llama3.2:3b"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(tmp_path))
    wait_for(lambda: streaming(slow_fake), "the bench never started streaming")
    time.sleep(0.3)
    for sig, pause in ((signal.SIGHUP, 0.01), (signal.SIGHUP, 0.05), (signal.SIGINT, 0.2), (signal.SIGTERM, 0)):
        proc.send_signal(sig)
        time.sleep(pause)
    out, err = proc.communicate(timeout=40)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "putting lane models back" in err
    (record,) = Spool(tmp_path / "data" / "spool.jsonl").pending()
    assert record.status == "KILLED" and record.tags["guard.lane_restore"].startswith("restored")
    r = slow_fake.state.resident.get("qwen3:8b")
    assert r is not None and r.context_length == 32768
