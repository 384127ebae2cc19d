"""The engine an eval talks through: the same server, with streams allowed to wait as long
as a queued item can.

With concurrency K, an item queued behind K-1 others may see no byte until they finish,
each up to the per-item ceiling. The dashboard's engine gives up on a silent stream after
its own read timeout (600 s by default), which would turn such an item into a DNF that the
model did not earn. The CLI and the Eval screen both build the eval's engine from here.
"""

from __future__ import annotations

from typing import Any


def stream_timeout(timeout_s: float, concurrency: int) -> float:
    """Seconds a stream may stay silent in an eval: every item ahead of it at its ceiling,
    plus a minute for the load."""
    return timeout_s * max(1, concurrency) + 60


def engine_for_eval(engine: Any, timeout_s: float, concurrency: int) -> Any:
    """A copy of an Ollama `engine` (same host and quick timeouts) whose streams wait
    `stream_timeout`; any other engine is returned as it is. The caller closes a copy
    (it is not `engine`)."""
    from sparkctl.engines.ollama import OllamaEngine

    if type(engine) is not OllamaEngine:
        return engine
    return OllamaEngine(engine.host, timeout=engine.timeout, connect_timeout=engine.connect_timeout,
                        load_timeout=max(engine.load_timeout, stream_timeout(timeout_s, concurrency)))
