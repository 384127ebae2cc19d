"""The Eval screen: pick models and a suite, watch a pass/fail grid fill in, read the scores.

The runner (services/evals) does the sampling, timing, scoring and recording, and batches
what it streams to ~10 updates a second per item; this screen turns its events into
messages and paints them: a cell per item, a stats line (done/left, running accuracy with
its 95% interval, DNF, ETA), the followed item's thinking (dimmed) and answer in bounded
views with its token count climbing, and a table of the suite's metrics at the end.
The suite file is read in a thread; nothing here blocks the event loop. A line under the
options says which copy of the suite an eval would read (shipped, pulled, a chosen directory)
and its sha256; "Suites dir" points at a directory of one's own (as `sparkctl suites path`).
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, DataTable, Header, Input, Label, Select, Switch

from sparkctl.services.bench import Notice, Phase
from sparkctl.services.evals import (
    SUITE_NAMES,
    CopyState,
    EvalFinished,
    EvalModelDone,
    EvalRunner,
    EvalSettings,
    EvalStarted,
    ItemDone,
    ItemLive,
    ItemStarted,
    SuiteError,
    clear_location,
    copy_state,
    load_suite,
    set_location,
)
from sparkctl.tui.widgets.footer import KeysFooter
from sparkctl.tui.widgets.fields import Field, ModelField, RowTable
from sparkctl.tui.widgets.item_grid import LEGEND, PENDING, FLIGHT, ItemGrid, state_of
from sparkctl.tui.widgets.notes import Note, NotesPanel, NotesScreen
from sparkctl.tui.widgets.stream_tail import StreamTail
from sparkctl.tui.wording import tui_words

LOG_LINES = 2000  # per view: the followed item's text, bounded however long it runs
WIDE = 110  # columns from which the results table shows every column


class EvalEvent(Message):
    """One runner event (None: the run's worker has ended)."""

    def __init__(self, event) -> None:
        super().__init__()
        self.event = event


class SuiteCopyRead(Message):
    """Which copy of the selected suite an eval would read (copy_state, from a worker)."""

    def __init__(self, state: CopyState) -> None:
        super().__init__()
        self.state = state


@dataclass(frozen=True)
class Failed:
    """The eval could not run or ended in an error: a short phase line and the whole text."""

    phase: str
    text: str


class Scored(Message):
    """`eval score` of a file ended: its summary, or why it could not be scored."""

    def __init__(self, path, suite: str, result=None, error: str = "") -> None:
        super().__init__()
        self.path = path
        self.suite = suite
        self.result = result  # services.evals.rescore.Rescored
        self.error = error


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
        Binding("ctrl+r", "start", "Run"),
        Binding("escape", "stop", "Stop"),
        Binding("s", "score_file", "Score a file"),
        Binding("n", "notes", "Notes"),
    ]
    # nothing typed into by accident: ?, q and d are keys here until a field is chosen
    AUTO_FOCUS = ""
    DEFAULT_CSS = """
    #eval-form { height: auto; padding: 0 1; }
    #eval-opts { height: 1; padding: 0 1; }
    #eval-form #models { width: 1fr; }
    #eval-form #suite { width: 16; }
    #eval-opts Label { padding: 0 1 0 1; }
    #eval-opts Switch { border: none; padding: 0; height: 1; width: 6; }
    #eval-opts #n { width: 5; }
    #eval-opts #seed { width: 6; }
    #eval-opts #timeout { width: 5; }
    #eval-opts #concurrency { width: 3; }
    #eval-opts #num_ctx { width: 10; }
    #eval-phase { padding: 0 1; height: 1; color: $text-muted; }
    #eval-copy { height: 1; padding: 0 1; }
    #eval-copy #suite-copy { width: 1fr; color: $text-muted; }
    #eval-copy #suite-copy.differs { color: $warning; }
    #eval-copy #suite-copy.missing { color: $error; }
    #eval-streams { height: 1fr; min-height: 4; }
    EvalScreen.-short #eval-streams { min-height: 0; }  /* results and notes first once there are some */
    #eval-streams > Vertical { border: round $panel-lighten-2; }
    #eval-thinking-box { width: 2fr; display: none; }
    #eval-streams.thinking #eval-thinking-box { display: block; }
    #eval-answer-box { width: 3fr; }
    #eval-thinking { color: $text-muted; text-style: italic; }
    #results { height: auto; max-height: 8; display: none; }
    #results.shown { display: block; }
    EvalScreen.-short #results { max-height: 4; }
    #results.-narrow { overflow-x: hidden; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._said: list[Note] = []  # refusals, failures, notices: on screen, not only in a toast
        self._run_notes: list[Note] = []  # the runs' guard flags, from their record
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
            yield ModelField(placeholder="e.g. qwen3:8b llama3.2:3b", id="models")
            yield Select([(name, name) for name in SUITE_NAMES], value=SUITE_NAMES[0], allow_blank=False,
                         id="suite")
            yield Button("Run", id="run", variant="primary")
        with Horizontal(id="eval-opts"):
            yield Label("n")
            yield Field(value="all" if e.n is None else str(e.n), id="n", compact=True)
            yield Label("seed")
            yield Field(value=str(e.seed), id="seed", type="integer", compact=True)
            yield Label("timeout")
            yield Field(value=f"{e.timeout_s:g}", id="timeout", type="number", compact=True)
            yield Label("conc.")
            yield Field(value=str(e.concurrency), id="concurrency", type="integer", compact=True)
            # empty: one context for every model, chosen for them (its value in the placeholder)
            yield Label("num_ctx")
            yield Field(placeholder="auto", id="num_ctx", compact=True,
                        tooltip="num_ctx for every model; empty: the context a resident lane model among them "
                                "runs at, else the bench's configured num_ctx")
            yield Label("think")
            yield Switch(value=e.think, id="think")
        with Horizontal(id="eval-copy"):
            yield Label("", id="suite-copy", markup=False)
            yield Button("Suites dir…", id="suites-dir", compact=True)
        yield Label("", id="eval-phase", markup=False)  # errors quote "[eval] suites_dir": text, not markup
        yield EvalStats(id="stats")
        yield ItemGrid(id="grid")
        with Horizontal(id="eval-streams"):
            with Vertical(id="eval-thinking-box") as v:
                v.border_title = "thinking"
                yield StreamTail(id="eval-thinking", max_lines=LOG_LINES)
            with Vertical(id="eval-answer-box") as v:
                v.border_title = "answer"
                yield StreamTail(id="eval-answer", max_lines=LOG_LINES)
        yield RowTable(id="results", zebra_stripes=True, cursor_type="row")
        yield NotesPanel(id="eval-notes")
        yield KeysFooter()

    def on_mount(self) -> None:
        self._phase("tab to the models (→ completes a local one), pick a suite; Run or ctrl+r starts")
        self.query_one("#eval-notes", NotesPanel).hint = "n: all notes"
        self._refresh_copy()
        self._show_ctx()
        # the context an eval would choose moves with what is resident: the field's hint follows
        self.watch(self.app, "report", lambda _r: self._show_ctx(), init=False)

    @on(Input.Changed, "#models")
    def _show_ctx(self) -> None:
        """The empty num_ctx field says the context the models would run at (the runner's
        choice, services/bench/context.py), before the run."""
        from sparkctl.tui.context_hint import predicted_context

        models = self.query_one("#models", Input).value.split()
        choice = predicted_context(self.app, models, None)
        field = self.query_one("#num_ctx", Input)
        hint = f"auto {choice.num_ctx}"
        if field.placeholder != hint:
            field.placeholder = hint
            field.tooltip = (f"num_ctx for every model; empty: {choice.num_ctx}"
                             + (f" ({choice.why})" if choice.why else "")
                             + ", the context a resident lane model among them runs at, else the bench's "
                               "configured num_ctx")

    # ---- which copy of the suite (shipped, pulled, a chosen directory) --------------------

    def _refresh_copy(self) -> None:
        self.read_copy(str(self.query_one("#suite", Select).value))

    @work(thread=True, group="eval-copy", exclusive=True, exit_on_error=False)
    def read_copy(self, suite: str) -> None:
        try:
            state = copy_state(self.app.config, suite)
        except SuiteError as exc:  # an unknown name cannot come from the Select; say it anyway
            self.app.call_from_thread(self._phase, str(exc))
            return
        self.post_message(SuiteCopyRead(state))

    def on_suite_copy_read(self, message: SuiteCopyRead) -> None:
        if str(self.query_one("#suite", Select).value) != message.state.suite:
            return  # the Select moved on; its own read follows
        label = self.query_one("#suite-copy", Label)
        label.update(message.state.summary)
        label.set_class(message.state.state == "differs", "differs")
        label.set_class(message.state.sha256 is None, "missing")
        label.tooltip = str(message.state.copy.path)

    @on(Select.Changed, "#suite")
    def _suite_changed(self) -> None:
        self._refresh_copy()

    @on(Button.Pressed, "#suites-dir")
    def _choose_dir(self) -> None:
        from sparkctl.tui.widgets.suites_dialog import SuitesDirDialog

        cfg = self.app.config
        overridden = f"[eval] suites_dir in {cfg.source}" if cfg.eval.suites_dir else ""
        self.app.push_screen(SuitesDirDialog(overridden_by=overridden), self._dir_chosen)

    def _dir_chosen(self, answer: str | None) -> None:
        if answer is not None:
            self.apply_dir(answer)

    @work(thread=True, group="eval-copy-dir", exclusive=True, exit_on_error=False)
    def apply_dir(self, folder: str) -> None:
        """`sparkctl suites path DIR` (or `--reset` for ""), then the copy line again."""
        from pathlib import Path

        try:
            if folder:
                set_location(Path(folder))
                said = f"suites are now read from {Path(folder).expanduser().resolve()}"
            else:
                said = ("back to the pulled or shipped copy" if clear_location()
                        else "no directory was chosen: the pulled or shipped copy is read")
        except SuiteError as exc:
            self.app.call_from_thread(self.app.notify, str(exc), severity="error", timeout=10)
            return
        self.app.call_from_thread(self.app.notify, said, timeout=6)
        self.app.call_from_thread(self._refresh_copy)

    # ---- starting and stopping -------------------------------------------------------------

    def _eval_running(self) -> bool:
        return any(w.group == "eval" and not w.is_finished for w in self.workers)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the footer shows what applies now: Run or Stop, Notes while there are some
        if action in ("start", "stop"):
            return self._eval_running() == (action == "stop")
        if action == "notes":
            return bool(self.notes)
        return True

    def on_worker_state_changed(self, event) -> None:
        if event.worker.group == "eval":
            self.refresh_bindings()

    @on(Input.Submitted)
    def _field_left(self) -> None:
        """Enter leaves a field (widgets/fields.py); it never starts an eval."""
        if not self._eval_running():
            self._phase("ctrl+r or Run starts the eval")

    @property
    def notes(self) -> list[Note]:
        return [*self._said, *self._run_notes]

    def _note(self, text: str, level: str = "error", *, keep: bool = False, first: bool = False) -> None:
        """Say it on the screen (the notes panel, whole), not only in a toast; `first`: above
        the notes so far (why the run ended comes before what was said on the way)."""
        if not keep:
            self._said = [Note(text, level)]
        else:
            self._said = [Note(text, level), *self._said] if first else [*self._said, Note(text, level)]
        self._show_notes()

    def _show_notes(self) -> None:
        self.query_one("#eval-notes", NotesPanel).show(self.notes)
        self.refresh_bindings()

    def action_notes(self) -> None:
        self.app.push_screen(NotesScreen("Notes", self.notes))

    @on(DataTable.RowSelected, "#results")
    def _row_selected(self) -> None:
        if self.notes:
            self.action_notes()

    @on(Button.Pressed, "#run")
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

        field = self.query_one("#models", ModelField)
        models = field.value.split()
        if not models:
            return self._refuse("name at least one model to evaluate")
        try:
            models = [validate_model_name(m) for m in models]  # parsed here, passed on as they are
        except InvalidModelName as exc:
            return self._refuse(str(exc))
        unknown = field.unknown(models)
        if unknown:
            return self._refuse(unknown)
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
        from sparkctl.tui.context_hint import ctx_field

        try:
            num_ctx = ctx_field(value("#num_ctx"))
        except ValueError as exc:
            return self._refuse(str(exc))
        suite = self.query_one("#suite", Select).value
        return EvalSettings.from_config(self.app.config, str(suite), n=n, seed=seed, timeout_s=timeout,
                                        concurrency=concurrency, think=self.query_one("#think", Switch).value,
                                        num_ctx=num_ctx)

    def start_with(self, models: list[str], suite: str, overrides: dict, why: str = "") -> None:
        """Start an eval of `models` with settings other than the form's (a re-run that
        repeats another run's context and sample, from the head to head or the promote
        dialog); the form shows them and the phase line says why."""
        if self._eval_running():
            self.notify("an eval is running; escape stops it", severity="warning")
            return
        settings = EvalSettings.from_config(self.app.config, suite, **overrides)
        q = self.query_one
        q("#models", Input).value = " ".join(models)
        q("#suite", Select).value = suite
        q("#n", Input).value = "all" if settings.n is None else str(settings.n)
        q("#seed", Input).value = str(settings.seed)
        q("#num_ctx", Input).value = str(settings.num_ctx) if settings.ctx_explicit else ""
        q("#think", Switch).value = settings.think
        self._launch(list(dict.fromkeys(models)), settings)
        if why:
            self._phase(why)
            self.notify(why, timeout=10)

    def _refuse(self, text: str) -> None:
        self._phase(f"not started: {text}")
        self._note(text)
        self.app.remember(text, "error")  # the notes hold it whole: no toast over them
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
        self._said, self._run_notes = [], []
        self._show_notes()
        self.query_one(EvalStats).set(summary=f"{settings.suite}: reading the suite…", current="")
        self.query_one("#run", Button).disabled = True
        self.set_focus(None)  # the footer's keys (escape stops) work while it runs
        gc.freeze()  # as the bench screen: long-lived objects out of the collector's view
        self.run_eval(models, settings)

    def action_stop(self) -> None:
        """Escape while it runs (a field that has the focus takes escape first: it leaves)."""
        if self.workers.cancel_group(self, "eval"):
            self.notify("eval stopped: putting lane models back and recording the runs KILLED "
                        "with the items that finished")

    @work(group="eval", exclusive=True, exit_on_error=False)
    async def run_eval(self, models: list[str], settings: EvalSettings) -> None:
        from sparkctl.services.evals.engine import engine_for_eval

        post = lambda ev: self.post_message(EvalEvent(ev))  # noqa: E731

        def failed(phase: str, text: str) -> None:
            post(Failed(phase, text))
            self.app.remember(text, "error")

        # the dashboard's engine gives up on a silent stream sooner than a queued item may wait
        engine = engine_for_eval(self.app.engine, settings.timeout_s, settings.concurrency)
        try:
            try:
                suite = await asyncio.to_thread(load_suite, self.app.config, settings.suite)
            except SuiteError as exc:
                failed(f"no suite: {exc}", str(exc))
                return
            try:
                runner = EvalRunner(self.app.config, engine, self.app.probes, settings, suite,
                                    sink=post, recorder=self.app.recorder,
                                    journal=getattr(self.app, "journal", None))
            except ValueError as exc:  # n larger than the suite
                failed(f"n: {exc}", f"n: {exc}")
                return
            post(Phase(f"{suite.spec.title}: {len(runner.item_ids)} of {len(suite.items)} items "
                       f"(seed {settings.seed})"))
            await runner.run(models)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # refused, engine gone, busy: say so, keep the app alive
            message = tui_words(getattr(exc, "message", None) or str(exc), "eval")
            failed("eval failed (why: in the notes below)", f"eval failed: {message}")
        finally:
            if engine is not self.app.engine:
                self.close_engine(engine)  # its own worker: a stop's pending cancel must not end it early
            post(None)
            count = getattr(self.app, "count_pending", None)
            if callable(count):
                count()  # a run MLflow did not take waits in the spool: the header says so
            recheck = getattr(self.app, "recheck_drift", None)
            if callable(recheck):
                recheck()  # the dashboard's "re-bench" warnings, computed again

    @work(group="eval-close", exit_on_error=False)
    async def close_engine(self, engine) -> None:
        try:
            await engine.close()
        except Exception:  # closing a dead connection must not turn the ending into a crash
            pass

    # ---- eval score: saved responses, no model ----------------------------------------------

    def action_score_file(self) -> None:
        """s: `sparkctl eval score` here: pick a JSONL of {prompt, response} lines and a suite."""
        from sparkctl.tui.widgets.score_dialog import ScoreFileDialog

        if self._eval_running():
            self.notify("an eval is running; escape stops it", severity="warning")
            return

        def chosen(picked) -> None:
            if picked:
                path, suite = picked
                self._phase(f"scoring {path.name} against {suite}…")
                self.score_file(path, suite)

        suite = str(self.query_one("#suite", Select).value)
        self.app.push_screen(ScoreFileDialog(tuple(SUITE_NAMES), suite), chosen)

    @work(thread=True, group="eval-score", exclusive=True, exit_on_error=False)
    def score_file(self, path, suite_name: str) -> None:
        """Read the suite and the file and score every line: disk and CPU, off the UI thread."""
        from sparkctl.services.evals.rescore import rescore_file

        try:
            result = rescore_file(load_suite(self.app.config, suite_name), path)
        except SuiteError as exc:
            self.post_message(Scored(path, suite_name, error=str(exc)))
            return
        self.post_message(Scored(path, suite_name, result))

    def on_scored(self, message: Scored) -> None:
        if message.error:
            self._phase(f"{message.path.name}: not scored (why: in the notes below)")
            self._note(f"eval score: {message.error}")
            return
        from sparkctl.core.suites.tally import SUITE_METRICS

        r = message.result
        metrics = list(SUITE_METRICS[message.suite])
        table = self.query_one("#results", DataTable)
        table.clear(columns=True)
        table.add_columns("File", "responses", *(f"{m.replace(f'{message.suite}_', '')} %" for m in metrics),
                          "95% CI")
        lo, hi = r.summary.get(f"{metrics[0]}_ci_low"), r.summary.get(f"{metrics[0]}_ci_high")
        ci = "-" if lo is None or hi is None else f"{lo * 100:.1f}–{hi * 100:.1f}"
        table.add_row(message.path.name, str(len(r.samples)), *(pct(r.summary.get(m)) for m in metrics), ci)
        table.add_class("shown")
        self._runs = {}  # the table holds the file's scores now (a resize must not swap it back)
        self._said, self._run_notes = [], []
        self._show_notes()
        self._phase(f"{message.suite}: {len(r.samples)} saved responses from {message.path} scored "
                    "(nothing recorded: as `sparkctl eval score`)")

    # ---- events from the runner ------------------------------------------------------------

    def on_eval_event(self, message: EvalEvent) -> None:
        ev = message.event
        grid = self.query_one(ItemGrid)
        if ev is None:
            self.query_one("#run", Button).disabled = False
            if self._runs:
                self._show_results()
            elif not self._tally:  # ended before any model started: no "reading the suite…" left behind
                self.query_one(EvalStats).set(summary=f"{self._suite}: not run", current="")
        elif isinstance(ev, Phase):
            self._phase(tui_words(ev.text, "eval"))
        elif isinstance(ev, Failed):
            self._phase(ev.phase)
            self._note(ev.text, keep=True, first=True)
        elif isinstance(ev, Notice):
            text = tui_words(ev.text, "eval")
            self._phase(text)
            error = ev.text.startswith("ERROR")
            self._note(text, "error" if error else "warning", keep=True)
            self.app.remember(text, "error" if error else "warning")
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

    def on_resize(self) -> None:
        if self._runs and self.query_one("#results", DataTable).has_class("shown"):
            self._show_results()  # the columns that fit the new width

    def _show_results(self) -> None:
        from sparkctl.core.suites.tally import SUITE_METRICS

        table = self.query_one("#results", DataTable)
        table.clear(columns=True)
        suite = self._suite
        metrics = list(SUITE_METRICS[suite])
        heads = [m.replace(f"{suite}_", "") for m in metrics]
        # by priority: the headline and its interval, then the status; under WIDE columns
        # the rest (answered-only accuracy, errors, run id: in MLflow and `n`) is left out,
        # so nothing needs scrolling sideways
        wide = self.size.width >= WIDE
        columns = ["Model", "items", "DNF", *(f"{h} %" for h in heads), "95% CI",
                   *((f"{h} ans. %" for h in heads) if wide else ()), *(("err",) if wide else ()), "status",
                   *(("MLflow",) if wide else ())]
        table.add_columns(*columns)
        table.set_class(not wide, "-narrow")
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
                *(pct(s.get(m)) for m in metrics), ci,
                *((pct(s.get(f"{m}_answered")) for m in metrics) if wide else ()),
                *((str(int(s.get("error_count", 0))),) if wide else ()), status,
                *((run.run_id[:8] if run.run_id else "spooled" if run.sync_message else "-",) if wide else ()),
            )
        table.add_class("shown")
        named = len(self._runs) > 1
        self._run_notes = []
        for run in self._runs.values():
            about = run.model if named else ""
            for m in dict.fromkeys(run.guard.invalid + run.guard.flags):
                self._run_notes.append(Note(tui_words(m, "eval"), "error" if m in run.guard.invalid else "warning",
                                            about))
            if run.sync_message and not run.run_id:
                self._run_notes.append(Note(run.sync_message, "warning", about))
        self._show_notes()
        said = f" · {len(self.notes)} note(s) below (n reads them whole)" if self.notes else ""
        self._phase(f"eval finished{said} · {LEGEND}")
