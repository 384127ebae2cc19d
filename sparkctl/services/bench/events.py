"""What a measurement reports while it runs (the CLI prints it, the TUI turns it into
messages): phases, notices a user must see even when output is piped, repetitions started
and done, live gauges, and the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from sparkctl.services.bench.results import ModelRun, RepResult

Sink = Callable[[Any], None]


@dataclass(frozen=True)
class Phase:
    text: str


@dataclass(frozen=True)
class ContextChosen:
    """The one num_ctx the run's models run at, once preflight knows it (a screen shows it
    beside the other settings of what is running)."""

    num_ctx: int
    why: str  # a few words: "production's", "given", "" ([bench] num_ctx)


@dataclass(frozen=True)
class Notice:
    """Something the user must see even when output is piped: waiting for another bench,
    a lane model that could not be put back."""

    text: str


@dataclass(frozen=True)
class RepStarted:
    model: str
    index: int  # 0-based among measured reps; -1.. for warm-ups
    warmup: bool
    total: int
    label: str = ""  # said instead of "index/total" (a followed llama-benchy request: its cell and run)


@dataclass(frozen=True)
class Live:
    """A batch of streamed text plus live gauges for the repetition in flight."""

    model: str
    answer: str
    thinking: str
    tokens: int
    elapsed_s: float
    ttft_s: float | None
    decode_tps: float | None
    acceptance_pct: float | None = None  # speculative decoding: the model's last finished repetition


@dataclass(frozen=True)
class RepDone:
    result: RepResult


@dataclass(frozen=True)
class BenchFinished:
    runs: list[ModelRun]

