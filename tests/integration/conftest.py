"""Fixtures for engine integration tests. The Ollama server here is a FAKE
(testkit/fakes/ollama_server.py) speaking Ollama's wire format over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sparkctl.engines.ollama import OllamaEngine
from testkit.fakes.ollama_server import FakeOllama, bench_scenario, default_state


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    """A started fake Ollama on a free 127.0.0.1 port; swap `fake_ollama.state` freely."""
    server = FakeOllama(default_state()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def ollama_engine(fake_ollama: FakeOllama) -> AsyncIterator[OllamaEngine]:
    """An OllamaEngine pointed at the fake, with short timeouts so failures are quick."""
    engine = OllamaEngine(fake_ollama.url, timeout=5.0, connect_timeout=1.0, load_timeout=10.0)
    try:
        yield engine
    finally:
        await engine.close()


@pytest.fixture
def serve() -> Iterator:
    """Start fake Ollama servers from FakeState objects; all are stopped after the test."""
    servers: list[FakeOllama] = []

    def start(state) -> FakeOllama:
        server = FakeOllama(state).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def raw_fake() -> Iterator[FakeOllama]:
    """The fake with an unpaced bench scenario and a plain httpx client on it as `.http`,
    for tests of the fake's own wire behaviour."""
    import httpx

    fake = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    fake.http = httpx.Client(base_url=fake.url, timeout=10)  # type: ignore[attr-defined]
    try:
        yield fake
    finally:
        fake.http.close()  # type: ignore[attr-defined]
        fake.stop()
