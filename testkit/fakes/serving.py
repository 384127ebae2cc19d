"""The fake Ollama's concurrency model (a FAKE, for tests): how several requests on one
runner share it, and a log of when each request's pieces happened, for tests to compare
sparkctl's percentiles and goodput against.

What it models, from Ollama's scheduler and the llama runner:
- OLLAMA_NUM_PARALLEL (FakeState.num_parallel, given to each new runner): that many
  sequences run at once; a request past it waits for a slot inside the runner's completion
  call (the resident's `slots` semaphore), so its wait shows in total_duration and in no
  other duration, and to the client as a later first token.
- Shared throughput: the sequences decoding at once share the runner's decode. One decode
  step of a batch of k sequences costs more than one of a single sequence but far less than
  k of them (the weights are read once per step), so the aggregate grows sub-linearly:
  aggregate = single-stream rate x k ** scaling (FakeState.batch_scaling, 0 < scaling <= 1),
  per sequence = that / k. The rate is re-read every step, so a sequence that joins or
  leaves changes the others' pace from the next token on.
Prefill is not shared (a simplification: real runners batch prompt and decode tokens).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


class SharedDecode:
    """The sequences decoding on one runner right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0

    def enter(self) -> None:
        with self._lock:
            self.active += 1

    def leave(self) -> None:
        with self._lock:
            self.active = max(0, self.active - 1)

    def step_s(self, single_step_s: float, scaling: float) -> float:
        """One token's time for each of the `active` sequences."""
        k = max(1, self.active)
        return single_step_s * k / (k ** scaling)


@dataclass
class RequestTiming:
    """One generate/chat request as the fake served it (time.perf_counter seconds: the same
    clock as the client's in a test process)."""

    model: str
    received: float
    slot_acquired: float | None = None
    first_chunk: float | None = None
    chunks: list[float] = field(default_factory=list)  # every chunk that carried text
    done: float | None = None
    eval_count: int = 0
    prompt_eval_count: int = 0
    prompt_text: str = ""

    @property
    def queued_s(self) -> float:
        """Time spent waiting for a runner slot (OLLAMA_NUM_PARALLEL)."""
        return 0.0 if self.slot_acquired is None else self.slot_acquired - self.received

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_chunk is None else self.first_chunk - self.received


def now() -> float:
    return time.perf_counter()
