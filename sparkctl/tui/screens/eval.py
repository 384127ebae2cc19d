"""The Eval screen: pick models and a suite, watch a pass/fail grid fill in, read the scores.

The runner (services/evals) does the sampling, timing, scoring and recording, and batches
what it streams to ~10 updates a second per item; this screen turns its events into
messages and paints them: a cell per item, a stats line (done/left, running accuracy with
its 95% interval, DNF, ETA), the followed item's thinking (dimmed) and answer in bounded
views with its token count climbing, and a table of the suite's metrics at the end.
The suite file is read in a thread; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import gc

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.suggester import Suggester
from textual.widget import Widget
from textual.widgets import Button, DataTable, Header, Input, Label, Select, Switch

from sparkctl.services.bench import Notice, Phase
from sparkctl.services.evals import (
    SUITE_NAMES,
    EvalFinished,
    EvalModelDone,
    EvalRunner,
    EvalSettings,
    EvalStarted,
    ItemDone,
    ItemLive,
    ItemStarted,
    SuiteError,
    load_suite,
)
from sparkctl.tui.widgets.footer import KeysFooter
from sparkctl.tui.widgets.item_grid import LEGEND, PENDING, FLIGHT, ItemGrid, state_of
from sparkctl.tui.widgets.stream_tail import StreamTail

LOG_LINES = 2000  # per view: the followed item's text, bounded however long it runs


class EvalEvent(Message):
    """One runner event (None: the run's worker has ended)."""

    def __init__(self, event) -> None:
        super().__init__()
        self.event = event


class LocalModelsListed(Message):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names


class LastWordSuggester(Suggester):
    """Completes the word being typed from the engine's local models (several models are
    typed space-separated, so the whole value is not one name)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.names: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        last = value.rsplit(" ", 1)[-1]
        if not last:
            return None
        for name in self.names:
            if name.startswith(last) and name != last:
                return value[: len(value) - len(last)] + name
        return None


def duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}"


class EvalStats(Widget):
    """Two fixed lines (the run so far; the item being followed): an update repaints this
    widget alone, never the screen's layout."""

    DEFAULT_CSS = """
    EvalStats { height: 2; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.summary = "no run yet"
        self.current = ""

    def set(self, summary: str | None = None, current: str | None = None) -> None:
        changed = False
        if summary is not None and summary != self.summary:
            self.summary, changed = summary, True
        if current is not None and current != self.current:
            self.current, changed = current, True
        if changed:
            self.refresh()

    def render(self) -> Text:
        # one line each, cut rather than wrapped: the layout never moves under the grid
        width = max(1, self.content_size.width)
        lines = [Text(self.summary, style="bold"), Text(self.current, style="dim")]
        for line in lines:
            line.truncate(width, overflow="ellipsis")
        return Text("\n").join(lines)


class EvalScreen(Screen):
    BINDINGS = [
        ("ctrl+r", "start", "Run eval"),
        ("escape", "stop", "Stop eval"),
    ]
    DEFAULT_CSS = """
    #eval-form, #eval-opts { height: auto; padding: 0 1; }
    #eval-form #models { width: 1fr; }
    #eval-form #suite { width: 16; }
    #eval-opts Label { padding: 1 0 0 1; }
    #eval-opts Input { padding: 0 1; }
    #eval-opts #n { width: 8; }
    #eval-opts #seed { width: 10; }
    #eval-opts #timeout { width: 10; }
    #eval-opts #concurrency { width: 6; }
    #eval-phase { padding: 0 1; height: 1; color: $text-muted; }
    #eval-streams { height: 1fr; min-height: 4; }
    #eval-streams > Vertical { border: round $panel-lighten-2; }
    #eval-thinking-box { width: 2fr; display: none; }
    #eval-streams.thinking #eval-thinking-box { display: block; }
    #eval-answer-box { width: 3fr; }
    #eval-thinking { color: $text-muted; text-style: italic; }
    #results { height: auto; max-height: 8; display: none; }
    #results.shown { display: block; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._suggester = LastWordSuggester()
        self._runs: dict[str, object] = {}  # model -> ModelEval, as the runner reported it
        self._models: list[str] = []
        self._tally: dict[str, object] = {}
        self._eta: dict[str, float | None] = {}
        self._in_flight: dict[str, tuple[str, int]] = {}  # item id -> (model, position)
        self._following: str | None = None  # the item whose text streams into the views
        self._thinking_shown: str | None = None  # the item whose header the thinking view has
        self._suite = ""

    def compose(self) -> ComposeResult:
        e = self.app.config.eval
        yield Header()
        with Horizontal(id="eval-form"):
            yield Input(placeholder="models to evaluate, e.g. qwen3:8b llama3.2:3b", id="models",
                        suggester=self._suggester)
            yield Select([(name, name) for name in SUITE_NAMES], value=SUITE_NAMES[0], allow_blank=False,
                         id="suite")
            yield Button("Run", id="run", variant="primary")
        with Horizontal(id="eval-opts"):
            yield Label("n")
            yield Input(value="all" if e.n is None else str(e.n), id="n")
            yield Label("seed")
            yield Input(value=str(e.seed), id="seed", type="integer")
            yield Label("timeout s")
            yield Input(value=f"{e.timeout_s:g}", id="timeout", type="number")
            yield Label("conc.")
            yield Input(value=str(e.concurrency), id="concurrency", type="integer")
            yield Label("think")
            yield Switch(value=e.think, id="think")
        yield Label("", id="eval-phase")
        yield EvalStats(id="stats")
        yield ItemGrid(id="grid")
        with Horizontal(id="eval-streams"):
            with Vertical(id="eval-thinking-box") as v:
                v.border_title = "thinking"
                yield StreamTail(id="eval-thinking", max_lines=LOG_LINES)
            with Vertical(id="eval-answer-box") as v:
                v.border_title = "answer"
                yield StreamTail(id="eval-answer", max_lines=LOG_LINES)
        yield DataTable(id="results", zebra_stripes=True, cursor_type="row")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._phase("name models (→ completes a local one), pick a suite; Run or ctrl+r starts, escape stops")
        self.list_local_models()

    # ---- the engine's local models (completion for the models field) ----------------------

    @work(group="eval-models", exclusive=True, exit_on_error=False)
    async def list_local_models(self) -> None:
        try:
            models = await self.app.engine.tags()
        except Exception:  # an engine away: typing names still works
            return
        self.post_message(LocalModelsListed(sorted(m.name for m in models)))

    def on_local_models_listed(self, message: LocalModelsListed) -> None:
        self._suggester.names = message.names
        if message.names:
            shown = " ".join(message.names[:4]) + (" …" if len(message.names) > 4 else "")
            self.query_one("#models", Input).placeholder = f"models to evaluate (local: {shown})"

    # ---- starting and stopping -------------------------------------------------------------

    def _eval_running(self) -> bool:
        return any(w.group == "eval" and not w.is_finished for w in self.workers)

    @on(Button.Pressed, "#run")
    @on(Input.Submitted)
    def action_start(self) -> None:
        if self._eval_running():
            # an exclusive worker would cancel the running eval: never by a stray Enter
            self.notify("an eval is running; escape stops it", severity="warning")
            return
        settings = self._settings()
        if settings is None:
            return
        models = list(dict.fromkeys(self.query_one("#models", Input).value.split()))
        self._launch(models, settings)

    def _settings(self) -> EvalSettings | None:
        """The form's choices, checked; None (and the user told why) when one is wrong."""
        from sparkctl.core.names import InvalidModelName, validate_model_name

        models = self.query_one("#models", Input).value.split()
        if not models:
            return self._refuse("name at least one model to evaluate")
        for m in models:
            try:
                validate_model_name(m)
            except InvalidModelName as exc:
                return self._refuse(str(exc))
        value = lambda wid: self.query_one(wid, Input).value.strip()  # noqa: E731
        n_text = value("#n").lower()
        n: int | str
        if n_text == "all":
            n = "all"
        else:
            try:
                n = int(n_text)
            except ValueError:
                return self._refuse(f"n must be a whole number or 'all', not {n_text!r}")
            if n < 1:
                return self._refuse(f"n must be at least 1, not {n}")
        try:
            seed = int(value("#seed"))
        except ValueError:
            return self._refuse("seed must be a whole number")
        try:
            timeout = float(value("#timeout"))
            if not timeout > 0:
                raise ValueError
        except ValueError:
            return self._refuse("timeout must be a number of seconds above 0")
        try:
            concurrency = int(value("#concurrency"))
            if concurrency < 1:
                raise ValueError
        except ValueError:
            return self._refuse("concurrency must be a whole number >= 1")
        suite = self.query_one("#suite", Select).value
        return EvalSettings.from_config(self.app.config, str(suite), n=n, seed=seed, timeout_s=timeout,
                                        concurrency=concurrency, think=self.query_one("#think", Switch).value)

    def _refuse(self, text: str) -> None:
        self.notify(text, severity="error")
        return None

    def _launch(self, models: list[str], settings: EvalSettings) -> None:
        self._models = models
        self._suite = settings.suite
        self._runs, self._tally, self._eta, self._in_flight = {}, {}, {}, {}
        self._following = self._thinking_shown = None
        self.query_one(ItemGrid).clear()
        for view in self.query(StreamTail):
            view.clear()
        self.query_one("#eval-streams").remove_class("thinking")
        results = self.query_one("#results", DataTable)
        results.clear(columns=True)
        results.remove_class("shown")
        self.query_one(EvalStats).set(summary=f"{settings.suite}: reading the suite…", current="")
        self.query_one("#run", Button).disabled = True
        gc.freeze()  # as the bench screen: long-lived objects out of the collector's view
        self.run_eval(models, settings)

    def action_stop(self) -> None:
        if self.workers.cancel_group(self, "eval"):
            self.notify("eval stopped: putting lane models back and recording the runs KILLED "
                        "with the items that finished")

    @work(group="eval", exclusive=True, exit_on_error=False)
    async def run_eval(self, models: list[str], settings: EvalSettings) -> None:
        post = lambda ev: self.post_message(EvalEvent(ev))  # noqa: E731
        try:
            try:
                suite = await asyncio.to_thread(load_suite, self.app.config, settings.suite)
            except SuiteError as exc:
                post(Phase(f"no suite: {exc}"))
                self.app.notify(str(exc), severity="error", timeout=15)
                return
            try:
                runner = EvalRunner(self.app.config, self.app.engine, self.app.probes, settings, suite,
                                    sink=post, recorder=self.app.recorder,
                                    journal=getattr(self.app, "journal", None))
            except ValueError as exc:  # n larger than the suite
                post(Phase(f"n: {exc}"))
                self.app.notify(f"n: {exc}", severity="error", timeout=10)
                return
            post(Phase(f"{suite.spec.title}: {len(runner.item_ids)} of {len(suite.items)} items "
                       f"(seed {settings.seed})"))
            await runner.run(models)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # refused, engine gone, busy: say so, keep the app alive
            message = getattr(exc, "message", None) or str(exc)
            post(Phase(f"eval failed: {message}"))
            self.app.notify(f"eval failed: {message}", severity="error", timeout=10)
        finally:
            post(None)
            count = getattr(self.app, "count_pending", None)
            if callable(count):
                count()  # a run MLflow did not take waits in the spool: the header says so

    # ---- events from the runner ------------------------------------------------------------

    def on_eval_event(self, message: EvalEvent) -> None:
        ev = message.event
        grid = self.query_one(ItemGrid)
        if ev is None:
            self.query_one("#run", Button).disabled = False
            if self._runs:
                self._show_results()
        elif isinstance(ev, Phase):
            self._phase(ev.text)
        elif isinstance(ev, Notice):
            self._phase(ev.text)
            error = ev.text.startswith("ERROR")
            self.app.notify(ev.text, severity="error" if error else "warning", timeout=20 if error else 8)
        elif isinstance(ev, EvalStarted):
            grid.start(ev.model, len(ev.item_ids))
            self._tally[ev.model] = None
            self._phase(f"{ev.model}: {len(ev.item_ids)} {ev.suite} items · {LEGEND}")
            self._stats(ev.model)
        elif isinstance(ev, ItemStarted):
            self._in_flight[ev.item_id] = (ev.model, ev.position)
            grid.set(ev.model, ev.position, FLIGHT)
            if self._following is None:
                self._follow(ev.item_id)
        elif isinstance(ev, ItemLive):
            if self._following is None or self._following not in self._in_flight:
                self._follow(ev.item_id)
            if ev.item_id == self._following:
                if ev.thinking:
                    thinking = self.query_one("#eval-thinking", StreamTail)
                    if self._thinking_shown != ev.item_id:  # headed only where there is thinking
                        self._thinking_shown = ev.item_id
                        self.query_one("#eval-streams").add_class("thinking")  # shown once there is some
                        thinking.write_line(self._header(ev.item_id))
                    thinking.append(ev.thinking)
                if ev.answer:
                    self.query_one("#eval-answer", StreamTail).append(ev.answer)
                _model, pos = self._in_flight.get(ev.item_id, (ev.model, 0))
                self.query_one(EvalStats).set(
                    current=f"item {ev.item_id} (#{pos + 1}): {ev.tokens} tokens · {ev.elapsed_s:.1f} s")
        elif isinstance(ev, ItemDone):
            r = ev.result
            self._in_flight.pop(r.item_id, None)
            grid.set(ev.model, r.position, state_of(r))
            self._tally[ev.model], self._eta[ev.model] = ev.tally, ev.eta_s
            self._stats(ev.model)
            if r.item_id == self._following:
                self._following = None
                answer = self.query_one("#eval-answer", StreamTail)
                tokens = r.eval_count if r.eval_count is not None else r.client_tokens
                if r.dnf:
                    answer.write_line(f"[DNF after {r.seconds:.0f} s, {r.client_tokens} tokens]")
                elif r.error:
                    answer.write_line(f"[error: {r.error}]")
                else:
                    answer.write_line(f"[{'pass' if r.passed else 'wrong'} · {tokens} tokens · {r.seconds:.1f} s]")
                self.query_one(EvalStats).set(current=f"item {r.item_id}: {state_of(r)} after {r.seconds:.1f} s")
        elif isinstance(ev, EvalModelDone):
            run = ev.run
            self._runs[run.model] = run
            # the run's own record wins: cells left "running" by a stop go back to "to do"
            grid.load(run.model, [state_of(run.items[i]) if i in run.items else PENDING for i in run.item_ids])
            if run.tally is not None:
                self._tally[run.model] = run.tally
                self._stats(run.model, status=run.status)
        elif isinstance(ev, EvalFinished):
            self._runs = {r.model: r for r in ev.runs}
            self._show_results()

    def _phase(self, text: str) -> None:
        self.query_one("#eval-phase", Label).update(text)

    def _header(self, item_id: str) -> str:
        model, pos = self._in_flight.get(item_id, ("?", 0))
        return f"── {model} · item {item_id} (#{pos + 1}) ──"

    def _follow(self, item_id: str) -> None:
        self._following = item_id
        self.query_one("#eval-answer", StreamTail).write_line(self._header(item_id))

    def _stats(self, model: str, status: str = "") -> None:
        t = self._tally.get(model)
        which = ""
        if len(self._models) > 1 and model in self._models:
            which = f" ({self._models.index(model) + 1}/{len(self._models)})"
        if t is None:
            self.query_one(EvalStats).set(summary=f"{model}{which}: starting")
            return
        acc, ci = t.accuracy()
        acc_text = "-" if acc is None else f"{acc * 100:.1f}% [95% CI {ci[0] * 100:.1f}–{ci[1] * 100:.1f}]"
        eta = self._eta.get(model)
        parts = [f"{model}{which} {t.done}/{t.total}", f"{t.total - t.done} left", f"acc {acc_text}",
                 f"DNF {t.dnf}"]
        if t.errors:
            parts.append(f"errors {t.errors}")
        if status and status != "FINISHED":
            parts.append(status)
        elif eta is not None and t.done < t.total:
            parts.append(f"ETA {duration(eta)}")
        self.query_one(EvalStats).set(summary=" · ".join(parts))

    def _show_results(self) -> None:
        from sparkctl.core.suites.tally import SUITE_METRICS

        table = self.query_one("#results", DataTable)
        table.clear(columns=True)
        suite = self._suite
        metrics = list(SUITE_METRICS[suite])
        heads = [m.replace(f"{suite}_", "") for m in metrics]
        # the headline first (80 columns show it without scrolling), then the rest
        table.add_columns("Model", "items", "DNF", *(f"{h} %" for h in heads), "95% CI",
                          *(f"{h} ans. %" for h in heads), "err", "status", "MLflow")
        for run in self._runs.values():
            s = run.summary
            lo, hi = s.get(f"{metrics[0]}_ci_low"), s.get(f"{metrics[0]}_ci_high")
            ci = "-" if lo is None or hi is None else f"{lo * 100:.1f}–{hi * 100:.1f}"
            if run.guard.invalid:
                status = Text(f"{run.status} INVALID", style="bold red")
            elif run.status == "FINISHED":
                status = Text(run.status, style="green")
            else:
                status = Text(run.status, style="bold yellow")
            dnf = int(s.get("dnf_count", 0))
            table.add_row(
                run.model, str(int(s.get("items", 0))), Text(str(dnf), style="bold magenta" if dnf else ""),
                *(pct(s.get(m)) for m in metrics), ci, *(pct(s.get(f"{m}_answered")) for m in metrics),
                str(int(s.get("error_count", 0))), status,
                run.run_id[:8] if run.run_id else "spooled" if run.sync_message else "-",
            )
        table.add_class("shown")
        notes = []
        for run in self._runs.values():
            notes.extend(f"{run.model}: {m}" for m in run.guard.invalid + run.guard.flags)
            if run.sync_message and not run.run_id:
                notes.append(f"{run.model}: {run.sync_message}")
        self._phase("; ".join(notes) if notes else f"eval finished · {LEGEND}")
