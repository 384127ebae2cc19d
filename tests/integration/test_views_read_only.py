"""Views only read (issue 28, point 5): the fleet, and the TUI's screens, leave a killed
bench's models as they are and show the repair that is pending; the repair is started by
the user (`P` in the TUI, any local command, `sparkctl lanes --restore`) or by a bench
before it looks at what is resident.

The bench is a REAL `sparkctl bench --solo` killed with SIGKILL mid-stream (its residency
journal stays behind, its owner dead); the fleet runs over REAL ssh (Debian's sshd on
loopback, tests/integration/sshd.py); the Ollama is a FAKE (tests/fakes/ollama_server.py:
Ollama's wire format over real HTTP, runners' sessions kept as server/sched.go keeps them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import Notice
from sparkctl.tui.app import make_app
from tests.fakes.host import FakeProbes, spark_snapshot
from tests.integration.lanes_fixtures import (  # noqa: F401
    FOREVER_AFTER_S, lanes_fake, ps, write_config,
)
from tests.integration.sshd import SshLab, lab  # noqa: F401
from tests.integration.test_bench_lanes import bench, settings
from tests.integration.test_bench_recovery import kill_mid_solo_bench
from tests.integration.test_fleet import fleet_config, install, run_fleet

LANES = {"production": "qwen3:8b", "fast": "qwen3:4b"}
LEFT_BY_THE_DEAD_BENCH = {"llama3.2:3b"}  # solo: both lanes out, the contender in


def journals(data: Path) -> list[Path]:
    return sorted((data / "residency").glob("*.json"))


def test_a_fleet_view_of_a_host_with_a_killed_bench_leaves_its_models_and_shows_the_repair(
        lab: SshLab, lanes_fake, tmp_path):
    sshd = lab.server("a")
    lab.alias("spark-a", sshd)
    script = install(tmp_path, "a", lanes_fake.url, LANES)
    host_dir = script.parent
    kill_mid_solo_bench(lanes_fake, host_dir / "sparkctl.toml", host_dir)
    assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(host_dir / "data")
    cfg = fleet_config(tmp_path / "fleet.toml", lab, {"a": {"ssh": "spark-a", "sparkctl": str(script)}})

    code, out, err = run_fleet(cfg, "--json", "--no-runs")
    assert code == 0, err
    (host,) = json.loads(out)["hosts"]
    assert host["state"] == "live"
    pending = [w for w in host["warnings"] if "died; what it changed is not put back yet" in w]
    assert pending and pending[0].endswith("(run `sparkctl lanes --restore` on a)"), host["warnings"]
    _code, text, _err = run_fleet(cfg, "--no-runs")
    assert "⚠ a bench of llama3.2:3b" in text and "not put back yet" in text
    # looked at twice: nothing was loaded, unloaded or put back there
    assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(host_dir / "data")

    # a local command on that host repairs, as before
    local = subprocess.run([str(script), "status", "--json"], capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "put back what a bench of llama3.2:3b" in local.stderr, local.stderr
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b"} and not journals(host_dir / "data")


async def test_the_dashboard_shows_a_killed_benchs_models_and_puts_them_back_only_when_asked(
        lanes_fake, tmp_path, monkeypatch):
    kill_mid_solo_bench(lanes_fake, write_config(tmp_path, lanes_fake), tmp_path)
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))  # the killed bench's own dirs
    monkeypatch.setenv("SPARKCTL_LOCK_DIR", str(tmp_path / "locks"))
    app = make_app(Config(lanes=LANES), engine=OllamaEngine(lanes_fake.url), probes=FakeProbes(spark_snapshot()),
                   recorder=lambda r: None)
    app.animation_level = "none"
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app._residency_warnings and app.screen.query("#warnings"):
                break
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        shown = app.screen.query_one("#warnings").text  # every warning whole, as N shows them
        assert "not put back yet" in shown and "P puts them back" in shown
        assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(tmp_path / "data")  # only shown

        await pilot.press("P")
        for _ in range(200):
            await pilot.pause(0.05)
            if not journals(tmp_path / "data"):
                break
        await app.workers.wait_for_complete()
        messages = [n.message for n in app._notifications]
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b"} and not journals(tmp_path / "data")
    assert any("put back what a bench of llama3.2:3b" in m for m in messages), messages


async def test_a_bench_puts_back_what_a_killed_one_left_before_it_starts(lanes_fake, tmp_path, monkeypatch):
    """What the TUI no longer does at its start, a bench started from it does first: it never
    benches beside (nor later "restores" to) a dead bench's leftovers."""
    kill_mid_solo_bench(lanes_fake, write_config(tmp_path, lanes_fake), tmp_path)
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SPARKCTL_LOCK_DIR", str(tmp_path / "locks"))
    cfg = Config(lanes=LANES, lane_keep_alive={"fast": "30m"})
    said: list[str] = []
    _runner, (run,) = await bench(lanes_fake, cfg, ["llama3.2:3b"],
                                  settings(cfg, num_predict=5),
                                  sink=lambda ev: said.append(ev.text) if isinstance(ev, Notice) else None)
    assert run.status == "FINISHED"
    assert any("put back what a bench of llama3.2:3b" in s for s in said), said
    after = ps(lanes_fake)
    assert set(after) == {"qwen3:8b", "qwen3:4b"}  # the lanes as they were before either bench
    assert after["qwen3:8b"][0] == 32768 and after["qwen3:8b"][1] > FOREVER_AFTER_S
    assert not journals(tmp_path / "data")
