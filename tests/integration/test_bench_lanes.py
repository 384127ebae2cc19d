"""Lane models come out of a bench as they went in (issue: bench numbers that hold on a real
Ollama, points 2-4). The Ollama here is a FAKE (testkit/fakes/ollama_server.py: Ollama's wire
format over real HTTP; keep_alive parsed by Go's rules, so a bare "-1" string is a 400 as on
the real server; a changed num_ctx reloads the runner; every request resets the expiry)."""

from __future__ import annotations

from dataclasses import replace
import pytest

from sparkctl.config import BenchConfig, Config, ModelsConfig
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.services.bench import BenchRunner, BenchSettings, Notice
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, default_state, oom_message

GIB = 1024**3
LANES = {"production": "qwen3:8b"}
FOREVER_AFTER_S = 100 * 365 * 86400


def lane_state(ctx: int = 32768):
    """qwen3:8b is the production lane model, resident forever at 32768 context."""
    state = default_state()
    state.tokens_per_s = None
    state.add_resident("qwen3:8b", expires_in_s=None, context_length=ctx)
    return state


def settings(cfg: Config, **kw) -> BenchSettings:
    return replace(BenchSettings.from_config(cfg.bench), **{"warmup": 1, "reps": 2, "num_predict": 20,
                                                           "timeout_s": 30.0, "think": False, **kw})


async def bench(server: FakeOllama, cfg: Config, models, s, sink=None):
    engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=1.0)
    try:
        runner = BenchRunner(cfg, engine, FakeProbes(spark_snapshot()), s, sink=sink)
        runs = await runner.run(models)
        return runner, runs
    finally:
        await engine.close()


def resident(server: FakeOllama, name: str):
    """What the fake holds for `name` (context, seconds until expiry) after pruning expired."""
    st = server.state
    with st.lock:
        st.prune()
        r = st.resident.get(name)
        if r is None:
            return None
        import time

        return r.context_length, (r.expires_at_ns - time.time_ns()) / 1e9


async def test_benching_a_resident_lane_model_uses_its_context_and_leaves_it_forever(serve):
    server = serve(lane_state())
    cfg = Config(lanes=LANES)
    runner, (run,) = await bench(server, cfg, ["qwen3:8b"], settings(cfg))
    assert run.num_ctx == 32768 and "resident at that context" in run.ctx_note
    assert not any(r.reload for r in run.reps)
    ctx, left = resident(server, "qwen3:8b:latest") or resident(server, "qwen3:8b")
    assert ctx == 32768
    assert left > FOREVER_AFTER_S  # the bench's 30m keep-alive did not stick
    # it was never changed: its requests carried no keep_alive, so nothing had to be restored
    assert not [c for c in server.calls("/api/generate") if "keep_alive" in c.body]
    assert runner.lane_restore.ok and runner.lane_restore.tag() == "unchanged"


async def test_an_explicit_ctx_reloads_for_the_bench_then_puts_the_lane_model_back(serve):
    server = serve(lane_state())
    cfg = Config(lanes=LANES)
    runner, (run,) = await bench(server, cfg, ["qwen3:8b"], settings(cfg, num_ctx=8192, ctx_explicit=True))
    assert run.num_ctx == 8192 and not run.ctx_note
    ctx, left = resident(server, "qwen3:8b:latest") or resident(server, "qwen3:8b")
    assert ctx == 32768 and left > FOREVER_AFTER_S
    assert "context 32768" in run.lane_restore and run.lane_restore.startswith("restored")


async def test_solo_restores_production_with_the_shipped_keep_alive_default(serve):
    """[models] keep_alive = "-1" (the shipped default) used to be sent as a string: a 400."""
    server = serve(lane_state())
    cfg = Config(lanes=LANES, models=ModelsConfig(keep_alive="-1"))
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"))
    assert run.status == "FINISHED"
    ctx, left = resident(server, "qwen3:8b:latest") or resident(server, "qwen3:8b")
    assert ctx == 32768 and left > FOREVER_AFTER_S
    assert runner.lane_restore.ok


@pytest.mark.parametrize("keep_alive", ["-1", -1, "300", "1h"])
async def test_bench_keep_alive_forms_that_ollama_would_reject_as_strings_work(serve, keep_alive):
    server = serve(lane_state())
    cfg = Config(bench=BenchConfig(keep_alive=keep_alive))
    _, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg))
    assert run.status == "FINISHED" and all(r.error is None for r in run.reps)
    sent = {c.body.get("keep_alive") for c in server.calls("/api/generate")}
    assert all(isinstance(v, (int, float)) for v in sent), sent


async def test_a_restore_that_fails_is_loud_recorded_and_invalidates(serve):
    state = lane_state()
    state.models["qwen3:8b"].load_error = (500, oom_message(int(20 * GIB), int(4 * GIB)))
    server = serve(state)
    cfg = Config(lanes=LANES)
    notices = []
    runner, (run,) = await bench(server, cfg, ["llama3.2:3b"], settings(cfg, mode="solo"),
                                 sink=lambda ev: notices.append(ev.text) if isinstance(ev, Notice) else None)
    assert not runner.lane_restore.ok
    assert any(n.startswith("ERROR: lane model not restored: qwen3:8b") for n in notices)
    assert run.lane_restore.startswith("FAILED")
    assert any(f.startswith("lane restore failed") for f in run.invalid)


def test_cli_exits_4_when_a_lane_model_is_not_restored(serve, tmp_path, monkeypatch, capsys):
    from sparkctl import cli

    state = lane_state()
    state.models["qwen3:8b"].load_error = (500, oom_message(int(20 * GIB), int(4 * GIB)))
    server = serve(state)
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: FakeProbes(spark_snapshot()))
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[lanes]\nproduction = "qwen3:8b"\n'
                      '[tracking]\nuri = "http://127.0.0.1:9"\n'
                      "[bench]\nwarmup = 0\nreps = 1\nnum_predict = 5\n")
    code = cli.main(["--config", str(config), "bench", "--solo", "llama3.2:3b"])
    out, err = capsys.readouterr()
    assert code == 4, err
    assert "ERROR: lane model not restored: qwen3:8b" in err and "Traceback" not in err
    assert "lane restore failed" in out
