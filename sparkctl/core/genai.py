"""OpenTelemetry GenAI metric names in MLflow, written the way AIPerf writes them, so that an
AIPerf run and a sparkctl run of one model sit in one experiment under the same names.

What AIPerf (NVIDIA, ai-dynamo/aiperf) logs to MLflow, read from its source and docs
(`docs/tutorials/otel-mlflow`, `exporters/mlflow_data_exporter.py`, the live fanout):
- per request, while it runs: `live.<OTel name>` scalars, in seconds for the times, with a
  step that only grows: `live.gen_ai.client.operation.duration`,
  `live.gen_ai.client.operation.time_to_first_chunk`,
  `live.gen_ai.client.operation.time_per_output_chunk`, `live.gen_ai.client.token.usage`
  (the GenAI semantic conventions' client histograms; the token counts carry their
  `gen_ai.token.type` as an OTel attribute, which an MLflow key cannot keep, so input and
  output counts share the one key there);
- at the end: its own summary keys (`time_to_first_token.p50`, ...), params
  (`endpoint.models`, `loadgen.concurrency`, ...), tags (`aiperf.version`, `benchmark_id`)
  and an artifact `exports/mlflow_export.json` naming the run (tracking URI without
  credentials, experiment, run id and name, parent run id, the keys it logged).

sparkctl writes the same `live.*` series (one value per measured request, step = the
request's index) and, so that MLflow's search and sort can use them, summaries under the
same names: the plain name is the mean (AIPerf's convention for its own summaries), then
`.p50`, `.p90`, `.p99`, `.min`, `.max` and `.count`. A percentile is left out below the
requests that make it mean something (p90: 10, p99: 100), as everywhere in sparkctl.
`live.gen_ai.client.token.usage` holds the output tokens of each request and
`live.gen_ai.client.token.usage.input` the prompt tokens (kept apart: one key per meaning).

The issue that asked for this spelled the names `gen_ai.client.time_to_first_chunk`; the
semantic conventions and AIPerf both say `gen_ai.client.operation.time_to_first_chunk`,
which is what is written here.

Pure: no I/O. Pure core of sparkctl.services.runs.genai, which reads runs by these names.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sparkctl.core.latency import percentile_n

TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"
TOKEN_USAGE_INPUT = TOKEN_USAGE + ".input"  # sparkctl's: AIPerf mixes both counts in TOKEN_USAGE
LIVE = "live."

# the figures two tools' runs are compared by (seconds), in the order they are shown
TIMES = (TIME_TO_FIRST_CHUNK, TIME_PER_OUTPUT_CHUNK, OPERATION_DURATION)
NAMES = (*TIMES, TOKEN_USAGE, TOKEN_USAGE_INPUT)
SHORT = {TIME_TO_FIRST_CHUNK: "TTFC", TIME_PER_OUTPUT_CHUNK: "TPOC", OPERATION_DURATION: "duration",
         TOKEN_USAGE: "tokens", TOKEN_USAGE_INPUT: "input tokens"}
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RequestFigures:
    """One finished request, in the GenAI conventions' terms (seconds, tokens).

    ttfc_s: request sent -> first streamed chunk of any kind (thinking included).
    tpoc_s: mean time between chunks after the first ((last - first) / (chunks - 1)).
    duration_s: request sent -> response ended.
    """

    ttfc_s: float | None = None
    tpoc_s: float | None = None
    duration_s: float | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None

    def value(self, name: str) -> float | None:
        v = {TIME_TO_FIRST_CHUNK: self.ttfc_s, TIME_PER_OUTPUT_CHUNK: self.tpoc_s,
             OPERATION_DURATION: self.duration_s, TOKEN_USAGE: self.output_tokens,
             TOKEN_USAGE_INPUT: self.input_tokens}[name]
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def live_key(name: str) -> str:
    return LIVE + name


def live_series(requests: Sequence[RequestFigures]) -> dict[str, list[float | None]]:
    """`live.<name>` -> one value per request, by the request's index (None: not measured),
    for RunRecord.step_metrics. Names no request measured are left out."""
    out: dict[str, list[float | None]] = {}
    for name in NAMES:
        values = [r.value(name) for r in requests]
        if any(v is not None for v in values):
            out[live_key(name)] = values
    return out


def summarize(name: str, values: Iterable[float | None]) -> dict[str, float]:
    """The summary keys of one name: `name` (mean), `name.p50/.p90/.p99`, `.min`, `.max`,
    `.count`; empty when there is no value."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return {}
    out = {name: statistics.fmean(xs), f"{name}.min": min(xs), f"{name}.max": max(xs), f"{name}.count": float(len(xs))}
    for q in PERCENTILES:
        p, _n = percentile_n(xs, q)
        if p is not None:
            out[f"{name}.p{q}"] = p
    return out


def summary(requests: Sequence[RequestFigures]) -> dict[str, float]:
    """Every name's summary keys over `requests` (for RunRecord.summary_metrics)."""
    out: dict[str, float] = {}
    for name in NAMES:
        out.update(summarize(name, (r.value(name) for r in requests)))
    return out


@dataclass(frozen=True)
class Figures:
    """One run's figures under the GenAI names, whichever tool wrote it: `values[name]` is
    {"avg", "p50", "p90", "p99", "min", "max", "count"} (missing keys: not measured)."""

    values: dict[str, dict[str, float]]

    def get(self, name: str, stat: str = "p50") -> float | None:
        return self.values.get(name, {}).get(stat)

    @property
    def empty(self) -> bool:
        return not any(self.values.get(n) for n in TIMES)


def _split(key: str) -> tuple[str, str] | None:
    for name in NAMES:
        if key == name:
            return name, "avg"
        if key.startswith(name + ".") and key[len(name) + 1:] in ("p50", "p90", "p99", "min", "max", "count"):
            return name, key[len(name) + 1:]
    return None


def from_summary(metrics: Mapping[str, float]) -> Figures:
    """A run's figures from its summary metrics (what sparkctl logs)."""
    values: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        hit = _split(key)
        if hit is not None and value is not None and not math.isnan(float(value)):
            values.setdefault(hit[0], {})[hit[1]] = float(value)
    return Figures(values)


def from_live(series: Mapping[str, Sequence[float]], *, token_usage_mixed: bool = False) -> Figures:
    """A run's figures from its `live.*` histories (name -> values in step order): how an
    AIPerf run is read, whose own summaries are not under these names.
    `token_usage_mixed`: the series holds input and output counts together (AIPerf's), so
    no token figure is derived from it."""
    values: dict[str, dict[str, float]] = {}
    for name in NAMES:
        if name in (TOKEN_USAGE, TOKEN_USAGE_INPUT) and token_usage_mixed:
            continue
        xs = series.get(live_key(name)) or []
        stats = summarize(name, xs)
        if stats:
            values[name] = {(k[len(name) + 1:] if k != name else "avg"): v for k, v in stats.items()}
    return Figures(values)
