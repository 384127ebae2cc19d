"""Charts over recorded runs, as modal screens opened from the Runs screen.

- ``HistoryChartScreen``: one model's decode tok/s run by run (oldest at the top), each
  run's min..max with its median, labelled with engine version and date; a change of
  engine version is marked.
- ``HeadToHeadScreen``: two or more models compared (``services.runs.comparison``): the table
  with intervals and verdicts, and bars of decode tok/s and accuracies.

The rows come from sparkctl.core.charts and are re-laid out on resize, so an 80-column
terminal shows the same rows with shorter bars. Data is read in a thread worker.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Label, Static
from textual.worker import get_current_worker

from sparkctl.core.charts import MEDIAN, RangeItem, bar_rows, range_rows
from sparkctl.tui.screens.run_labels import date_label, error_line

HISTORY_RUNS = 60

CHART_CSS = """
{name} {{ align: center middle; }}
{name} #chart-box {{
    width: 96%; max-width: 140; height: auto; max-height: 90%;
    border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
}}
{name} #chart {{ height: auto; }}
{name} #chart-status {{ height: 1; color: $text-muted; }}
"""


class ChartLoaded(Message):
    def __init__(self, data: Any) -> None:
        super().__init__()
        self.data = data


class ChartFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class _ChartScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close")]
    TITLE_TEXT = ""

    def __init__(self, store: Any) -> None:
        super().__init__()
        self.store = store
        self.data: Any = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="chart-box") as box:
            box.border_title = self.TITLE_TEXT
            yield Static("", id="chart")
            yield Label("loading…", id="chart-status")

    def on_mount(self) -> None:
        self.start()

    def start(self) -> None:
        """Read the data (a subclass handed its data needs no read). One place decides:
        Textual runs every class's on_mount, so a subclass's own could not replace this."""
        self.load()

    @work(thread=True, group="chart", exclusive=True, exit_on_error=False)
    def load(self) -> None:
        try:
            data = self.read()
        except Exception as exc:  # a line, never a crash
            if not get_current_worker().is_cancelled:
                self.post_message(ChartFailed(error_line(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(ChartLoaded(data))

    def read(self) -> Any:  # blocking, in the worker
        raise NotImplementedError

    def render_chart(self, width: int) -> Text:
        raise NotImplementedError

    def status_text(self) -> str:
        """The line under the chart once the data is in: the keys that apply."""
        return "Esc closes"

    def on_chart_loaded(self, message: ChartLoaded) -> None:
        self.data = message.data
        self._draw()
        self.query_one("#chart-status", Label).update(self.status_text())

    def on_chart_failed(self, message: ChartFailed) -> None:
        self.query_one("#chart-status", Label).update(Text(f"✘ {message.error}", style="bold red"))

    def on_resize(self) -> None:
        if self.data is not None:
            self._draw()

    def _draw(self) -> None:
        chart = self.query_one("#chart", Static)
        width = max(30, (chart.size.width or self.app.size.width - 6))
        chart.update(self.render_chart(width))

    def action_close(self) -> None:
        self.dismiss(None)


class HistoryChartScreen(_ChartScreen):
    DEFAULT_CSS = CHART_CSS.format(name="HistoryChartScreen")

    def __init__(self, store: Any, model: str) -> None:
        super().__init__(store)
        self.model = model
        self.TITLE_TEXT = f"{model}: decode tok/s per run (min-max, ● median)"

    def read(self) -> list:
        from sparkctl.services.runs import list_runs

        rows = [r for r in list_runs(self.store, model=self.model, kind="bench", limit=HISTORY_RUNS)
                if r.decode_tps_median is not None]
        # one workload on one chart: the newest run's (another context or prompt is another line)
        self.left_out = [r for r in rows if rows and r.identity != rows[0].identity]
        rows = [r for r in rows if r not in self.left_out]
        from sparkctl.services.runs.genai import model_history

        # the same model's runs by the GenAI names: sparkctl's and AIPerf's in one chart
        self.genai = model_history(self.store, self.model)
        return list(reversed(rows))  # oldest first: time runs down the screen

    def render_chart(self, width: int) -> Text:
        rows = self.data or []
        if not rows:
            out = Text(f"no bench runs of {self.model} with a decode figure", style="dim")
            self._genai_chart(out, width)
            return out
        items = [RangeItem(f"{r.engine_version or '?'} {date_label(r.start_ms)[2:]}", r.decode_tps_min,
                           r.decode_tps_median, r.decode_tps_max) for r in rows]
        out = Text()
        previous = None
        for r, (label, bar, value) in zip(rows, range_rows(items, width)):
            version = (r.engine_kind, r.engine_version)
            if previous is not None and version != previous:
                out.append(f"── engine {r.engine_kind} {r.engine_version} ──\n", style="bold yellow")
            previous = version
            style = "red" if r.valid is False or r.status != "FINISHED" else ""
            out.append(label + " ", style=style or "")
            head, _, tail = bar.partition(MEDIAN)
            out.append(head, style="cyan")
            if _:
                out.append(MEDIAN, style="bold")
            out.append(tail, style="cyan")
            out.append(" " + value + "\n", style=style)
        out.append("red: invalid or not finished", style="dim")
        left_out = getattr(self, "left_out", [])
        if left_out:
            out.append(f"\nall runs of {rows[-1].identity.describe()}; {len(left_out)} run(s) of other "
                       "workloads left out", style="dim")
        self._genai_chart(out, width)
        return out

    def _genai_chart(self, out: Text, width: int) -> None:
        """Time to first chunk (p50) of every run, sparkctl's and AIPerf's, read by the one name."""
        from sparkctl.core import genai

        runs = getattr(self, "genai", None) or []
        if not runs:
            return
        out.append(f"\n\n{genai.TIME_TO_FIRST_CHUNK} p50, s (sparkctl and AIPerf runs)\n", style="bold")
        items = [(f"{g.tool} {g.what[:14]} {date_label(g.start_ms)[5:]}", g.figures.get(genai.TIME_TO_FIRST_CHUNK))
                 for g in runs]
        for (label, bar, value), g in zip(bar_rows(items, width, " s", label_width=30, spec=".3f"), runs):
            out.append(f"{label} ")
            out.append(bar, style="magenta" if g.tool == "aiperf" else "cyan")
            out.append(f" {value}\n")
        out.append("another client's runs (AIPerf) are shown, never compared statistically", style="dim")


class HeadToHeadScreen(_ChartScreen):
    """The decision on one screen: the incumbent (the lane model, whatever the marking
    order) against each contender, six figures with intervals and verdicts and one
    recommendation; then bars and the detail. When the benches do not match (another
    context, a sweep cell), it says what differs and `b` benches both at one context."""

    DEFAULT_CSS = CHART_CSS.format(name="HeadToHeadScreen")
    BINDINGS = [Binding("escape", "close", "Close"), Binding("b", "bench_matching", "Bench both at one context"),
                Binding("e", "eval_matching", "Re-run an eval at the matching context"),
                Binding("w", "full_tables", "Whole tables")]

    def __init__(self, store: Any, models: list[str], lanes: dict[str, str] | None = None,
                 any_engine: bool = False, margins: dict[str, float] | None = None,
                 limits: dict[str, float] | None = None) -> None:
        super().__init__(store)
        self.models = models
        self.lanes = lanes or {}
        self.any_engine = any_engine
        self.margins = margins
        self.limits = limits
        self.mismatch: Any = None  # the NothingToCompare that offers a matching bench
        self.reruns: list = []  # services.runs.rerun.EvalRerun: evals that would make a refused quality pair compare
        self.show_full = False  # w: the CLI's whole tables even where their lines wrap
        self.TITLE_TEXT = "Head to head: " + " vs ".join(models)

    def read(self) -> Any:
        from sparkctl.services.runs.comparison import NothingToCompare, compare_models
        from sparkctl.services.runs.rerun import reruns_of

        try:
            cmp = compare_models(self.store, self.models, any_engine=self.any_engine, lanes=self.lanes,
                                 margins=self.margins, limits=self.limits)
        except NothingToCompare as exc:
            self.mismatch = exc if exc.num_ctx else None
            return str(exc)
        self.reruns = reruns_of(self.store, cmp.evidence)
        return cmp

    def status_text(self) -> str:
        said = []
        if self.mismatch is not None:
            said.append(f"b: bench {' '.join(self.mismatch.models)} at num_ctx {self.mismatch.num_ctx}")
        if self.reruns:
            said.append(f"e: {self.reruns[0].label()}")
        return " · ".join([*said, "Esc closes"])

    def action_eval_matching(self) -> None:
        """Evaluate the contender again with the incumbent's context and sample, on the Eval
        screen, so the refused quality pair compares (as b does for benches)."""
        if not self.reruns:
            self.notify("no eval pair to re-run: the quality rows compare, or no one run can match", timeout=5)
            return
        self.dismiss(None)
        self.app.call_later(start_eval_rerun, self.app, self.reruns[0])

    def action_bench_matching(self) -> None:
        """Bench every model of the comparison at the baseline's context (forced, so a
        resident model is reloaded at it and put back after), on the Bench screen."""
        exc = self.mismatch
        if exc is None:
            self.notify("the runs already match: nothing to bench", timeout=4)
            return
        self.dismiss(None)
        self.app.call_later(self._start_bench, list(exc.models), int(exc.num_ctx))

    async def _start_bench(self, models: list[str], num_ctx: int) -> None:
        await self.app.switch_mode("bench")
        start = getattr(self.app.screen, "start_with", None)
        if callable(start):
            start(models, {"num_ctx": num_ctx, "ctx_explicit": True},
                  why=f"like for like: {' and '.join(models)} at num_ctx {num_ctx}")

    def render_chart(self, width: int) -> Text:
        from sparkctl.services.runs.decision import decision_table
        from sparkctl.services.runs.report_text import render_comparison_detail

        if isinstance(self.data, str):
            return Text(self.data, style="yellow")
        cmp = self.data
        out = Text()
        width -= 2  # the scrollbar a long chart gets after this draw takes two cells
        table = decision_table(cmp)
        full = table.text()
        # the decision first, its line standing out; one line per metric at any width (the
        # CLI's table wraps every row in two at 80 columns): abbreviated where it would not fit
        wide = self.show_full or all(len(line) <= width for line in full.splitlines()
                                     if not line.startswith(("recommendation:", "decision on")))
        lines = full.splitlines() if wide else compact_decision(table, width)
        for line in lines:
            out.append(line + "\n", style="bold" if line.startswith("recommendation:") else "")
        out.append("\n")
        names = [s.model + (f" ({s.note})" if s.note else "") for s in cmp.sides]
        out.append("decode tok/s (median)\n", style="bold")
        for label, bar, value in bar_rows([(n, s.run.decode_tps_median) for n, s in zip(names, cmp.sides)], width):
            out.append(f"{label} ")
            out.append(bar, style="cyan")
            out.append(f" {value}\n")
        for suite, title in (("gsm8k", "GSM8K strict %"), ("ifeval", "IFEval prompt strict %")):
            if any(suite in s.quality for s in cmp.sides):
                out.append(f"{title}\n", style="bold")
                values = [(n, s.quality[suite].score * 100 if suite in s.quality else None)
                          for n, s in zip(names, cmp.sides)]
                for label, bar, value in bar_rows(values, width):
                    out.append(f"{label} ")
                    out.append(bar, style="green")
                    out.append(f" {value}\n")
        out.append("\n")
        if wide:
            out.append(render_comparison_detail(cmp))  # the same table and verdicts as `sparkctl compare`
        else:
            out.append("w: the whole tables, as `sparkctl compare` prints them (lines wrap at this width)",
                       style="dim")
        return out

    def action_full_tables(self) -> None:
        """w: the CLI's whole tables here, wrapped (or back to one line per metric)."""
        self.show_full = not self.show_full
        if self.data is not None:
            self._draw()


async def start_eval_rerun(app, rerun) -> None:
    """Open the Eval screen and run `rerun` (services.runs.rerun.EvalRerun) there."""
    await app.switch_mode("eval")
    start = getattr(app.screen, "start_with", None)
    if callable(start):
        start([rerun.model], rerun.suite, rerun.overrides(),
              why=f"like for like: {rerun.label()} ({rerun.differs})")


# how the decision's metrics are called where a line has ~75 cells
SHORT_METRIC = {"decode tok/s": "decode", "TTFT s": "TTFT s", "GSM8K strict %": "GSM8K %",
                "IFEval prompt strict %": "IFEval %", "resident GiB": "mem GiB", "J/token": "J/token"}


def compact_decision(table, width: int) -> list[str]:
    """A DecisionTable (services.runs.decision) in lines of at most `width` cells, one per
    metric: the two models named above the table as A and B, the figures without their n,
    the verdict cut with "…" where it must be and then given whole under the table, with
    each row's note. The recommendation and the heading are prose: they wrap."""
    import re

    out = [f"decision on {table.engine} ({table.workload})"]
    for d in table.decisions:
        who = f"{d.baseline} (incumbent)" if table.incumbent else d.baseline
        out += ["", f"A = {who} · B = {d.contender}"]
        cells = [[SHORT_METRIC.get(r.metric, r.metric), re.sub(r" \(.*\)$", "", r.baseline),
                  re.sub(r" \(.*\)$", "", r.contender), r.difference.replace(" (absolute: baseline ~0)", ""),
                  r.verdict] for r in d.rows]
        heads = ["", "A", "B", "B-A [95% CI]", "verdict"]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads[:4])]
        room = max(8, width - sum(widths) - 2 * 4)
        out.append("  ".join([heads[0].ljust(widths[0]), *(heads[i].rjust(widths[i]) for i in (1, 2, 3)), heads[4]]))
        said: list[str] = []
        for c, r in zip(cells, d.rows):
            verdict = c[4] if len(c[4]) <= room else c[4][:room - 1] + "…"
            out.append("  ".join([c[0].ljust(widths[0]), *(c[i].rjust(widths[i]) for i in (1, 2, 3)), verdict]))
            whole = c[4] if verdict != c[4] else ""
            extra = "; ".join(x for x in (whole, r.note) if x)
            if extra:
                said.append(f"  {c[0]}: {extra}")
        out += said
        out.append(d.recommendation)
    return out


class RegressionsScreen(_ChartScreen):
    """`sparkctl regressions` in the TUI: each model's latest bench against its last one on
    the previous engine version, flagged drops first, with a bar of each change."""

    DEFAULT_CSS = CHART_CSS.format(name="RegressionsScreen")
    TITLE_TEXT = "Engine-change regressions (decode tok/s, latest vs previous engine version)"

    def read(self) -> Any:
        from sparkctl.services.runs.regressions import regression_report

        report = regression_report(self.store, margins=self.app.config.promote.quality_margin_pp)
        report.rows.sort(key=lambda r: (not r.result.flagged, r.model))
        return report

    def render_chart(self, width: int) -> Text:
        from sparkctl.services.runs.report_text import render_regressions

        rows = self.data.rows if self.data is not None else []
        out = Text()
        if rows:
            out.append("drop in decode tok/s (%)\n", style="bold")
            drops = [(f"{r.model} {r.before.engine_version}→{r.after.engine_version}",
                      -r.result.change_pct if r.result.change_pct is not None and r.result.change_pct < 0 else 0.0)
                     for r in rows]
            for (label, bar, value), r in zip(bar_rows(drops, width, "%"), rows):
                out.append(f"{label} ")
                out.append(bar, style="bold red" if r.result.flagged else "green")
                out.append(f" {value}\n")
            out.append("\n")
        out.append(render_regressions(rows, self.data.notes if self.data is not None else (),
                                      self.data.quality if self.data is not None else ()))
        return out
