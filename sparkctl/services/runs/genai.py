"""Runs of one model by OpenTelemetry's GenAI metric names, whichever tool wrote them: a
sparkctl bench (or sweep cell) and an AIPerf run logged to the same MLflow experiment.

sparkctl's runs carry summaries under those names (core/genai.py); an AIPerf run carries
only its `live.*` per-request series under them (its own summaries use AIPerf's names and
units), so its figures are computed here from those series. AIPerf's runs are another
client's measurement of an unknown workload: they are shown beside sparkctl's, never paired
with them in a statistical comparison (their workload identity's kind is `import`).
Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkctl.core import genai, workload
from sparkctl.core.names import model_key
from sparkctl.services.runs.query import list_runs, quote
from sparkctl.services.runs.rows import KIND_BENCH, RunRow, row_from_run

HISTORY = 200  # runs of a model looked through for AIPerf's


@dataclass(frozen=True)
class GenAIRow:
    """One run's figures under the GenAI names, and where they come from."""

    model: str
    tool: str  # "sparkctl" | "aiperf"
    run_id: str
    run_name: str
    what: str  # "bench", "sweep cell prose/d0/c4", "aiperf c4"
    engine: str
    start_ms: int | None
    figures: genai.Figures
    source: str  # "summary" (logged under the names) | "live series"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "tool": self.tool, "run_id": self.run_id, "run_name": self.run_name,
                               "what": self.what, "engine": self.engine, "start_ms": self.start_ms,
                               "source": self.source}
        for name in genai.TIMES:
            for stat in ("p50", "p90", "avg", "count"):
                out[f"{name}.{stat}" if stat != "avg" else name] = self.figures.get(name, stat)
        out[genai.TOKEN_USAGE] = self.figures.get(genai.TOKEN_USAGE, "avg")
        return out


def is_aiperf(row: RunRow) -> bool:
    return row.identity.kind == workload.IMPORT and row.identity.profile == workload.AIPERF


def figures_of(store: Any, row: RunRow) -> GenAIRow:
    """One run's GenAI figures: its summaries, or (an AIPerf run, or a sparkctl run older than
    the names) its live series."""
    found = store.search_runs(f"attributes.run_id = {quote(row.run_id)}", max_results=1)
    run = found[0] if found else {}
    metrics = run.get("metrics") or {}
    tags = run.get("tags") or {}
    aiperf = is_aiperf(row)
    figs = genai.Figures({}) if aiperf else genai.from_summary(metrics)
    source = "summary"
    if figs.empty:
        series = {genai.live_key(n): store.metric_history(row.run_id, genai.live_key(n)) for n in genai.NAMES}
        figs = genai.from_live(series, token_usage_mixed=aiperf)
        source = "live series"
    if aiperf:
        conc = row.identity.concurrency
        what = f"aiperf c{conc}" if conc and conc != "1" else "aiperf"
        engine = tags.get("gen_ai.provider.name") or "unknown"
    else:
        what = row.what
        engine = f"{row.engine_kind} {row.engine_version}".strip()
    return GenAIRow(row.model, "aiperf" if aiperf else "sparkctl", row.run_id, row.run_name, what, engine,
                    row.start_ms, figs, source)


def aiperf_runs(store: Any, model: str, experiment: str | None = None, limit: int = 10) -> list[RunRow]:
    """The newest AIPerf runs of `model` in the experiment (newest first). AIPerf names the
    model in its `endpoint.models` param, not in sparkctl's model tag: its runs are found by
    its version tag and matched here by sparkctl's model key."""
    want = model_key(model)
    page, _token = store.search_runs_page("tags.`aiperf.version` LIKE '%'", order_by=["start_time DESC"],
                                          max_results=HISTORY, experiment=experiment)
    out = []
    for run in page:
        names = ((run.get("params") or {}).get("endpoint.models") or "").split(",")
        if any(n.strip() and model_key(n.strip()) == want for n in names):
            row = row_from_run(run)
            if is_aiperf(row):
                out.append(row)
    return out[:limit]


def side_by_side(store: Any, rows: list[RunRow], experiment: str | None = None) -> list[GenAIRow]:
    """`rows` (sparkctl's runs, e.g. the ones a comparison used) and every compared model's
    AIPerf runs, all by the GenAI names; rows without any GenAI figure are left out."""
    out: list[GenAIRow] = []
    models: list[str] = []
    for row in rows:
        out.append(figures_of(store, row))
        if row.model not in models:
            models.append(row.model)
    for model in models:
        out.extend(figures_of(store, r) for r in aiperf_runs(store, model, experiment))
    return [g for g in out if not g.figures.empty]


def model_history(store: Any, model: str, limit: int = 30) -> list[GenAIRow]:
    """A model's runs by the GenAI names, oldest first: its plain benches and its AIPerf runs
    (the chart of time to first chunk across tools)."""
    rows = [r for r in list_runs(store, model=model, kind=KIND_BENCH, limit=limit)] + aiperf_runs(store, model,
                                                                                                limit=limit)
    rows.sort(key=lambda r: r.start_ms or 0, reverse=True)
    out = [figures_of(store, r) for r in rows[:limit]]
    return list(reversed([g for g in out if not g.figures.empty]))


def render(rows: list[GenAIRow]) -> str:
    """The side-by-side table: one line per run, the same names for both tools."""
    if not rows:
        return "  no run of these models carries GenAI figures"
    head = (f"  {'MODEL':<22} {'TOOL':<8} {'RUN':<8} {'WHAT':<26} {'TTFC p50 s':>10} {'TPOC p50 ms':>11} "
            f"{'duration p50 s':>14} {'n':>4}")
    lines = [head]
    for g in rows:
        f = g.figures
        ttfc, tpoc, dur = (f.get(genai.TIME_TO_FIRST_CHUNK), f.get(genai.TIME_PER_OUTPUT_CHUNK),
                           f.get(genai.OPERATION_DURATION))
        n = f.get(genai.OPERATION_DURATION, "count") or f.get(genai.TIME_TO_FIRST_CHUNK, "count")
        lines.append(f"  {g.model[:22]:<22} {g.tool:<8} {g.run_id[:8]:<8} {g.what[:26]:<26} "
                     f"{_f(ttfc, '.3f'):>10} {_f(None if tpoc is None else tpoc * 1000, '.1f'):>11} "
                     f"{_f(dur, '.2f'):>14} {_f(n, '.0f'):>4}")
    lines.append(f"  names: TTFC = {genai.TIME_TO_FIRST_CHUNK}, TPOC = {genai.TIME_PER_OUTPUT_CHUNK}, "
                 f"duration = {genai.OPERATION_DURATION} (p50 over the run's requests)")
    return "\n".join(lines)


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)
