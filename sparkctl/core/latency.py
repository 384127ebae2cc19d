"""Serving latency under load: percentiles, inter-token gaps, SLO targets and goodput.

Definitions follow the serving benchmarks (vLLM `bench serve`, GuideLLM, AIPerf; see
reference/BENCHMARKS.md):
- TTFT: request sent -> first streamed token on any channel (thinking or answer).
- ITL: the gaps between successive streamed chunks of one request. A chunk may carry
  several tokens (Ollama holds text back around stop sequences and tags), so the gaps are
  per chunk; `tpot` is the per-token figure: (last - first) / (engine tokens - 1).
- Goodput: the share of requests that meet every target; a request that did not finish
  (DNF) or failed never meets one. A finished request whose targeted measure was not taken
  (a prompt-cache hit under the cold policy has no cold TTFT) is neither a hit nor a miss:
  it is left out of the share and counted apart (`unmeasured`).
- Percentiles are withheld below the requests that make them mean something (`min_n`:
  p90 needs 10, p99 100): a "p99" of four requests is their maximum under another name. The ITL target is checked against the request's TPOT
  (its mean inter-token time, what DistServe and vLLM's --goodput call TPOT): one long
  gap in an otherwise fast stream does not fail a request, a slow stream does.
Pure: no clock reads, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_GOODPUT_SHARE_PCT = 90.0


def min_n(q: float) -> int:
    """The fewest values a q-th percentile is reported from: 1 up to the median, then
    enough that at least one value lies beyond it (p90: 10, p99: 100)."""
    if q <= 50:
        return 1
    return math.ceil(100.0 / (100.0 - q) - 1e-9)


def percentile_n(values: Iterable[float | None], q: float) -> tuple[float | None, int]:
    """(the q-th percentile, n), the percentile None when n is below min_n(q)."""
    xs = [v for v in values if v is not None and not math.isnan(float(v))]
    if len(xs) < min_n(q):
        return None, len(xs)
    return percentile(xs, q), len(xs)


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks
    (numpy's default 'linear' method); None and NaN are skipped; None when empty."""
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    if not xs:
        return None
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def gaps(times: Sequence[float]) -> list[float]:
    """Successive differences of one request's chunk arrival times (seconds)."""
    return [b - a for a, b in zip(times, times[1:])]


def tpot(first: float | None, last: float | None, tokens: int | None) -> float | None:
    """Mean time per output token after the first: (last - first) / (tokens - 1)."""
    if first is None or last is None or not tokens or tokens < 2 or last < first:
        return None
    return (last - first) / (tokens - 1)


# ---- SLO targets -------------------------------------------------------------------------

SLO_KEYS = {"ttft": "ttft_s", "itl": "tpot_s", "tpot": "tpot_s", "e2e": "e2e_s"}
_UNITS = {"ms": 1e-3, "s": 1.0, "": 1.0}


@dataclass(frozen=True)
class Slo:
    """Latency targets (seconds); None: no target on that measure."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    share_pct: float = DEFAULT_GOODPUT_SHARE_PCT  # a concurrency "meets" the SLO at this goodput

    def text(self) -> str:
        parts = []
        if self.ttft_s is not None:
            parts.append(f"ttft={_fmt_s(self.ttft_s)}")
        if self.tpot_s is not None:
            parts.append(f"itl={_fmt_s(self.tpot_s)}")
        if self.e2e_s is not None:
            parts.append(f"e2e={_fmt_s(self.e2e_s)}")
        if self.share_pct != DEFAULT_GOODPUT_SHARE_PCT:
            parts.append(f"pct={self.share_pct:g}")
        return ",".join(parts)


def _fmt_s(s: float) -> str:
    return f"{s * 1000:g}ms" if s < 1 else f"{s:g}s"


def parse_slo(text: str) -> Slo:
    """`ttft=2s,itl=100ms[,e2e=30s][,pct=90]` -> Slo. Raises ValueError with a one-line
    reason. Units: s or ms (a bare number is seconds); itl and tpot name the same target."""
    values: dict[str, float] = {}
    share = DEFAULT_GOODPUT_SHARE_PCT
    if not text or not text.strip():
        raise ValueError("empty SLO; expected e.g. ttft=2s,itl=100ms")
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        raw = raw.strip().lower()
        if not sep or not raw:
            raise ValueError(f"{part!r}: expected KEY=VALUE, e.g. ttft=2s")
        if key == "pct":
            try:
                share = float(raw.rstrip("%"))
            except ValueError:
                raise ValueError(f"pct={raw}: expected a percentage, e.g. pct=90") from None
            if not 0 < share <= 100:
                raise ValueError(f"pct={raw}: expected a percentage in (0, 100]")
            continue
        if key not in SLO_KEYS:
            raise ValueError(f"unknown SLO key {key!r}; expected ttft, itl (or tpot), e2e, pct")
        m = re.fullmatch(r"(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)?", raw)
        if not m:
            raise ValueError(f"{key}={raw}: expected a duration like 2s or 100ms")
        seconds = float(m.group(1)) * _UNITS[m.group(2) or ""]
        if seconds <= 0:
            raise ValueError(f"{key}={raw}: a target must be > 0")
        field_name = SLO_KEYS[key]
        if field_name in values:
            raise ValueError(f"{key}: target given twice")
        values[field_name] = seconds
    if not values:
        raise ValueError("no latency target; expected e.g. ttft=2s,itl=100ms")
    return Slo(share_pct=share, **values)


@dataclass(frozen=True)
class RequestLatency:
    """What goodput needs of one request."""

    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    finished: bool  # False: DNF, error or interrupted


def meets(r: RequestLatency, slo: Slo) -> bool:
    if not r.finished:
        return False
    for target, value in ((slo.ttft_s, r.ttft_s), (slo.tpot_s, r.tpot_s), (slo.e2e_s, r.e2e_s)):
        if target is None:
            continue
        if value is None or value > target:
            return False
    return True


def judged(r: RequestLatency, slo: Slo) -> bool:
    """Whether goodput can judge the request: it did not finish (a miss), or every measure
    with a target was taken."""
    if not r.finished:
        return True
    return all(value is not None for target, value in ((slo.ttft_s, r.ttft_s), (slo.tpot_s, r.tpot_s),
                                                       (slo.e2e_s, r.e2e_s)) if target is not None)


def goodput_pct(requests: Sequence[RequestLatency], slo: Slo) -> float | None:
    """Share of the judged requests meeting every target, in percent; None when none could
    be judged. Requests whose targeted measure was not taken are left out (see `judged`)."""
    pool = [r for r in requests if judged(r, slo)]
    if not pool:
        return None
    return 100.0 * sum(meets(r, slo) for r in pool) / len(pool)


def highest_meeting(goodput_by_concurrency: dict[int, float | None], share_pct: float) -> int | None:
    """The highest concurrency whose goodput reaches `share_pct`, counting up from the lowest
    and stopping at the first one that misses (a level past a failing one is noise, not
    capacity). None when even the lowest misses."""
    best = None
    for k in sorted(goodput_by_concurrency):
        g = goodput_by_concurrency[k]
        if g is None or g < share_pct:
            break
        best = k
    return best


# ---- queueing ------------------------------------------------------------------------------

# A request waited in the engine's queue when the server's own total time holds this much
# more than load + prefill + decode (Ollama: a request past OLLAMA_NUM_PARALLEL waits for a
# slot inside the runner's completion call, so only total_duration shows it).
QUEUE_FLOOR_S = 0.05
QUEUE_SHARE = 0.10


def queued(wait_s: float | None, total_s: float | None) -> bool:
    """Whether a request's unexplained server time says it waited for a slot."""
    if wait_s is None or total_s is None:
        return False
    return wait_s > max(QUEUE_FLOOR_S, QUEUE_SHARE * total_s)


def parallel_seen(starts: Sequence[float], firsts: Sequence[float | None], ends: Sequence[float]) -> int:
    """How many of one round's requests were decoding at the same moment, from the client's
    clock: the most decode windows (first token .. end) that overlap. A server that
    serialises shows 1 whatever the concurrency asked for."""
    events: list[tuple[float, int]] = []
    for f, e in zip(firsts, ends):
        if f is None or e <= f:
            continue
        events.append((f, 1))
        events.append((e, -1))
    events.sort(key=lambda x: (x[0], x[1]))
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best
