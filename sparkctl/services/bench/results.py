"""What a bench measured: each repetition (RepResult) and each model's run (ModelRun), with
the guards' placement, flags and invalid reasons. A sweep cell's run and an eval's guard are
ModelRuns too."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from sparkctl.core import specdec
from sparkctl.engines.base import ShowInfo


@dataclass
class RepResult:
    model: str
    index: int
    warmup: bool
    ttft_s: float | None = None
    client_decode_tps: float | None = None
    engine_decode_tps: float | None = None
    prefill_tps: float | None = None
    load_s: float | None = None
    total_s: float | None = None
    wall_s: float = 0.0
    eval_count: int | None = None
    prompt_eval_count: int | None = None
    client_tokens: int = 0
    thinking_tokens: int = 0
    done_reason: str | None = None
    dnf: bool = False
    error: str | None = None
    reload: bool = False
    output: str = ""
    thinking: str = ""
    raw_final: dict = field(default_factory=dict)
    decode_window: tuple[float, float] | None = None
    window: tuple[float, float] | None = None  # request sent .. stream closed (perf_counter)
    prompt_eval_duration_ns: int | None = None
    preamble: str = ""  # what this request added to the fixed prompt (cache policy)
    prefill_cached: bool | None = None  # served (partly) from the prompt cache
    prompt_cached_tokens: int | None = None
    cache_note: str = ""
    client_decode_basis: str = ""  # "engine eval_count" or "streamed chunks"
    queue_wait_s: float | None = None
    foreign: str = ""  # why load the bench did not cause was seen during this request
    prompt_evaluated: int | None = None  # prompt tokens the engine evaluated (what prefill_tps is over)
    spec: specdec.SpecCounts | None = None  # speculative decoding: drafted/accepted, as the engine said
    spec_per_pos: tuple[int, ...] = ()  # accepted draft tokens per draft position (Ollama's runner /metrics)
    cached_counted_apart: bool = False  # prompt_eval_count leaves the cached tokens out (Ollama 0.30.0)
    runner_cached: int | None = None  # prompt tokens Ollama's runner says it reused for this request
    joules_per_token: float | None = None  # GPU energy over the decode window / tokens (NVML power)


@dataclass
class ModelRun:
    model: str
    show: ShowInfo | None = None
    reps: list[RepResult] = field(default_factory=list)
    warmups: list[RepResult] = field(default_factory=list)
    placement_before: str = "n/a"
    placement_after: str = "n/a"
    invalid: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    status: str = "FINISHED"
    summary: dict[str, float] = field(default_factory=dict)
    stable: bool = False
    sync_message: str = ""
    not_saved: bool = False  # neither the spool nor MLflow took the run (tracking.sync.SyncResult.lost)
    run_id: str | None = None
    num_ctx: int = 0
    ctx_note: str = ""
    record_id: str = field(default_factory=lambda: secrets.token_hex(16))
    lane_restore: str = ""
    residency: str = ""  # what the bench's end unloaded and put back (guard.residency)
    completed: bool = False  # all its repetitions ran and placement was checked after
    refused: str = ""  # a guard refused it after the bench began (recorded refused, not valid)
    resident_bytes: int | None = None  # the engine's size of the loaded model (/api/ps), weights + KV + graph
    spec_total: specdec.SpecCounts | None = None  # engine counters differenced around the run (a sweep cell)

