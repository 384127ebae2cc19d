"""The fit reads the Ollama server's own settings, never sparkctl's shell (issue 28, point 3).

The server is a FAKE Ollama (testkit/fakes/ollama_server.py) in a REAL process of its own
(testkit/fakes/ollama_process.py: named `ollama`, listening on loopback, its environment its
own). The systemd unit is a FAKE `systemctl` on PATH (systemd cannot run here), printing
`systemctl show`'s Key=Value lines; the permission it stands in for is real: the server
process is made non-dumpable and sparkctl runs without CAP_SYS_PTRACE, so its environment
and its sockets are closed to sparkctl as a Spark's `ollama` service is to its users."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkctl import cli
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_process import spawn

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch):
    """sparkctl's own shell has none of the server's settings."""
    for var in list(os.environ):
        if var.startswith("OLLAMA_"):
            monkeypatch.delenv(var)
    probes = FakeProbes(spark_snapshot(61.0, runner_gib=78.5))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: probes)


def fit_json(tmp_path: Path, url: str, capsys) -> dict:
    config = tmp_path / "fit.toml"
    config.write_text(f'[engine]\nhost = "{url}"\n')
    code = cli.main(["--config", str(config), "fit", "qwen3:8b", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_a_fit_counts_the_slots_the_servers_own_environment_sets(tmp_path, clean_env, capsys):
    with spawn(tmp_path, {"OLLAMA_NUM_PARALLEL": "4"}) as four, spawn(tmp_path, {}) as one:
        assert "OLLAMA_NUM_PARALLEL" not in os.environ
        with_four, with_one = fit_json(tmp_path, four.url, capsys), fit_json(tmp_path, one.url, capsys)
        config = tmp_path / "fit.toml"
        config.write_text(f'[engine]\nhost = "{four.url}"\n')
        assert cli.main(["--config", str(config), "fit", "qwen3:8b"]) == 0
        text = capsys.readouterr().out

    # the KV cache holds four slots of the same context: four times one slot's
    assert with_four["estimate"]["num_ctx"] == with_one["estimate"]["num_ctx"]
    assert with_four["estimate"]["kv_cache"] == 4 * with_one["estimate"]["kv_cache"]
    slots = with_four["engine_settings"]["num_parallel"]
    assert slots == {"value": 4, "read": True,
                     "source": f"OLLAMA_NUM_PARALLEL=4 in the server's environment (PID {four.pid})"}
    assert with_one["engine_settings"]["num_parallel"]["value"] == 1  # unset there: Ollama's 1
    assert f"x4 parallel slots (OLLAMA_NUM_PARALLEL=4 in the server's environment (PID {four.pid}))" in text
    assert f"server     settings read from the server's environment (PID {four.pid})" in text
    assert "assumed" not in text  # everything came from the server


def test_a_quantised_cache_without_flash_attention_is_said_to_count_as_f16(tmp_path, clean_env, capsys):
    """Review of issue 28: the settings said `kv_cache_type q8_0` and `flash_attention off` while
    the estimate counted f16 (rightly: Ollama quantizes the KV cache only with flash
    attention), and nothing said so."""
    with spawn(tmp_path, {"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "0"}) as off, \
            spawn(tmp_path, {}) as plain:
        without_fa, f16 = fit_json(tmp_path, off.url, capsys), fit_json(tmp_path, plain.url, capsys)
        config = tmp_path / "fit.toml"
        config.write_text(f'[engine]\nhost = "{off.url}"\n')
        assert cli.main(["--config", str(config), "fit", "qwen3:8b"]) == 0
        text = capsys.readouterr().out

    assert without_fa["engine_settings"]["kv_cache_type"]["value"] == "q8_0"
    assert without_fa["engine_settings"]["flash_attention"]["value"] == "off"
    assert without_fa["estimate"]["kv_cache"] == f16["estimate"]["kv_cache"]  # f16, as the runner will hold it
    context = next(line for line in text.splitlines() if line.startswith("  context "))
    assert ("KV cache f16: q8_0 stated, f16 used: Ollama quantizes the KV cache only with flash attention "
            f"(kv_cache_type from OLLAMA_KV_CACHE_TYPE=q8_0 in the server's environment (PID {off.pid}); "
            f"flash_attention off from OLLAMA_FLASH_ATTENTION=0 in the server's environment (PID {off.pid}))"
            ) in context, context
    assert "KV cache q8_0" not in text


def fake_systemctl(bindir: Path, port: int, pid: int, environment: str, files: str = "") -> None:
    """`systemctl show ollama.service --property=...` as systemd prints it (other units:
    inactive, MainPID=0, as systemctl shows a unit it does not know)."""
    bindir.mkdir(exist_ok=True)
    script = bindir / "systemctl"
    script.write_text(f"""#!/bin/sh
[ "$1" = show ] || exit 1
if [ "$2" = ollama.service ]; then
  printf '%s\\n' 'MainPID={pid}' 'ActiveState=active' 'Environment={environment}' 'EnvironmentFiles={files}'
else
  printf '%s\\n' 'MainPID=0' 'ActiveState=inactive' 'Environment=' 'EnvironmentFiles='
fi
""")
    script.chmod(0o755)


def sparkctl_unprivileged(tmp_path: Path, bindir: Path, *argv: str, module: bool = True) -> subprocess.CompletedProcess:
    """sparkctl as a user who may not read another's process: as root, with every capability
    dropped (no CAP_SYS_PTRACE, no CAP_DAC_*); any other user is that already."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", SPARKCTL_DATA_DIR=str(tmp_path / "data"),
               SPARKCTL_STATE_FILE=str(tmp_path / "state.toml"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    run = [sys.executable, "-m", "sparkctl"] if module else [sys.executable]
    return subprocess.run([*prefix, *run, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)


def test_a_service_whose_process_cannot_be_read_is_read_from_its_unit(tmp_path):
    unit_env = "OLLAMA_NUM_PARALLEL=4 OLLAMA_KV_CACHE_TYPE=q8_0"
    with spawn(tmp_path, {"OLLAMA_NUM_PARALLEL": "4", "OLLAMA_KV_CACHE_TYPE": "q8_0"}, undumpable=True) as server:
        fake_systemctl(tmp_path / "bin", server.port, server.pid,
                       f"OLLAMA_HOST=127.0.0.1:{server.port} {unit_env}")
        config = tmp_path / "fit.toml"
        config.write_text(f'[engine]\nhost = "{server.url}"\n')
        done = sparkctl_unprivileged(tmp_path, tmp_path / "bin", "--config", str(config), "fit", "qwen3:8b",
                                     "--json")
        text = sparkctl_unprivileged(tmp_path, tmp_path / "bin", "--config", str(config), "fit", "qwen3:8b")
        # the same unit on another port is another server: not taken for this one
        fake_systemctl(tmp_path / "bin", server.port, server.pid, f"OLLAMA_HOST=127.0.0.1:1 {unit_env}")
        other = sparkctl_unprivileged(tmp_path, tmp_path / "bin", "--config", str(config), "fit", "qwen3:8b",
                                      "--json")

    assert done.returncode in (0, 4), done.stderr  # 4: this box's real memory may not fit it
    assert "x4 parallel slots" in text.stdout and "KV cache q8_0" in text.stdout
    settings = json.loads(done.stdout)["engine_settings"]
    unit = "ollama.service's Environment= (systemctl show)"
    assert settings["where"] == f"read from {unit}"
    assert settings["num_parallel"] == {"value": 4, "read": True, "source": f"OLLAMA_NUM_PARALLEL=4 in {unit}"}
    assert settings["kv_cache_type"]["value"] == "q8_0" and settings["kv_cache_type"]["read"]
    assert any(f"port {server.port} is not visible to this user" in n for n in settings["notes"])
    assert "x4 parallel slots (OLLAMA_NUM_PARALLEL=4 in ollama.service's Environment=" in text.stdout
    assert "KV cache q8_0 (OLLAMA_KV_CACHE_TYPE=q8_0 in ollama.service's Environment=" in text.stdout

    elsewhere = json.loads(other.stdout)["engine_settings"]
    assert elsewhere["num_parallel"] == {"value": 1, "read": False, "source": "assumed: Ollama 0.12.6's default"}
    assert "ollama.service listens on port 1, not " in " ".join(elsewhere["notes"])


def test_pulls_check_the_disk_where_the_server_keeps_models_not_where_this_shell_says(
        tmp_path, clean_env, monkeypatch):
    """Review of issue 28: pull's disk check took OLLAMA_MODELS from sparkctl's shell. The
    server (its own process and environment) keeps models elsewhere: that is the disk checked,
    read where its other settings are read."""
    from sparkctl.services.models import find_model_store

    served = tmp_path / "served-models"
    served.mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "not-the-servers"))  # this shell's: not the server's
    with spawn(tmp_path, {"OLLAMA_MODELS": str(served)}) as server:
        store = find_model_store(server.url)
    assert store.path == str(served)
    assert store.why == f"from OLLAMA_MODELS in the server's environment (PID {server.pid})"

    # a server without it keeps Ollama's default, whatever this shell says: the shell's is never taken
    with spawn(tmp_path, {}) as plain:
        store = find_model_store(plain.url)
    assert store.path != str(tmp_path / "not-the-servers")
    assert f"OLLAMA_MODELS unset in the server's environment (PID {plain.pid})" in store.why


def test_a_service_whose_process_cannot_be_read_gives_its_model_store_from_its_unit(tmp_path):
    served = tmp_path / "var-models"
    served.mkdir()
    with spawn(tmp_path, {"OLLAMA_MODELS": str(served)}, undumpable=True) as server:
        fake_systemctl(tmp_path / "bin", server.port, server.pid,
                       f"OLLAMA_HOST=127.0.0.1:{server.port} OLLAMA_MODELS={served}")
        done = sparkctl_unprivileged(
            tmp_path, tmp_path / "bin", "-c",
            f"from sparkctl.services.models import find_model_store as f; s = f({server.url!r}); print(s.path); "
            "print(s.why)", module=False)
    assert done.returncode == 0, done.stderr
    path, why = done.stdout.splitlines()
    assert path == str(served)
    assert why == "from OLLAMA_MODELS in ollama.service's Environment= (systemctl show)"
