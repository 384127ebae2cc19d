"""Counts have a documented maximum (sparkctl/core/limits.py, docs/bench.md): a bench that
keeps every repetition in memory and re-journals its run after each one must not be asked
for 10**20 of them (that took all of a box's memory once). The engine here is a closed
port: a count that got past the checks would end in "engine unreachable" (exit 3)."""

from __future__ import annotations

import pytest

from sparkctl import cli


@pytest.fixture
def run(tmp_path, capsys):
    config = tmp_path / "sparkctl.toml"
    config.write_text('[engine]\nhost = "http://127.0.0.1:9"\n')

    def go(*argv: str, toml: str = "") -> tuple[int, str, str]:
        if toml:
            config.write_text('[engine]\nhost = "http://127.0.0.1:9"\n' + toml)
        code = cli.main(["--config", str(config), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return go


@pytest.mark.parametrize("argv, message", [
    (["bench", "qwen3:8b", "--reps", "99999999999999999999"],
     "--reps must be at most 1000, got 99999999999999999999"),
    (["bench", "qwen3:8b", "--reps", "1" + "0" * 40], "--reps must be at most 1000, got a 41-digit number"),
    (["bench", "qwen3:8b", "--warmup", "100000000"], "--warmup must be at most 100, got 100000000"),
    (["bench", "qwen3:8b", "llama3.2:3b", "--until-resolved", "--max-reps", "100000000"],
     "--max-reps must be at most 1000, got 100000000"),
    (["eval", "qwen3:8b", "--suite", "gsm8k", "--concurrency", "100000000"], "--concurrency must be at most 64, not 100000000"),
])
def test_a_count_past_its_maximum_is_refused_before_anything_runs(run, argv, message):
    code, out, err = run(*argv)
    assert code == 2 and err == f"sparkctl: {message}\n" and out == ""


@pytest.mark.parametrize("toml, message", [
    ("[bench]\nreps = 100000000\n", "[bench] reps: expected an integer from 1 up to 1000, got 100000000"),
    ("[bench]\nwarmup = 101\n", "[bench] warmup: expected an integer from 0 up to 100, got 101"),
    ("[eval]\nconcurrency = 65\n", "[eval] concurrency: expected an integer from 1 up to 64, got 65"),
])
def test_a_config_count_past_its_maximum_is_refused(run, toml, message, tmp_path):
    code, _, err = run("bench", "qwen3:8b", toml=toml)
    assert code == 2 and err.startswith(f"sparkctl: {tmp_path / 'sparkctl.toml'}:") and message in err
    assert err.count("\n") == 1


def test_the_maximum_itself_is_accepted(run):
    # 1000 repetitions get past the checks: this ends at the closed engine port
    code, _, err = run("bench", "qwen3:8b", "--reps", "1000", "--warmup", "100")
    assert code == 3 and "at most" not in err
