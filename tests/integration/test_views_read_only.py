"""Views only read (issue 28, point 5): the fleet, `sparkctl status` and the TUI's screens
leave a killed bench's models as they are and show the repair that is pending; the repair
is started by the user (`P` in the TUI, any local command that may act, `sparkctl lanes
--restore`) or by a bench, sweep, eval, promotion, rollback or a Models screen load/unload
before it looks at what is resident.

The bench is a REAL `sparkctl bench --solo` killed with SIGKILL mid-stream (its residency
journal stays behind, its owner dead); the fleet runs over REAL ssh (Debian's sshd on
loopback, tests/integration/sshd.py); the Ollama is a FAKE (testkit/fakes/ollama_server.py:
Ollama's wire format over real HTTP, runners' sessions kept as server/sched.go keeps them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sparkctl.config import Config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import Notice
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.lanes import (  # noqa: F401
    FOREVER_AFTER_S, lanes_fake, ps, write_config,
)
from tests.integration.sshd import SshLab, lab  # noqa: F401
from testkit.tracking import mlflow_store, mlflow_template_db  # noqa: F401
from tests.integration.test_bench_lanes import bench, settings
from tests.integration.test_bench_recovery import kill_mid_solo_bench, sparkctl
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

    # `status` on that host only reads too, the flag or not (views only read)
    local = subprocess.run([str(script), "status", "--json"], capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "put back" not in local.stderr, local.stderr
    assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(host_dir / "data")
    # a local command that may act repairs, as before
    local = subprocess.run([str(script), "lanes"], capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "put back what a bench of llama3.2:3b" in local.stderr, local.stderr
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b"} and not journals(host_dir / "data")


def test_status_only_reads_and_names_the_repair(lanes_fake, tmp_path):
    """Review of issue 28: DESIGN's "views only read" names `status`, which still repaired unless
    given --no-repair. It now never does: the pending repair is a warning naming the command
    that does it; --no-repair is still accepted (fleets of mixed versions send it)."""
    cfg = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg, tmp_path)
    text = sparkctl(cfg, tmp_path, "status")
    assert text.returncode == 0, text.stderr
    assert "put back" not in text.stderr
    warning = next(line for line in text.stdout.splitlines() if "a bench of llama3.2:3b" in line)
    assert warning.strip().startswith("WARNING: ") and warning.endswith("not put back yet (`sparkctl lanes --restore`)")
    as_json = sparkctl(cfg, tmp_path, "status", "--json")
    assert as_json.returncode == 0 and "put back" not in as_json.stderr
    assert any("not put back yet (`sparkctl lanes --restore`)" in w for w in json.loads(as_json.stdout)["warnings"])
    assert sparkctl(cfg, tmp_path, "status", "--json", "--no-repair").returncode == 0
    assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(tmp_path / "data")  # only shown, three times

    restore = sparkctl(cfg, tmp_path, "lanes", "--restore")
    assert restore.returncode == 0 and "put back what a bench of llama3.2:3b" in restore.stdout
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b"} and not journals(tmp_path / "data")


def test_the_fleet_command_leaves_this_hosts_dead_bench_as_it_found_it(lanes_fake, tmp_path):
    """DESIGN's "views only read" names the fleet: `sparkctl fleet` on a host with a killed
    bench's journal used to put that host's models back before it looked at anything. With no
    host configured it has nothing to read, and still must not touch this one."""
    cfg = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg, tmp_path)
    looked = sparkctl(cfg, tmp_path, "fleet", "--json")
    assert "put back" not in looked.stderr and "put back" not in looked.stdout
    assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(tmp_path / "data")


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


# ------------------------------------------- acting from the TUI beside a dead bench's models


def tui_config(cfg_path: Path, tmp_path: Path, monkeypatch) -> Config:
    """The config the TUI would run with (the user's file, sparkctl's own state file over it),
    in the killed bench's own data and lock folders."""
    from sparkctl.config import load_config

    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SPARKCTL_LOCK_DIR", str(tmp_path / "locks"))
    return load_config(str(cfg_path))


def lanes_after(cfg_path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    out = sparkctl(cfg_path, tmp_path, "lanes", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    return out


async def test_a_promotion_made_in_the_tui_beside_a_dead_bench_is_not_undone_by_the_next_command(
        lanes_fake, tmp_path, monkeypatch, mlflow_store):  # noqa: F811
    """Review of issue 28: with a dead bench's repair pending (the TUI only shows it), a promotion
    from the PromoteDialog went through, and the next `sparkctl lanes` "restored qwen3:4b
    (lane fast); unloaded llama3.2:3b": the new lane model gone, the retired one back. The
    switch now puts back what the dead bench left first (so its plan, made beside the
    leftovers, is made again), and what it switches stays switched."""
    from sparkctl.services.lanes import execute, plan_promotion

    cfg_path = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg_path, tmp_path)
    cfg = tui_config(cfg_path, tmp_path, monkeypatch)
    engine, probes = OllamaEngine(lanes_fake.url), FakeProbes(spark_snapshot())
    try:
        # what the PromoteDialog runs (plan), then what its Force button runs (apply_switch);
        # told to check it again, the user opens the dialog again
        outcomes = []
        for _ in range(2):
            plan = await plan_promotion(cfg, engine, probes, mlflow_store, "fast", "llama3.2:3b")
            outcomes.append(await execute(cfg, engine, probes, plan, force=True))
            if outcomes[-1].changed or "check it again" not in outcomes[-1].error:
                break
    finally:
        await engine.close()
    assert outcomes[-1].changed, outcomes[-1].lines()

    after = lanes_after(cfg_path, tmp_path)
    assert "put back" not in after.stderr and "unloaded" not in after.stderr, after.stderr
    lanes = {row["lane"]: row for row in json.loads(after.stdout)}
    assert lanes["fast"]["model"] == "llama3.2:3b"
    assert "llama3.2:3b" in ps(lanes_fake)  # the new lane model stays; nothing was put back over it
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b", "llama3.2:3b"} and not journals(tmp_path / "data")
    # how: the first switch put back what the dead bench left, and said its plan was stale
    first = outcomes[0]
    assert len(outcomes) == 2 and not first.changed and "check it again" in first.error
    assert any("put back what a bench of llama3.2:3b" in r for r in first.repaired), first.repaired


def test_a_lane_changed_after_a_bench_died_is_not_undone_by_its_repair(lanes_fake, tmp_path):
    """Review of issue 28: the repair of a dead bench ignored a lane changed since the bench
    began (here the user's own edit of [lanes]; a promotion by a sparkctl that did not repair
    first is the same): it loaded back the model the lane no longer names and unloaded the
    one it names now."""
    cfg_path = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg_path, tmp_path)
    cfg_path.write_text(cfg_path.read_text().replace('fast = "qwen3:4b"\n', 'fast = "llama3.2:3b"\n', 1))
    assert 'fast = "llama3.2:3b"' in cfg_path.read_text()

    out = sparkctl(cfg_path, tmp_path, "lanes")
    assert out.returncode == 0, out.stderr
    assert "put back what a bench of llama3.2:3b" in out.stderr
    assert "qwen3:4b: not put back, lane fast no longer serves it (changed since the bench began)" in out.stderr
    assert "llama3.2:3b: left loaded, lane fast serves it now (changed since the bench began)" in out.stderr
    after = ps(lanes_fake)
    assert set(after) == {"qwen3:8b", "llama3.2:3b"}  # production put back; fast's new model left loaded
    assert after["qwen3:8b"][0] == 32768 and after["qwen3:8b"][1] > FOREVER_AFTER_S
    assert not journals(tmp_path / "data")


async def test_a_model_loaded_from_the_models_screen_beside_a_dead_bench_stays_loaded(
        lanes_fake, tmp_path, monkeypatch):
    """Review of issue 28: the Models screen loaded beside a dead bench's leftovers without
    repairing first; the next command's repair then unloaded what the user had just loaded
    (the dead bench had loaded it too). The load now puts back what the bench left first."""
    from tests.tui.models_helpers import open_models, select, settle, through_dialog

    cfg_path = write_config(tmp_path, lanes_fake)
    kill_mid_solo_bench(lanes_fake, cfg_path, tmp_path)
    app = make_app(tui_config(cfg_path, tmp_path, monkeypatch), engine=OllamaEngine(lanes_fake.url),
                   probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
    app.animation_level = "none"
    async with app.run_test(size=(140, 45)) as pilot:
        screen = await open_models(app, pilot)
        assert set(ps(lanes_fake)) == LEFT_BY_THE_DEAD_BENCH and journals(tmp_path / "data")  # opening only reads
        select(screen, "llama3.2:3b")
        await through_dialog(app, pilot, "l")
        for _ in range(100):
            await settle(app, pilot)
            if screen.last_load is not None:
                break
        assert screen.last_load is not None and screen.last_load.verification.resident is not None
        messages = [n.message for n in app._notifications]

    after = lanes_after(cfg_path, tmp_path)
    assert "put back" not in after.stderr and "unloaded" not in after.stderr, after.stderr
    assert "llama3.2:3b" in ps(lanes_fake)
    assert set(ps(lanes_fake)) == {"qwen3:8b", "qwen3:4b", "llama3.2:3b"} and not journals(tmp_path / "data")
    assert any("put back what a bench of llama3.2:3b" in m for m in messages), messages
