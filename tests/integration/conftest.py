"""Fixtures for engine integration tests. The Ollama server here is a FAKE
(tests/fakes/ollama_server.py) speaking Ollama's wire format over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sparkctl.engines.ollama import OllamaEngine
from tests.fakes.ollama_server import FakeOllama, default_state


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
