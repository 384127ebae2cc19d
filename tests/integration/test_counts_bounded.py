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
    # a context past a 64-bit integer: Ollama's 400 came after the run had started
    (["bench", "qwen3:8b", "--ctx", "9223372036854775808"],
     "--ctx must be at most 9223372036854775807, got 9223372036854775808"),
    (["bench", "qwen3:8b", "--ctx", "1" + "0" * 30], "--ctx must be at most 9223372036854775807, got a 31-digit number"),
    (["eval", "qwen3:8b", "--suite", "gsm8k", "--ctx", "1" + "0" * 30],
     "--ctx must be at most 9223372036854775807, not a 31-digit number"),
    # a per-host limit that would hang the fleet table for good
    (["fleet", "spark-01", "--timeout", "1e9"], "--timeout must be a number of seconds > 0 and at most 3600, got 1e+09"),
    (["fleet", "spark-01", "--timeout", "-1"], "--timeout must be a number of seconds > 0 and at most 3600, got -1"),
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


def test_a_fit_context_past_64_bits_is_a_usage_error(run, capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse's own usage error
        run("fit", "qwen3:8b", "--ctx", "1" + "0" * 30)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.splitlines()[-1].endswith(
        "argument --ctx: expected a context of at most 9223372036854775807 tokens, got a 31-digit number"), err


def test_a_bench_context_past_the_model_s_trained_one_is_refused_before_any_load(serve, tmp_path, capsys):
    """Review of issue 31: `--ctx` past the model's trained context was benched; Ollama runs
    such a model at its trained context, so the run recorded a context it never had. The
    FAKE Ollama's qwen3:8b says 40960 in /api/show, as Ollama's does."""
    from testkit.fakes.ollama_server import bench_scenario

    server = serve(bench_scenario(tokens_per_s=None))
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{server.url}"\n[tracking]\nuri = "{(tmp_path / "m.db").as_uri()}"\n')
    code = cli.main(["--config", str(config), "bench", "qwen3:8b", "--ctx", "65536"])
    out, err = capsys.readouterr()
    assert code == 4 and "Traceback" not in err
    assert "refused: num_ctx 65536 is more than qwen3:8b's trained context (40960 tokens): the engine would run " \
           "it at 40960; ask for 40960 or less (--ctx)" in err, err
    assert not [c for c in server.calls("/api/generate") if c.body.get("prompt")]  # nothing measured
    assert "qwen3:8b" not in server.state.resident  # nor loaded
