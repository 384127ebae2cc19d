"""Proxies (issue 28, point 4): an engine on this machine is never asked through a proxy, as
Go's HTTP client (`ollama ps`) never does; the registry and a suites mirror elsewhere go
through `http(s)_proxy` as the user set it.

The engines are FAKES (testkit/fakes/ollama_server.py, openai_server.py: real HTTP on
loopback); the registry is a FAKE (testkit/fakes/registry_server.py) and so is the proxy
(testkit/fakes/http_proxy.py: a forward proxy that records every request line it gets). A
dead proxy is a closed loopback port (127.0.0.1:9): anything sent to it fails at once."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparkctl import cli
from sparkctl.engines.openai_compat import OpenAICompatEngine
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.http_proxy import ForwardProxy
from testkit.fakes.model_scenarios import SPARK_ENGINE_KEYS
from testkit.fakes.ollama_server import FakeOllama, default_state
from testkit.fakes.openai_server import FakeOpenAI

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
DEAD = "http://127.0.0.1:9"


def proxied(monkeypatch, url: str) -> None:
    """A corporate shell: every proxy variable set, no no_proxy."""
    for var in PROXY_VARS:
        monkeypatch.setenv(var, url)
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def ollama():
    server = FakeOllama(default_state()).start()
    yield server
    server.stop()


def test_status_reaches_a_loopback_ollama_with_a_dead_proxy_in_the_environment(ollama, tmp_path, monkeypatch):
    proxied(monkeypatch, DEAD)
    env = {**os.environ, "OLLAMA_HOST": ollama.url}
    for args in (["status", "--json"], ["status"]):
        done = subprocess.run([sys.executable, "-m", "sparkctl", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "unreachable" not in done.stdout + done.stderr
    assert json.loads(subprocess.run([sys.executable, "-m", "sparkctl", "status", "--json"], capture_output=True,
                                     text=True, env=env, cwd=tmp_path, timeout=60).stdout)["engine"]["reachable"]
    assert ollama.calls("/api/ps")  # it was asked directly


def test_every_ollama_call_and_a_loopback_openai_server_go_direct(ollama, tmp_path, monkeypatch, capsys):
    proxied(monkeypatch, DEAD)
    probes = FakeProbes(spark_snapshot(61.0))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: probes)
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{ollama.url}"\n')
    # the ollama client (tags, show, ps, version), not only the dashboard's light poller
    assert cli.main(["--config", str(config), "fit", "qwen3:8b", "--json"]) == 0, capsys.readouterr()
    assert json.loads(capsys.readouterr().out)["model"] == "qwen3:8b"
    assert cli.main(["--config", str(config), "models", "--json"]) == 0
    capsys.readouterr()

    server = FakeOpenAI().start()
    try:
        import asyncio

        async def ask():
            async with OpenAICompatEngine(server.url) as engine:
                return await engine.tags()

        assert asyncio.run(ask())  # llama-server / vLLM on this machine: no proxy either
    finally:
        server.stop()


def test_a_registry_elsewhere_is_asked_through_the_proxy(spark_fake, registry, smol_gguf, tmp_path, monkeypatch,
                                                         capsys, no_network):
    """The registry's name resolves nowhere here: only the proxy can reach it. The engine on
    loopback, and the registry's storage host on loopback that a blob redirects to, are asked
    directly: the proxy never sees them."""
    registry.state.add_model("library/smollm2:135m", gguf=smol_gguf,
                             config={"model_family": "llama", "model_type": "134.52M", "file_type": "Q4_1"})
    probes = FakeProbes(spark_snapshot(61.0, runner_gib=78.5))
    monkeypatch.setattr("sparkctl.services.factory.make_probes", lambda: probes)
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{spark_fake.url}"\n{SPARK_ENGINE_KEYS}')
    monkeypatch.setenv("SPARKCTL_REGISTRY", "http://registry.example.test")
    with ForwardProxy({"registry.example.test": registry.url.split("://", 1)[1]}) as proxy:
        proxied(monkeypatch, proxy.url)
        code = cli.main(["--config", str(config), "fit", "smollm2:135m", "--json"])
        out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["remote"] is True
    assert "GET http://registry.example.test/v2/library/smollm2/manifests/135m" in proxy.seen
    assert all("registry.example.test" in line for line in proxy.seen), proxy.seen  # nothing else went there
    assert no_network == []  # and nothing tried to reach registry.example.test without it
    assert spark_fake.calls("/api/ps")  # the engine answered, directly

    # without the proxy the same name cannot be reached: the fit says so
    for var in PROXY_VARS:
        monkeypatch.delenv(var)
    code = cli.main(["--config", str(config), "fit", "smollm2:135m"])
    assert code == 3 and "cannot reach the registry at http://registry.example.test" in capsys.readouterr().err


@pytest.fixture
def mirror_server(tmp_path):
    from tests.integration.test_eval_suites import shipped_dir

    root = tmp_path / "mirror"
    shutil.copytree(shipped_dir(), root, ignore=shutil.ignore_patterns("*.py", "SHA256SUMS", "__pycache__"))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_suites_mirror_elsewhere_is_fetched_through_the_proxy(mirror_server, monkeypatch, capsys, no_network):
    monkeypatch.setenv("SPARKCTL_SUITES_MIRROR", "http://mirror.example.test")
    with ForwardProxy({"mirror.example.test": mirror_server}) as proxy:
        proxied(monkeypatch, proxy.url)
        code = cli.main(["suites", "pull", "--json"])
        out = capsys.readouterr().out
    assert code == 0, out
    assert sorted(p["suite"] for p in json.loads(out)["pulled"]) == ["gsm8k", "ifeval"]
    assert proxy.seen and all(line.startswith("GET http://mirror.example.test/") for line in proxy.seen)
    assert no_network == []


def test_the_loopback_rule(monkeypatch):
    from sparkctl.core.loopback import is_loopback_url

    for url in ("http://127.0.0.1:11434", "localhost:11434", "http://[::1]:8080", "http://127.8.9.1",
                "http://0.0.0.0:11434", "http://LOCALHOST."):
        assert is_loopback_url(url), url
    for url in ("http://spark-01:11434", "https://registry.ollama.ai", "http://10.0.0.5:11434", "http://[fe80::1]"):
        assert not is_loopback_url(url), url


def test_mlflows_own_client_reaches_a_loopback_tracking_server_past_a_dead_proxy(monkeypatch):
    """MLflow's client is `requests`, which sends even 127.0.0.1 to http_proxy unless
    no_proxy names it: a tracking server on this machine gets its host added to no_proxy;
    one elsewhere leaves the user's proxy settings alone."""
    import requests

    from sparkctl.tracking.store import _direct_to_loopback

    proxied(monkeypatch, DEAD)
    for var in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(var, "")  # empty, as the shell had it; put back after the test
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(Path(__file__).parent))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(requests.exceptions.ProxyError):
            requests.get(url + "/", timeout=5)  # what MLflow's client did before
        _direct_to_loopback("http://team-mlflow.example.test:5000")
        assert os.environ["no_proxy"] == os.environ["NO_PROXY"] == ""
        _direct_to_loopback(url)
        assert requests.get(url + "/", timeout=5).status_code == 200
        assert os.environ["no_proxy"] == os.environ["NO_PROXY"] == "127.0.0.1"
    finally:
        server.shutdown()
        server.server_close()
