"""`sparkctl models|pull|fit|load|unload|rm` against the FAKE Ollama: exit codes, one-line
errors, JSON keys. In-process through `sparkctl.cli.main` (host probes replaced by a
Spark-like FakeProbes), plus one real subprocess to prove a piped pull stays quiet."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkctl import cli
from sparkctl.core.snapshots import GIB
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.model_scenarios import LANES_TOML, SPARK_ENGINE_KEYS, spark_state
from testkit.fakes.ollama_server import FakeOllama, pull_scenario

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake(spark_fake: FakeOllama) -> FakeOllama:
    return spark_fake  # the Spark-like fake Ollama shared by the models tests (tests/conftest.py)


@pytest.fixture
def host(monkeypatch) -> dict:
    """The probes the CLI builds: a Spark with 61 GiB available and NVML agreeing."""
    box = {"probes": FakeProbes(spark_snapshot(61.0, runner_gib=78.5))}
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: box["probes"])
    for var in ("OLLAMA_HOST", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS",
                "OLLAMA_MODELS"):
        monkeypatch.delenv(var, raising=False)
    return box


@pytest.fixture
def run(fake, host, tmp_path, capsys):
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{fake.url}"\n' + SPARK_ENGINE_KEYS + LANES_TOML)

    def go(*argv: str) -> tuple[int, str, str]:
        code = cli.main(["--config", str(config), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    go.config = config
    return go


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---------------------------------------------------------------------------- models


def test_models_table_and_json(run):
    code, out, _ = run("models")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "SIZE", "FAMILY"]
    prod = next(line for line in lines if line.startswith("gpt-oss:120b"))
    assert "production" in prod and "100% GPU, 68.0 GiB" in prod and "131072" in prod and "MXFP4" in prod
    assert "thinking,tools" in next(line for line in lines if line.startswith("qwen3:8b"))

    code, out, _ = run("models", "--json")
    data = json.loads(out)
    assert code == 0 and set(data) == {"engine_version", "models", "missing_lanes"}
    row = data["models"][0]
    assert {"name", "size", "family", "parameter_size", "quantization", "context_length", "capabilities",
            "modified_at", "lane", "loaded", "placement"} <= set(row)


def test_models_when_the_engine_is_down_exits_3(run, fake):
    fake.down()
    code, out, err = run("models")
    assert code == 3 and out == ""
    assert one_line(err).startswith("sparkctl: engine unreachable: cannot connect to Ollama")
    # the line says where the URL came from, which is where the fix usually is
    assert one_line(err).endswith(f"; the URL is [engine] host in {run.config}")


def test_engine_down_names_ollama_host_or_the_default(fake, host, tmp_path, capsys, monkeypatch):
    fake.down()
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    monkeypatch.delenv("SPARKCTL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./sparkctl.toml
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert cli.main(["models"]) == 3
    assert one_line(capsys.readouterr().err).endswith("; the URL is from $OLLAMA_HOST")
    # with neither (not run: a Spark running these tests has an Ollama on the default port)
    from argparse import Namespace

    from sparkctl.config import parse_config

    assert cli._engine_origin(parse_config("", env={}), Namespace()) == (
        "; that is the default URL: set $OLLAMA_HOST or [engine] host if Ollama listens elsewhere")
    assert cli._engine_origin(parse_config("", env={}), Namespace(engine_url="http://x:1")) == ""


# ---------------------------------------------------------------------------- pull


def test_pull_piped_is_quiet_and_json_has_the_progress(run, fake):
    fake.state = pull_scenario()
    code, out, err = run("pull", "qwen3:8b")
    assert code == 0 and err == ""
    assert one_line(out).startswith("pulled qwen3:8b (4.9 GiB, 1.7 KiB already on disk) in ")
    code, out, _ = run("pull", "nototals", "--json")
    data = json.loads(out)
    assert code == 0 and data["outcome"] == "success" and data["sizes_unknown"] is True
    assert {"model", "outcome", "error", "engine_version", "status_log", "layers", "total", "completed",
            "percent", "disk"} <= set(data)


@pytest.mark.parametrize(
    ("name", "code", "text"),
    [
        ("future", 5, "future requires a newer version of Ollama than this engine (Ollama 0.12.6"),
        ("nosuchmodel", 5, "pull model manifest: file does not exist (Ollama 0.12.6"),
        ("broken", 5, "max retries exceeded: unexpected EOF (Ollama 0.12.6"),
    ],
)
def test_pull_failures_are_one_line_naming_the_version(run, fake, name, code, text):
    fake.state = pull_scenario()
    got, out, err = run("pull", name)
    assert got == code and out == ""
    assert text in one_line(err)


def test_pull_refuses_when_the_disk_is_too_small(host, monkeypatch, tmp_path, capsys):
    # The disk checked is where the server keeps models (its own OLLAMA_MODELS): the FAKE
    # Ollama runs as a process of its own, named ollama, with that variable in its environment.
    from testkit.fakes.ollama_process import spawn

    store = tmp_path / "models"
    store.mkdir()
    checked: list[str] = []
    monkeypatch.setattr("sparkctl.services.models.pull._disk_free", lambda path: checked.append(path) or 1 * GIB)
    with spawn(tmp_path, {"OLLAMA_MODELS": str(store)}, scenario="pull") as server:
        config = tmp_path / "pull.toml"
        config.write_text(f'[engine]\nhost = "{server.url}"\n')
        code = cli.main(["--config", str(config), "pull", "qwen3:8b"])
        err = capsys.readouterr().err
    assert code == 4 and "not enough disk space to pull qwen3:8b" in one_line(err)
    assert checked and set(checked) == {str(store)}


def test_pull_unreachable_exits_3(run, fake):
    fake.down()
    code, _, err = run("pull", "qwen3:8b")
    assert code == 3 and "cannot connect to Ollama" in one_line(err)


def test_pull_on_a_terminal_draws_progress(fake):
    import asyncio

    from sparkctl.cli.models_cmd import PullPrinter
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.services.models import ModelStore, pull_model

    fake.state = pull_scenario()
    out = io.StringIO()
    printer = PullPrinter(out, tty=True, min_interval_s=0.0)

    async def go():
        async with OllamaEngine(fake.url) as engine:
            async for view in pull_model(engine, "qwen3:8b", store=ModelStore(None, "test")):
                printer.update(view, 0.0)

    asyncio.run(go())
    text = out.getvalue()
    assert "pulling manifest\n" in text and "verifying sha256 digest\n" in text
    assert "already present" in text and "\r\x1b[2K" in text and "qwen3:8b   25.0%" in text


def test_piped_pull_in_a_subprocess_prints_only_the_summary(fake, tmp_path):
    fake.state = pull_scenario()
    config = tmp_path / "c.toml"
    config.write_text(f'[engine]\nhost = "{fake.url}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    proc = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "pull", "qwen3:8b"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("pulled qwen3:8b") and "\r" not in proc.stdout


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("argv", [
    ("pull", "bad name"), ("fit", "a//b"), ("load", "-x"), ("unload", "Ünicode"), ("rm", "model:"),
])
def test_bad_names_exit_2_before_any_request(run, fake, argv):
    code, out, err = run(*argv) if not argv[1].startswith("-") else run(argv[0], "--", argv[1])
    assert code == 2 and out == ""
    line = one_line(err)
    assert line.startswith("sparkctl: invalid model name") and repr(argv[1]) in line
    assert fake.requests == []


def test_bad_options_exit_2(run, capsys):
    with pytest.raises(SystemExit) as e:
        run("fit", "qwen3:8b", "--ctx", "0")
    assert e.value.code == 2 and "--ctx" in one_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as e:
        run("load", "qwen3:8b", "--keep-alive", "soon")
    assert e.value.code == 2 and "--keep-alive" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------------------- fit


def test_fit_fits(run):
    code, out, _ = run("fit", "qwen3:8b")
    assert code == 0
    assert out.startswith("qwen3:8b: fits: needs 12.0 GiB of 53.0 GiB available above the 8.0 GiB reserve")
    # the FAKE's 262144, as the config states it (it cannot be read from an in-process fake)
    assert "num_ctx 40960: the engine's choice: 262144 ([engine] in " in out
    assert "capped at the model's trained context 40960" in out
    assert "weights 4.9 GiB + KV cache 5.6 GiB + overhead 1.5 GiB" in out


def test_fit_on_a_current_ollama_without_a_statement_takes_its_default_by_memory(fake, host, tmp_path, capsys):
    """Ollama >= 0.15.5 defaults to 262144 on a box with >= 47 GiB of GPU memory; an older
    one (the FAKE's own 0.12.6) to 4096. The server cannot be read here, so the fit says which
    default it assumed, for which version."""
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{fake.url}"\n' + LANES_TOML)
    fake.state.version = "0.17.0"
    assert cli.main(["--config", str(config), "fit", "qwen3:8b"]) == 0
    out = capsys.readouterr().out
    assert "num_ctx 40960: the engine's choice: Ollama's default for 121.0 GiB of GPU memory is 262144" in out
    assert "assumed    Ollama 0.17.0's defaults: context_length by GPU memory, num_parallel 1" in out
    fake.state.version = "0.12.6"
    assert cli.main(["--config", str(config), "fit", "qwen3:8b"]) == 0
    out = capsys.readouterr().out
    assert "num_ctx 4096: the engine's choice: 4096 (assumed: Ollama 0.12.6's default)" in out


def test_fit_needing_production_evicted_or_not_fitting_exits_4(run, host):
    host["probes"] = FakeProbes(spark_snapshot(20.0))
    code, out, _ = run("fit", "qwen3:30b-a3b")
    assert code == 4 and "fits only by evicting gpt-oss:120b (lane production)" in out
    assert "would be refused" in out
    code, out, _ = run("fit", "deepseek-r1:671b", "--json")
    data = json.loads(out)
    assert code == 4 and data["verdict"]["kind"] == "does not fit"
    assert {"model", "estimate", "verdict", "budget", "context", "resident"} <= set(data)
    assert {"total", "weights", "kv_cache", "overhead", "num_ctx", "context_source"} <= set(data["estimate"])


def test_fit_with_ctx(run):
    code, out, _ = run("fit", "qwen3:8b", "--ctx", "8192", "--json")
    data = json.loads(out)
    assert code == 0 and data["estimate"]["num_ctx"] == 8192 and data["estimate"]["context_source"] == "user"


def test_fit_of_a_model_not_stored_asks_the_registry(run):
    # Not stored locally: the fit is read from the registry, which is unreachable here
    # (tests/conftest.py points SPARKCTL_REGISTRY at a closed port); the fake registry's
    # own tests are in test_remote_fit.py.
    code, _, err = run("fit", "mistral")
    assert code == 3 and one_line(err).startswith(
        "sparkctl: mistral: fit unknown until downloaded: cannot reach the registry at http://127.0.0.1:9/")


# ---------------------------------------------------------------------------- load


def test_load_beside_production(run, fake):
    code, out, err = run("load", "qwen3:8b", "--keep-alive", "30m")
    assert code == 0 and err == ""
    assert "loaded qwen3:8b in" in out and "keep_alive 30m" in out
    assert "qwen3:8b is 100% on the GPU" in out and "gpt-oss:120b (lane production) still resident" in out
    resident = fake.state.resident["qwen3:8b"].size / GIB  # what /api/ps reports, buffers included
    assert f"estimate 12.0 GiB vs resident {resident:.1f} GiB: +" in out and "(over-estimate)" in out
    assert fake.calls("/api/generate")[-1].body["keep_alive"] == 1800  # sent as seconds


def test_load_json_keys(run):
    code, out, _ = run("load", "qwen3:8b", "--ctx", "8192", "--json")
    data = json.loads(out)
    assert code == 0
    assert {"model", "loaded", "ok", "forced", "refused", "keep_alive", "num_ctx", "fit", "verification"} <= set(data)
    v = data["verification"]
    assert {"placement", "cpu_spill", "evicted_lanes", "nvml", "estimate_bytes", "resident_bytes",
            "estimate_error_pct", "problems"} <= set(v)


def test_load_with_cpu_spill_exits_4_loudly(run, fake):
    fake.state = spark_state(spill=True)
    code, out, err = run("load", "qwen3:8b")
    assert code == 4
    assert "!! CPU SPILL: qwen3:8b runs 30%/70% CPU/GPU" in out
    assert one_line(err).startswith("sparkctl: qwen3:8b loaded but failed verification: CPU SPILL")


def test_load_that_evicts_production_exits_4_loudly(run, fake, host):
    fake.state = spark_state(evict="gpt-oss:120b")
    host["probes"] = FakeProbes(spark_snapshot(61.0, runner_gib=10.5))
    code, out, err = run("load", "qwen3:8b")
    assert code == 4
    assert "!! EVICTED: gpt-oss:120b (lane production) is no longer resident" in out
    assert "EVICTED" in one_line(err)


def test_load_out_of_memory_exits_5(run, fake):
    fake.state = spark_state(out_of_memory=True)
    code, _, err = run("load", "qwen3:8b")
    assert code == 5
    assert one_line(err) == ("sparkctl: engine error: model requires more system memory (70.3 GiB) "
                             "than is available (45.1 GiB)")


def test_load_refused_by_the_guard_then_forced(run, fake, host):
    host["probes"] = FakeProbes(spark_snapshot(20.0, runner_gib=88))
    code, out, err = run("load", "qwen3:30b-a3b")
    assert code == 4
    assert one_line(err).startswith("sparkctl: refused: qwen3:30b-a3b fits only by evicting gpt-oss:120b (lane production)")
    assert err.strip().endswith("(--force to load anyway)")
    assert fake.calls("/api/generate") == []
    code, out, _ = run("load", "qwen3:30b-a3b", "--force", "--json")
    data = json.loads(out)
    assert code == 0 and data["forced"] and data["overridden"].startswith("qwen3:30b-a3b fits only by evicting")


# ---------------------------------------------------------------------------- unload / rm


def test_unload_waits_and_reports(run, fake):
    fake.state.add_resident("qwen3:8b", expires_in_s=600)
    fake.state.unload_delay_s = 0.2
    code, out, _ = run("unload", "qwen3:8b", "--json")
    data = json.loads(out)
    assert code == 0 and data["was_loaded"] and data["waited_s"] >= 0.15
    code, out, _ = run("unload", "qwen3:8b")
    assert code == 0 and out.strip() == "qwen3:8b was not loaded"


def test_rm_guards(run, fake, monkeypatch):
    code, _, err = run("rm", "gpt-oss:120b", "--yes")
    assert code == 4 and "serves lane production" in one_line(err) and fake.requests == []
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = run("rm", "qwen3:8b")
    assert code == 4 and "needs confirmation; pass --yes" in one_line(err)
    code, out, _ = run("rm", "qwen3:8b", "--yes", "--json")
    assert code == 0 and json.loads(out)["deleted"] is True
    code, _, err = run("rm", "qwen3:8b", "--yes")
    assert code == 5 and "not found" in one_line(err)
    code, out, _ = run("rm", "gpt-oss:120b", "--force", "--yes")
    assert code == 0 and out.strip() == "deleted gpt-oss:120b (lane production) (60.9 GiB) (unloaded it first)"


def test_rm_asks_on_a_terminal(run, fake, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Tty("n\n"))
    code, out, err = run("rm", "qwen3:8b")
    assert code == 4 and "Delete qwen3:8b (4.9 GiB) from the engine's store? [y/N]" in out
    assert fake.calls("/api/delete") == []
    monkeypatch.setattr(sys, "stdin", Tty("y\n"))
    code, out, _ = run("rm", "qwen3:8b")
    assert code == 0 and "deleted qwen3:8b" in out


# ---------------------------------------------------------------------------- did you mean


def test_mistyped_names_suggest_a_close_local_one(run, fake):
    code, _, err = run("fit", "qwen3:8")  # not stored: the registry (unreachable here), then the hint
    assert code == 3 and one_line(err).endswith("; did you mean qwen3:8b or qwen3:30b-a3b?")
    code, _, err = run("load", "qwen3:8")
    assert code == 5 and "did you mean qwen3:8b" in one_line(err) and fake.calls("/api/generate") == []
    code, _, err = run("rm", "llama3.2", "--yes")
    assert code == 5 and one_line(err).endswith("not found; did you mean llama3.2:3b?")
    code, out, _ = run("unload", "gpt-oss:12b")
    assert code == 0 and out.strip() == "gpt-oss:12b was not loaded (did you mean gpt-oss:120b?)"
    code, _, err = run("rm", "mistral", "--yes")  # nothing close: the engine's words alone
    assert one_line(err) == "sparkctl: engine error: model 'mistral' not found"


def test_a_stray_space_is_bad_input_with_the_obvious_reading(run, fake):
    code, out, err = run("load", "qwen3:8 b")
    assert code == 2 and out == "" and fake.requests == []
    assert one_line(err).startswith("sparkctl: invalid model name") and one_line(err).endswith("did you mean qwen3:8b?")


def test_pull_of_an_unknown_name_suggests_a_local_one(run, fake):
    code, _, err = run("pull", "qwen3:8", "--json")
    assert code == 5 and one_line(err).endswith("did you mean qwen3:8b or qwen3:30b-a3b?")


def test_fit_says_when_force_cannot_help(run, host):
    host["probes"] = FakeProbes(spark_snapshot(20.0))
    code, out, _ = run("fit", "deepseek-r1:671b")
    assert code == 4 and "--force cannot help" in out and "no override can load it" in out
    code, out, _ = run("fit", "qwen3:30b-a3b")
    assert code == 4 and "(sparkctl load --force overrides)" in out
    code, _, err = run("load", "deepseek-r1:671b")
    assert code == 4 and "no override can load it" in one_line(err) and "--force to load anyway" not in err


def test_models_table_shows_small_models_in_mib(run, fake):
    from testkit.fakes.ollama_server import make_model

    fake.state.add_model(make_model("tiny:1m", size_gib=1_000_000 / GIB))
    code, out, _ = run("models")
    line = next(x for x in out.splitlines() if x.startswith("tiny:1m"))
    assert code == 0 and "976.6 KiB" in line and "0.0 GiB" not in line
