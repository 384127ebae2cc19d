"""llama-benchy's live event stream (`--emit-progress`, schema `llama-benchy-progress.v1`),
read one line at a time into requests, cells and live figures. Pure: lines in, state out.

The contract (eugr/llama-benchy, docs/progress-schema.md): one JSON object per line, each
with `schema`, `type` and `ts` (Unix seconds). `header` (llama_benchy_version) first;
per request `request_start` (request_id, model, base_url, prompt_size, response_size,
context_size, concurrency, run_index), optionally `request_first_response` (ttfr_s),
`request_first_token` (ttft_s: end-to-end time to the first content token), `tokens` per
streamed chunk (count, snippet, `estimated` when the server gave no token ids),
`request_end` (total_tokens, prompt_tokens, decode_seconds, error); `latency_measured`
(latency_s, mode) once before the requests; `bench_complete` (status ok|interrupted|error)
last. Unknown fields and types are ignored; a line of another schema is skipped (counted). Every
string the stream carries (model, base_url, error, snippet, version) loses its escape
sequences here (core/termtext.py): the file is written by another program, and what it
says reaches the terminal through the CLI's lines and the Bench screen.

What this reader derives, per request, as llama-benchy itself computes it from the same
events: decode tok/s = (total_tokens - 1) / decode_seconds (its tg per request); prefill
tok/s = prompt tokens / (ttfr - latency) (its est_ppt); the GenAI figures (time to first
chunk = ttfr, else ttft; time per output chunk from the `tokens` events' times; duration =
request_end - request_start).

Cells: requests sharing model, depth (context_size), concurrency, pp and tg. The v1 stream
does not mark the context-loading request of a prefix-caching run; a cell whose run has
twice its concurrency in requests is read as that: the first `concurrency` requests of the
run (by request_id) loaded the context, the rest were measured.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from sparkctl.core.termtext import safe_line, safe_text

SCHEMA = "llama-benchy-progress.v1"
STATUSES = ("ok", "interrupted", "error")


class NotAProgressStream(ValueError):
    """The text is not a llama-benchy-progress.v1 stream (one line saying why)."""


def looks_like_stream(first_line: str) -> bool:
    """Whether a file's first non-empty line opens a progress stream."""
    try:
        obj = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("schema"), str) and obj["schema"].startswith(
        "llama-benchy-progress.")


@dataclass
class Request:
    request_id: int
    model: str = ""
    base_url: str = ""
    prompt_size: int = 0
    response_size: int = 0
    context_size: int = 0
    concurrency: int = 1
    run_index: int = 0
    start_ts: float = 0.0
    ttfr_s: float | None = None
    ttft_s: float | None = None
    chunk_ts: list[float] = field(default_factory=list)
    tokens: int = 0  # streamed so far (estimated counts included, as hints)
    snippet: str = ""  # the last chunk's text
    end_ts: float | None = None
    total_tokens: int | None = None
    prompt_tokens: int | None = None
    decode_seconds: float | None = None
    error: str = ""
    context_phase: bool = False  # inferred: the context-loading request of a prefix-caching run

    @property
    def done(self) -> bool:
        return self.end_ts is not None

    @property
    def ok(self) -> bool:
        return self.done and not self.error

    @property
    def cell_key(self) -> tuple[str, int, int, int, int]:
        return (self.model, self.context_size, self.concurrency, self.prompt_size, self.response_size)

    @property
    def decode_tps(self) -> float | None:
        if not self.ok or not self.total_tokens or self.total_tokens < 2 or not self.decode_seconds:
            return None
        return (self.total_tokens - 1) / self.decode_seconds

    def live_tps(self, now: float) -> float | None:
        """Decode tok/s so far, from the streamed counts (the gauges' figure)."""
        if self.ttft_s is None or self.tokens < 2:
            return None
        first = self.start_ts + self.ttft_s
        return (self.tokens - 1) / (now - first) if now > first else None

    def prefill_tps(self, latency_s: float) -> float | None:
        n = self.prompt_tokens or self.prompt_size
        first = self.ttfr_s if self.ttfr_s is not None else self.ttft_s
        if not self.ok or not n or first is None or first - latency_s <= 0:
            return None
        return n / (first - latency_s)

    @property
    def ttfc_s(self) -> float | None:
        return self.ttfr_s if self.ttfr_s is not None else self.ttft_s

    @property
    def tpoc_s(self) -> float | None:
        if len(self.chunk_ts) < 2:
            return None
        return (self.chunk_ts[-1] - self.chunk_ts[0]) / (len(self.chunk_ts) - 1)

    @property
    def duration_s(self) -> float | None:
        return None if self.end_ts is None else self.end_ts - self.start_ts


@dataclass(frozen=True)
class Update:
    """What a line changed: `kind` started | first_token | tokens | ended | complete | header."""

    kind: str
    request: Request | None = None


@dataclass
class Cell:
    model: str
    depth: int
    concurrency: int
    prompt_size: int
    response_size: int
    requests: list[Request] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"d{self.depth}/c{self.concurrency}"


@dataclass
class ProgressState:
    """Everything read so far from one stream."""

    version: str = ""
    header_ts: float | None = None
    latency_s: float = 0.0
    latency_mode: str = ""
    requests: dict[int, Request] = field(default_factory=dict)
    status: str | None = None  # bench_complete's status (None: not complete)
    complete_ts: float | None = None
    skipped: int = 0  # lines of another schema, or not JSON objects
    last_ts: float = 0.0

    @property
    def complete(self) -> bool:
        return self.status is not None

    def feed_line(self, line: str) -> Update | None:
        text = line.strip()
        if not text:
            return None
        try:
            obj = json.loads(text)
        except ValueError:
            self.skipped += 1
            return None
        if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
            self.skipped += 1
            return None
        return self.feed(obj)

    def feed(self, ev: dict[str, Any]) -> Update | None:
        kind = ev.get("type")
        ts = _num(ev.get("ts")) or self.last_ts
        self.last_ts = max(self.last_ts, ts)
        if kind == "header":
            self.version = safe_line(ev.get("llama_benchy_version") or "")
            self.header_ts = ts
            return Update("header")
        if kind == "latency_measured":
            self.latency_s = _num(ev.get("latency_s")) or 0.0
            self.latency_mode = safe_line(ev.get("mode") or "")
            return None
        if kind == "bench_complete":
            status = str(ev.get("status") or "ok")
            self.status = status if status in STATUSES else "error"
            self.complete_ts = ts
            return Update("complete")
        rid = ev.get("request_id")
        if not isinstance(rid, int):
            return None
        if kind == "request_start":
            r = Request(rid, safe_line(ev.get("model") or ""), safe_line(ev.get("base_url") or ""),
                        _int(ev.get("prompt_size")),
                        _int(ev.get("response_size")), _int(ev.get("context_size")),
                        max(1, _int(ev.get("concurrency")) or 1), _int(ev.get("run_index")), ts)
            self.requests[rid] = r
            return Update("started", r)
        r = self.requests.get(rid)
        if r is None:  # an event for a request whose start was not seen (a cut file): ignored
            return None
        if kind == "request_first_response":
            r.ttfr_s = _num(ev.get("ttfr_s"))
            return None
        if kind == "request_first_token":
            r.ttft_s = _num(ev.get("ttft_s"))
            return Update("first_token", r)
        if kind == "tokens":
            r.tokens += max(0, _int(ev.get("count")))
            r.chunk_ts.append(ts)
            r.snippet = safe_text(ev.get("snippet") or "")
            return Update("tokens", r)
        if kind == "request_end":
            r.end_ts = ts
            r.total_tokens = _int(ev.get("total_tokens"))
            r.prompt_tokens = _int(ev.get("prompt_tokens")) or None
            r.decode_seconds = _num(ev.get("decode_seconds"))
            r.error = safe_line(ev.get("error") or "")
            return Update("ended", r)
        return None

    def cells(self) -> list[Cell]:
        """Finished requests grouped into cells, in the order their first request started,
        with the context-loading requests of prefix-caching runs marked (module doc)."""
        out: dict[tuple, Cell] = {}
        for r in sorted(self.requests.values(), key=lambda r: r.request_id):
            if not r.done:
                continue
            cell = out.setdefault(r.cell_key, Cell(r.model, r.context_size, r.concurrency, r.prompt_size,
                                                   r.response_size))
            cell.requests.append(r)
        for cell in out.values():
            runs: dict[int, list[Request]] = {}
            for r in cell.requests:
                runs.setdefault(r.run_index, []).append(r)
            for rs in runs.values():
                if len(rs) == 2 * cell.concurrency:
                    for r in rs[:cell.concurrency]:
                        r.context_phase = True
        return list(out.values())


def summary(requests: list[Request], latency_s: float) -> dict[str, float]:
    """A cell's figures in sparkctl's summary names (medians over the finished requests)."""
    out: dict[str, float] = {}
    ok = [r for r in requests if r.ok]
    for key, values in (("decode_tps", [r.decode_tps for r in ok]),
                        ("prefill_tps", [r.prefill_tps(latency_s) for r in ok]),
                        ("ttft_s", [r.ttft_s for r in ok]), ("ttfr_s", [r.ttfr_s for r in ok]),
                        ("total_s", [r.duration_s for r in ok])):
        xs = [v for v in values if v is not None]
        if xs:
            out[f"{key}_median"] = statistics.median(xs)
            if key == "decode_tps":
                out["decode_tps_mean"] = statistics.fmean(xs)
                if len(xs) > 1:
                    out["decode_tps_std"] = statistics.pstdev(xs)
                    if out["decode_tps_mean"]:
                        out["decode_tps_cv_pct"] = out["decode_tps_std"] / out["decode_tps_mean"] * 100
    out["requests"] = float(len(requests))
    out["failed"] = float(sum(1 for r in requests if r.done and r.error))
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
