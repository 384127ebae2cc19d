"""Real `sparkctl promote` processes against the FAKE Ollama and a REAL MLflow store: two
promoting at once, and one killed with SIGKILL between writing the new state and renaming
it over the old. The host probes are this machine's real ones (the preconditions are
forced past: these tests are about the state file, not the evidence)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from sparkctl import paths
from sparkctl.statefile import PAUSE_ENV, read_state
from testkit.fakes.model_scenarios import spark_state
from testkit.tracking import (  # noqa: F401
    TEST_EXPERIMENT,
    mlflow_store,
    mlflow_template_db,
)

USER = """\
# hand-written; the router reads this file
[engine]
host = "{url}"  # the fake

[lanes]
production = "gpt-oss:120b"  # big
fast = "llama3.2:3b"         # small

[tracking]
uri = "{uri}"
experiment = "{experiment}"
"""


def setup(serve, store, tmp_path):
    state = spark_state()
    state.tokens_per_s = None
    server = serve(state)
    config = tmp_path / "sparkctl.toml"
    config.write_text(USER.format(url=server.url, uri=store.uri, experiment=TEST_EXPERIMENT))
    return state, config, config.read_bytes()


def sparkctl(config, *argv, env=None):
    return subprocess.Popen([sys.executable, "-m", "sparkctl", "--config", str(config), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_processes_promoting_at_once_both_land(serve, mlflow_store, tmp_path):  # noqa: F811
    _state, config, original = setup(serve, mlflow_store, tmp_path)
    procs = [sparkctl(config, "promote", "qwen3:8b", "--lane", "production", "--force"),
             sparkctl(config, "promote", "qwen3:30b-a3b", "--lane", "fast", "--force")]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    owned = read_state(paths.state_file())
    assert owned.lanes == {"production": "qwen3:8b", "fast": "qwen3:30b-a3b"}
    assert sorted(h.seq for h in owned.history) == [1, 2]
    assert config.read_bytes() == original


def test_two_processes_racing_for_one_lane_never_corrupt_it(serve, mlflow_store, tmp_path):  # noqa: F811
    _state, config, original = setup(serve, mlflow_store, tmp_path)
    procs = [sparkctl(config, "promote", m, "--lane", "production", "--force")
             for m in ("qwen3:8b", "qwen3:30b-a3b")]
    results = [p.communicate(timeout=120) for p in procs]
    owned = read_state(paths.state_file())
    history = owned.history
    # either both went through one after the other (the second saw the first's lane), or
    # the second found the lane changed under it and refused to write: never a lost update
    for p, (_out, err) in zip(procs, results):
        assert p.returncode == 0 or (p.returncode == 4 and "changed to" in err and "while this promote ran" in err), err
    assert [h.seq for h in history] == list(range(1, len(history) + 1))
    assert owned.lanes["production"] == history[-1].model
    if len(history) == 2:
        assert history[1].previous == history[0].model
    assert config.read_bytes() == original


def test_kill_9_mid_write_of_a_real_promotion_leaves_the_old_state(serve, mlflow_store, tmp_path):  # noqa: F811
    _state, config, original = setup(serve, mlflow_store, tmp_path)
    first = sparkctl(config, "promote", "qwen3:8b", "--lane", "fast", "--force")
    assert first.wait(timeout=120) == 0, first.communicate()
    state_path = paths.state_file()
    before = state_path.read_bytes()
    proc = sparkctl(config, "promote", "qwen3:30b-a3b", "--lane", "production", "--force",
                    env={**os.environ, PAUSE_ENV: "60"})
    deadline = time.monotonic() + 90
    while not list(state_path.parent.glob(".state.toml.*.tmp")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert state_path.read_bytes() == before
    assert read_state(state_path).lanes == {"fast": "qwen3:8b"}
    assert config.read_bytes() == original
    done = sparkctl(config, "lanes", "--json")
    out, _ = done.communicate(timeout=60)
    assert done.returncode == 0 and '"model": "qwen3:8b"' in out
