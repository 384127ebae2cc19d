"""A lane whose model spilled to the CPU is a warning wherever lanes are shown (issue 17,
point 6): `status`, `status --json` ("warnings"), `lanes` and the dashboard. The Ollama is a
FAKE (testkit/fakes/ollama_server.py) holding a Spark-like state: gpt-oss:120b all on the GPU,
qwen3:30b-a3b split, 24 GiB resident of which 20 GiB on the GPU (`ollama ps` prints
17%/83% CPU/GPU for it: round(4 / 24 * 100) = 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, two_models_resident

REPO = Path(__file__).resolve().parents[2]
SPLIT = "17%/83% CPU/GPU"


@pytest.fixture
def spark():
    server = FakeOllama(two_models_resident()).start()
    yield server
    server.stop()


def run(server, tmp_path, *args):
    cfg = tmp_path / "sparkctl.toml"
    cfg.write_text(f'[engine]\nhost = "{server.url}"\n[lanes]\nproduction = "gpt-oss:120b"\nfast = "qwen3:30b-a3b"\n')
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(cfg), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_status_json_lists_the_spilled_lane_with_its_cpu_share_and_cost(spark, tmp_path):
    out = run(spark, tmp_path, "status", "--json")
    assert out.returncode == 0, out.stderr
    warnings = json.loads(out.stdout)["warnings"]
    (w,) = [w for w in warnings if "qwen3:30b-a3b" in w]
    assert w.startswith("lane fast:") and SPLIT in w
    assert "4.0 GiB of its 24.0 GiB" in w and "host memory bandwidth" in w
    assert not any("gpt-oss:120b" in w for w in warnings)  # all on the GPU: nothing to say


def test_status_and_lanes_print_it_as_a_warning(spark, tmp_path):
    text = run(spark, tmp_path, "status").stdout
    assert f"WARNING: lane fast: qwen3:30b-a3b spilled to the CPU ({SPLIT})" in text
    lanes = run(spark, tmp_path, "lanes")
    assert lanes.returncode == 0
    assert f"WARNING: lane fast: qwen3:30b-a3b spilled to the CPU ({SPLIT})" in lanes.stdout
    rows = json.loads(run(spark, tmp_path, "lanes", "--json").stdout)
    fast = next(r for r in rows if r["lane"] == "fast")
    assert SPLIT in fast["warning"] and next(r for r in rows if r["lane"] == "production")["warning"] is None


async def test_the_dashboard_warns_about_it(spark):

    engine = OllamaEngine(spark.url, timeout=5.0, connect_timeout=1.0)
    app = make_app(Config(lanes={"production": "gpt-oss:120b", "fast": "qwen3:30b-a3b"}), engine=engine,
                   probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            label = app.screen.query_one("#warnings")
            if label.display and SPLIT in label.text:
                break
        text = app.screen.query_one("#warnings").text  # whole, as N shows it
        assert f"lane fast: qwen3:30b-a3b spilled to the CPU ({SPLIT})" in text and "host memory" in text
