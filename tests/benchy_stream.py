"""llama-benchy `--emit-progress` streams written from its published schema
(eugr/llama-benchy, docs/progress-schema.md, `llama-benchy-progress.v1`), with made-up timings.

`stream(...)` yields the events one request at a time in the order the producer writes
them: `header`, `latency_measured`, then per request `request_start`, `request_first_response`,
`request_first_token`, one `tokens` per chunk and `request_end`; `bench_complete` last. The
K requests of one run start together and their events interleave, as concurrent requests do.
With `prefix_caching`, each run first sends K context-loading requests (the stream does not
mark them), then the K measured ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SCHEMA = "llama-benchy-progress.v1"


@dataclass
class Plan:
    model: str = "meta-llama/Llama-3.2-3B-Instruct"
    cells: tuple[tuple[int, int], ...] = ((0, 1), (4096, 2))  # (depth, concurrency)
    runs: int = 2
    pp: int = 2048
    tg: int = 6
    prefix_caching: bool = False
    latency_s: float = 0.002
    t0: float = 1_780_000_000.0


def ttft_of(depth: int, run: int, slot: int) -> float:
    """The made-up time to first token of a request (seconds)."""
    return 0.2 + depth / 40_000 + 0.01 * run + 0.005 * slot


GAP = 0.02  # seconds between streamed chunks, one token each


def stream(plan: Plan, *, complete: bool = True):
    t = plan.t0
    ev = lambda kind, **f: {"schema": SCHEMA, "type": kind, "ts": round(t, 6), **f}  # noqa: E731
    yield ev("header", llama_benchy_version="0.4.0")
    yield ev("latency_measured", latency_s=plan.latency_s, mode="api")
    rid = 0
    for depth, k in plan.cells:
        for run in range(plan.runs):
            phases = ("context", "measure") if plan.prefix_caching and depth else ("measure",)
            for phase in phases:
                starts = []
                for slot in range(k):
                    t += 0.001
                    starts.append((rid, t, slot))
                    yield ev("request_start", request_id=rid, model=plan.model, base_url="http://127.0.0.1:8080/v1",
                             prompt_size=plan.pp, response_size=plan.tg, context_size=depth, concurrency=k,
                             run_index=run, target_label="")
                    rid += 1
                # the K requests stream together: events ordered by their time
                events = []
                for r, start, slot in starts:
                    first = ttft_of(depth, run, slot) * (3 if phase == "context" else 1)
                    events.append((start + first - 0.001, r, "request_first_response", {"ttfr_s": round(first - 0.001, 6)}))
                    events.append((start + first, r, "request_first_token", {"ttft_s": round(first, 6)}))
                    for i in range(plan.tg):
                        events.append((start + first + i * GAP, r, "tokens", {"count": 1, "snippet": f" w{i}"}))
                    end = start + first + (plan.tg - 1) * GAP + 0.001
                    events.append((end, r, "request_end", {"total_tokens": plan.tg, "prompt_tokens": plan.pp + depth,
                                                           "decode_seconds": round(end - start - first, 6),
                                                           "error": ""}))
                for when, r, kind, fields in sorted(events, key=lambda e: (e[0], e[1])):
                    t = when
                    yield ev(kind, request_id=r, **fields)
    if complete:
        t += 0.01
        yield ev("bench_complete", status="ok")


def lines(plan: Plan, **kw) -> list[str]:
    return [json.dumps(e, separators=(",", ":")) + "\n" for e in stream(plan, **kw)]
