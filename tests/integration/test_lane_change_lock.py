"""A lane change and a bench on one engine never overlap, and a bench's end reads the lanes
again (issue 29, point 6). Real `sparkctl bench` and `sparkctl promote` processes (and the
services in this process) against the FAKE Ollama (testkit/fakes/ollama_server.py: Ollama's
wire format over real HTTP, runner sessions kept as server/sched.go keeps them); a REAL
MLflow store (SQLite) where evidence is read in this process. The host probes of the
processes are this machine's real ones (the preconditions are forced past: these tests are
about what ends up resident)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from sparkctl import paths
from sparkctl.config import load_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchBusy, BenchLock, BenchRunner, BenchSettings, RepStarted
from sparkctl.services.lanes import execute, plan_promotion
from sparkctl.statefile import PAUSE_ENV, read_state, set_owned, update_state
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import make_model
from testkit.lanes import LANES_TOML, lanes_state, ps, sparkctl_env, streaming, wait_for
from testkit.tracking import TEST_EXPERIMENT, mlflow_store, mlflow_template_db  # noqa: F401

NEW = "qwen3:1.7b"  # the contender promoted to production


def engine_state():
    """production qwen3:8b kept forever, fast qwen3:4b for 30 minutes (testkit/lanes.py), and
    two small contenders on disk."""
    state = lanes_state(tokens_per_s=40.0, runaway=None)
    state.add_model(make_model(NEW, size_gib=1.4, parameter_size="1.7B", context_length=40960))
    state.add_model(make_model("qwen3:0.6b", size_gib=0.6, parameter_size="0.6B", context_length=40960))
    return state


def write_config(tmp_path: Path, url: str, tracking: str = "http://127.0.0.1:9") -> Path:
    """The tracking server is unreachable unless given: runs and promotions wait in the
    spool, and the evidence is forced past."""
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{url}"\n{LANES_TOML}[tracking]\nuri = "{tracking}"\n'
                      f'experiment = "{TEST_EXPERIMENT}"\n[bench]\nwarmup = 0\nreps = 1\nnum_predict = 100000\n'
                      "timeout_s = 300\n")
    return config


class Command:
    """A sparkctl process whose stderr is read as it comes."""

    def __init__(self, config: Path, *argv: str, env: dict | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "sparkctl", "--config", str(config), *argv],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.err: list[str] = []
        self.out = ""
        self._reader = threading.Thread(target=lambda: self.err.extend(iter(self.proc.stderr.readline, "")),
                                        daemon=True)
        self._reader.start()

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.err))

    def finish(self, timeout: float = 120) -> int:
        self.out = self.proc.stdout.read()
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    @property
    def stderr(self) -> str:
        return "".join(self.err)


@pytest.fixture
def one_machine(tmp_path, monkeypatch):
    """This test and the sparkctl processes it starts share one data dir and one lock dir,
    as two commands of one user do."""
    for key in ("SPARKCTL_DATA_DIR", "SPARKCTL_LOCK_DIR", "PYTHONPATH"):
        monkeypatch.setenv(key, sparkctl_env(tmp_path)[key])


def test_a_promotion_during_a_solo_bench_waits_for_it_and_no_demoted_model_comes_back(
        serve, one_machine, tmp_path):
    server = serve(engine_state())
    server.state.runaway = "response"  # the bench streams until this test stops it
    config = write_config(tmp_path, server.url)
    bench = Command(config, "bench", "llama3.2:3b", "--solo")
    wait_for(lambda: streaming(server), "the bench never streamed", timeout=90)
    assert set(ps(server)) == {"llama3.2:3b"}  # solo: both lane models unloaded for now
    promote = Command(config, "promote", NEW, "--lane", "production", "--swap", "--force")
    # the promotion either goes through while the bench runs, or says it waits for it
    wait_for(lambda: promote.proc.poll() is not None or promote.said("waiting for"),
             "the promotion neither finished nor waited", timeout=90)
    bench.proc.send_signal(signal.SIGTERM)  # the bench ends (KILLED), putting back what it unloaded
    assert bench.finish() == 130, bench.stderr
    assert promote.finish() == 0, (promote.out, promote.stderr)
    assert read_state(paths.state_file()).lanes == {"production": NEW}
    after = ps(server)
    # the promotion's memory plan: its model and the fast lane; the demoted qwen3:8b is not back
    assert set(after) == {NEW, "qwen3:4b"}, after
    assert after[NEW][1] > 100 * 365 * 86400  # kept forever, like the incumbent it replaced
    # it said whom it waited for, then went ahead once the bench had put the lanes back
    assert promote.said("sparkctl: waiting for another bench to finish: pid") and promote.said("benching llama3.2:3b")
    assert "ERROR" not in bench.stderr


def test_two_swaps_of_one_lane_at_once_never_bring_the_demoted_model_back(serve, one_machine, tmp_path):
    server = serve(engine_state())
    server.state.tokens_per_s = None
    config = write_config(tmp_path, server.url)
    # the first stops for 15 s inside its state file write (after its load, before the old
    # model's unload); the second starts right then
    first = Command(config, "promote", NEW, "--lane", "production", "--swap", "--force", env={PAUSE_ENV: "15"})
    state_dir = paths.state_file().parent
    wait_for(lambda: bool(list(state_dir.glob(".state.toml.*.tmp"))) or first.proc.poll() is not None,
             "the first promotion never reached its write", timeout=90)
    second = Command(config, "promote", "qwen3:0.6b", "--lane", "production", "--swap", "--force")
    assert first.finish() == 0, (first.out, first.stderr)
    code = second.finish()
    assert read_state(paths.state_file()).lanes == {"production": NEW}
    # the second never touched the engine: it waited, then found the lane changed
    assert not [c for c in server.calls("/api/generate") if c.body.get("model") == "qwen3:0.6b"]
    assert set(ps(server)) == {NEW, "qwen3:4b"}  # neither qwen3:8b (put back "forever") nor qwen3:0.6b
    assert code == 4, (second.out, second.stderr)
    assert second.said("waiting for a lane change to finish: pid") and second.said(f"promoting {NEW} to lane production")
    assert second.said(f"lane production changed to {NEW} while this promote ran")
    assert second.said("nothing was loaded or written")


async def test_a_bench_ending_after_a_lane_change_puts_back_the_lanes_as_they_are_now(
        serve, mlflow_store, tmp_path):  # noqa: F811
    """A lane change that took no lock (an older sparkctl, or one started before this
    version) lands in the state file while a solo bench runs: its end reads the lanes again."""
    server = serve(engine_state())
    config = write_config(tmp_path, server.url, mlflow_store.uri)
    cfg = load_config(str(config))
    state_path = Path(cfg.state_file)

    def promote_meanwhile(ev) -> None:
        if isinstance(ev, RepStarted) and not ev.warmup and ev.index == 0:
            update_state(lambda s: set_owned(s, "lanes.production", NEW, "qwen3:8b"), state_path)
            httpx.post(f"{server.url}/api/generate", json={"model": NEW, "prompt": "", "keep_alive": -1},
                       timeout=10).raise_for_status()

    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    settings = replace(BenchSettings.from_config(cfg.bench), warmup=0, reps=2, num_predict=20, mode="solo")
    try:
        runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), settings, sink=promote_meanwhile)
        (run,) = await runner.run(["llama3.2:3b"])
    finally:
        await engine.close()
    assert set(ps(server)) == {NEW, "qwen3:4b"}  # the fast lane back; qwen3:8b serves no lane now
    assert any(line.startswith("qwen3:8b: not put back, lane production no longer serves it")
               for line in runner.lane_restore.lane_changed)
    assert "lanes changed meanwhile" in run.residency and runner.lane_restore.ok


async def test_a_switch_from_the_tui_is_refused_naming_the_bench_that_holds_the_engine(
        serve, mlflow_store, tmp_path):  # noqa: F811
    server = serve(engine_state())
    config = write_config(tmp_path, server.url, mlflow_store.uri)
    cfg = load_config(str(config))
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    bench_lock = BenchLock(server.url, ["llama3.2:3b"])
    assert await asyncio.to_thread(bench_lock.try_acquire) is None  # a bench holds the engine
    try:
        plan = await plan_promotion(cfg, engine, FakeProbes(spark_snapshot()), mlflow_store, "production", NEW)
        with pytest.raises(BenchBusy, match=rf"another bench is running on .*: pid {os.getpid()} benching llama3.2:3b"):
            await execute(cfg, engine, FakeProbes(spark_snapshot()), plan, force=True)
        assert set(ps(server)) == {"qwen3:8b", "qwen3:4b"}  # nothing was touched
    finally:
        bench_lock.release()
        await engine.close()
