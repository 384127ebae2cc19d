"""A workload sweep's matrix and charts (issue 12), as a modal screen.

Opened with M on the Runs screen (the selected run's sweep, read back by its `sweep.id`
tag in a thread worker) and at the end of a sweep started from the Bench screen (the
results handed over, nothing read). Like run_charts: text rows on a shared scale
(core.charts), laid out again on resize, so 80 columns show the same numbers.

- The matrix: rows models, columns cells (profile, depth, concurrency), wrapped into blocks
  of columns that fit the width. Each cell: per-request decode tok/s coloured by its share of
  the row's best, aggregate tok/s (Σ), TTFT p90 and goodput where recorded.
- Decode tok/s against depth, one group of rows per model and concurrency.
- Aggregate throughput against concurrency beside per-request latency (TPOT), per model and depth.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from sparkctl.core.charts import bar_rows
from sparkctl.core.sweep import CellResult, SweepView, concurrency_series, depth_label, depth_series, heat_share
from sparkctl.tui.screens.run_charts import CHART_CSS, _ChartScreen

CELL_W = 10
# share of the row's best decode tok/s -> the cell's style (a heat map that reads on any theme)
HEAT = ((0.95, "bold black on green"), (0.8, "black on yellow"), (0.6, "black on dark_orange"),
        (0.0, "bold white on red"))


def heat_style(share: float | None) -> str:
    if share is None:
        return "dim"
    return next(style for low, style in HEAT if share >= low)


def _f(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def cell_lines(r: CellResult | None, best: float | None, with_goodput: bool,
               with_acceptance: bool = False) -> list[tuple[str, str]]:
    """(text, style) of one cell's lines, each CELL_W wide."""
    n = 3 + with_goodput + with_acceptance
    if r is None:
        return [(" " * CELL_W, "")] * n
    s = r.stats
    dec = _f(s.decode_tps_per_request_median) + (" DNF" if s.dnf else "")
    out = [(dec.rjust(CELL_W)[:CELL_W], heat_style(heat_share(s.decode_tps_per_request_median, best))),
           (("Σ " + _f(s.throughput_tps)).rjust(CELL_W)[:CELL_W], ""),
           # withheld below 10 requests: the n says why it is missing
           (("p90 " + (_f(s.ttft_s_p90, ".2f") + "s" if s.ttft_s_p90 is not None else f"- n={s.ttft_n}"))
            .rjust(CELL_W)[:CELL_W], "" if s.ttft_s_p90 is not None else "dim")]
    if with_goodput:
        out.append((("good " + _f(s.goodput_pct, ".0f") + ("%" if s.goodput_pct is not None else "")).rjust(CELL_W),
                    "green" if (s.goodput_pct or 0) >= 90 else "yellow"))
    if with_acceptance:
        acc = s.extra.get("spec_acceptance_pct_total")
        out.append((("acc " + _f(acc, ".0f") + ("%" if acc is not None else "")).rjust(CELL_W)[:CELL_W], "cyan"))
    return out


def render_matrix(view: SweepView, width: int) -> Text:
    out = Text()
    cols = view.columns
    models = view.models
    if not cols:
        return Text(f"sweep {view.sweep_id}: no cell runs recorded", style="yellow")
    with_goodput = any(r.stats.goodput_pct is not None for r in view.results)
    with_acceptance = any(r.stats.extra.get("spec_acceptance_pct_total") is not None for r in view.results)
    many_profiles = len({c[0] for c in cols}) > 1
    label_w = min(max(len(m) for m in models), max(8, width // 4), 28)
    per_block = max(1, (width - label_w) // (CELL_W + 1))
    best = {m: max([r.stats.decode_tps_per_request_median for r in view.results
                    if r.cell.model == m and r.stats.decode_tps_per_request_median is not None] or [0.0]) or None
            for m in models}
    for start in range(0, len(cols), per_block):
        block = cols[start:start + per_block]
        if start:
            out.append("\n")
        if many_profiles:
            out.append(" " * label_w + "".join(" " + p[:CELL_W].rjust(CELL_W) for p, _, _ in block) + "\n", style="bold")
        out.append(" " * label_w + "".join(" " + f"d{depth_label(d)} c{c}".rjust(CELL_W) for _, d, c in block) + "\n",
                   style="bold")
        for m in models:
            lines = [cell_lines(view.get(m, col), best[m], with_goodput, with_acceptance) for col in block]
            for i in range(len(lines[0])):
                label = (m if len(m) <= label_w else m[:label_w - 1] + "…") if i == 0 else ""
                out.append(label.ljust(label_w), style="bold" if i == 0 else "")
                for cell in lines:
                    text, style = cell[i]
                    out.append(" ")
                    out.append(text, style=style)
                out.append("\n")
    out.append("top: decode tok/s per request, coloured by its share of the row's best\n"
               "(green ≥95%, yellow ≥80%, orange ≥60%, red below) · Σ aggregate tok/s\n"
               "p90: TTFT p90 (- below 10 requests)" + (" · good: share of requests meeting the SLO"
                                                        if with_goodput else "")
               + ("\nacc: speculative decoding's acceptance (accepted / drafted tokens)" if with_acceptance else ""),
               style="dim")
    return out


def _bars(out: Text, rows: list[tuple[str, str, str]], style: str, heads: dict[int, str]) -> None:
    for i, (label, bar, value) in enumerate(rows):
        if i in heads:
            out.append(heads[i] + "\n", style="bold")
        out.append(label + " ")
        out.append(bar, style=style)
        out.append(" " + value + "\n")


def render_charts(view: SweepView, width: int) -> Text:
    out = Text()
    results = list(view.results)
    many_profiles = len({r.cell.profile for r in results}) > 1
    # decode tok/s against depth: one shared scale for every model and concurrency
    items: list[tuple[str, float | None]] = []
    heads: dict[int, str] = {}
    for (m, p, c), points in depth_series(results):
        heads[len(items)] = f"{m}{' ' + p if many_profiles else ''} · concurrency {c}"
        items.extend((f"d{depth_label(d)}", v) for d, v in points)
    out.append("decode tok/s per request against context depth\n", style="bold underline")
    _bars(out, bar_rows(items, width), "cyan", heads)
    # aggregate throughput and per-request latency against concurrency, side by side
    half = max(30, (width - 1) // 2)
    left: list[tuple[str, float | None]] = []
    right: list[tuple[str, float | None]] = []
    heads = {}
    for (m, p, d), points in concurrency_series(results):
        heads[len(left)] = f"{m}{' ' + p if many_profiles else ''} · depth {depth_label(d)}"
        left.extend((f"c{c}", t) for c, t, _ in points)
        right.extend(("│", lat) for _, _, lat in points)
    out.append("\naggregate tok/s │ per-request latency (ms per token), by concurrency\n",
               style="bold underline")
    lrows = bar_rows(left, half)
    rrows = bar_rows(right, width - half - 1, "ms")
    for i, ((label, bar, value), (sep, rbar, rvalue)) in enumerate(zip(lrows, rrows)):
        if i in heads:
            out.append(heads[i] + "\n", style="bold")
        out.append(label + " ")
        out.append(bar, style="green")
        out.append(" " + value + " " + sep + " ")
        out.append(rbar, style="magenta")
        out.append(" " + rvalue + "\n")
    return out


def render_sweep(view: SweepView, width: int) -> Text:
    head = Text(f"sweep {view.sweep_id}", style="bold")
    if view.engine:
        head.append(f" · {view.engine}")
    head.append(f" · {len(view.results)} cell(s)")
    if view.slo:
        head.append(f"\nSLO {view.slo}")
    not_done = [s for s in view.statuses if s and s != "FINISHED"]
    if not_done:
        head.append(f"\n{len(not_done)} cell(s) not FINISHED ({', '.join(sorted(set(not_done)))})", style="yellow")
    head.append("\n\n")
    head.append(render_matrix(view, width))
    head.append("\n\n")
    head.append(render_charts(view, width))
    return head


class SweepMatrixScreen(_ChartScreen):
    """M on the Runs screen (read the selected run's sweep) or the end of a Bench-screen sweep
    (``view`` given: nothing is read)."""

    DEFAULT_CSS = CHART_CSS.format(name="SweepMatrixScreen")
    TITLE_TEXT = "Workload sweep: matrix and charts"

    def __init__(self, store: Any = None, run_id: str | None = None, view: SweepView | None = None) -> None:
        super().__init__(store)
        self.run_id = run_id
        self.view = view

    def start(self) -> None:
        if self.view is not None:
            from sparkctl.tui.screens.run_charts import ChartLoaded

            self.post_message(ChartLoaded(self.view))
        else:
            self.load()

    def read(self) -> Any:
        from sparkctl.services.runs.sweeps import NotASweep, sweep_of_run

        try:
            return sweep_of_run(self.store, self.run_id or "")
        except NotASweep as exc:
            return str(exc)

    def render_chart(self, width: int) -> Text:
        if isinstance(self.data, str):
            return Text(self.data, style="yellow")
        return render_sweep(self.data, width)
