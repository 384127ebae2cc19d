"""The Models screen: local models, pull with live progress, fit check, side-load with
verification, unload and delete.

Fit and load ask for a context (num_ctx) and, for a load, a keep-alive in a small dialog
(blank keeps the config's or the engine's default), like `sparkctl fit/load --ctx
--keep-alive`. A model side-loaded here is marked "contender" in the Lane column until it
is promoted (then the config names its lane) or unloaded. The result and pull panels close
with escape, and shrink on a short terminal so the list stays usable at 80x24.

Engine calls run in async workers (one group per concern) that only post messages; the
handlers below own the table, the result panel and the pull view. Residency (the Loaded
column) follows the app's one-second report, so it stays live without asking the engine
again; the list itself (tags + show) is fetched on entry, on `r` and after each action.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Label, Static
from textual.worker import Worker, WorkerState

from sparkctl.core.fit import FitKind
from sparkctl.core.fmt import size
from sparkctl.core.keepalive import parse_keep_alive as _keep_alive
from sparkctl.core.names import model_key, same_model, unique_by_name, validate_model_name
from sparkctl.engines.base import EngineError
from sparkctl.services.models import (
    DeleteReport,
    FitReport,
    LoadFailed,
    LoadReport,
    ModelList,
    ModelRow,
    ModelsRefused,
    ModelStore,
    PullView,
    RemoteFitReport,
    ShowCache,
    UnloadReport,
    delete_model,
    did_you_mean,
    fit_check,
    list_models,
    modified_label,
    override_blocker,
    override_offered,
    pull_model,
    refusal_reason,
    remote_fit_check,
    side_load,
    unload_model,
    with_resident,
)
from sparkctl.tui.shown import catch_up, watch_while_shown
from sparkctl.tui.widgets.fields import RowTable
from sparkctl.tui.widgets.footer import KeysFooter
from sparkctl.tui.widgets.model_dialogs import ConfirmDialog, LoadChoice, LoadDialog, PullDialog
from sparkctl.tui.widgets.pull_view import PullProgressView
from sparkctl.tui.wording import tui_words

# By priority: what a decision needs first (its role, whether and where it is loaded, its
# size), so 80 columns show them without scrolling sideways; metadata after.
COLUMNS = (
    ("Model", "name"),
    ("Lane", "lane"),
    ("Loaded", "loaded"),
    ("Size", "size"),
    ("Context", "context"),
    ("Quant", "quant"),
    ("Params", "params"),
    ("Can", "caps"),
    ("Family", "family"),
    ("Modified", "modified"),
)

PULL_PAINT_S = 0.1  # at most ten progress paints a second; status changes always paint


# ---------------------------------------------------------------------------- messages


class ModelsListed(Message):
    def __init__(self, listing: ModelList) -> None:
        super().__init__()
        self.listing = listing


class ModelsListFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class PullProgressed(Message):
    def __init__(self, view: PullView) -> None:
        super().__init__()
        self.view = view


class PullFitChecked(Message):
    """The verdict for a model about to be pulled, from its registry (or why it is unknown)."""

    def __init__(self, name: str, report: RemoteFitReport | None, error: str | None = None,
                 then_pull: bool = True) -> None:
        super().__init__()
        self.name = name
        self.report = report
        self.error = error
        self.then_pull = then_pull  # False: w asked only whether it would fit


class FitChecked(Message):
    def __init__(self, report: FitReport) -> None:
        super().__init__()
        self.report = report


class LoadFinished(Message):
    def __init__(self, report: LoadReport) -> None:
        super().__init__()
        self.report = report


class LoadRefused(Message):
    def __init__(self, model: str, reason: str, fit: FitReport | None) -> None:
        super().__init__()
        self.model = model
        self.reason = reason
        self.fit = fit


class ActionReported(Message):
    """The end of an unload, a delete or a failed action: a titled text for the panel.
    `gone` names a model that is no longer resident (unloaded) or stored (deleted)."""

    def __init__(self, title: str, text: Text, refresh: bool = True, *, gone: str | None = None,
                 deleted: bool = False) -> None:
        super().__init__()
        self.title = title
        self.text = text
        self.refresh = refresh
        self.gone = gone
        self.deleted = deleted


# ---------------------------------------------------------------------------- rendering

_VERDICT_STYLE = {
    FitKind.FITS: "bold green",
    FitKind.FITS_BY_EVICTING: "bold yellow",
    FitKind.DOES_NOT_FIT: "bold red",
}


def _lines(report) -> list[str]:
    """A report's lines in this screen's words (its context dialog, L), not the CLI's flags."""
    return [tui_words(line, "models") for line in report.lines()]


def fit_text(report: FitReport) -> Text:
    lines = _lines(report)
    style = _VERDICT_STYLE.get(report.verdict.kind, "bold") if report.verdict else "bold red"
    t = Text(lines[0], style=style)
    for line in lines[1:]:
        t.append("\n" + line)
    reason = refusal_reason(report)
    if reason:
        t.append("\nload would be refused: ", style="yellow")
        t.append(override_hint(report), style="yellow")
    return t


def remote_fit_text(report: RemoteFitReport) -> Text:
    """A remote verdict before a pull: the fit's lines under the registry's facts."""
    lines = _lines(report)
    v = report.fit.verdict if report.fit is not None else None
    t = Text(lines[0], style=_VERDICT_STYLE.get(v.kind, "bold") if v else "bold yellow")
    for line in lines[1:]:
        t.append("\n" + line)
    return t


def override_hint(report: FitReport) -> str:
    """ "press L to load anyway" only where forcing could work; else why it cannot."""
    if override_offered(report):
        return "press L to load anyway"
    return override_blocker(report) or "no override can load it"


def load_text(report: LoadReport) -> Text:
    lines = _lines(report)
    ok = report.ok
    t = Text(("✔ " if ok else "✘ ") + lines[0], style="bold green" if ok else "bold red")
    v = report.verification
    if report.overridden:
        t.append(f"\nforced past: {report.overridden}", style="yellow")
    for p in v.problems:
        t.append(f"\n!! {tui_words(p, 'models')}", style="bold red")
    for w in v.warnings:
        t.append(f"\n!  {tui_words(w, 'models')}", style="yellow")
    for n in v.notes:
        t.append(f"\n·  {tui_words(n, 'models')}")
    return t


# Short capability names keep the table inside 120 columns.
CAPABILITY_SHORT = {"thinking": "think", "embedding": "embed"}


def context_label(tokens: int | None) -> str:
    """131072 -> "128K", the way contexts are usually quoted; odd sizes stay exact."""
    if not tokens:
        return "n/a"
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def _loaded_cell(row: ModelRow) -> Text:
    """Where the resident copy sits and its size: "GPU 68.0 GiB", or in red "30% CPU 10.5 GiB"."""
    if row.resident is None:
        return Text("-", style="dim")
    p = row.placement
    resident = size(row.resident.size)
    if p is None or p.gpu_fraction is None:
        return Text(f"? {resident}", style="bold red")
    if p.full_gpu:
        return Text(f"GPU {resident}", style="bold")
    cpu = round((1 - p.gpu_fraction) * 100)
    return Text(f"{cpu}% CPU {resident}", style="bold red")


CONTENDER = "contender"


def _lane_cell(lane: str | None) -> Text:
    if lane == CONTENDER:
        return Text(CONTENDER, style="italic")
    return Text(lane or "-", style="bold" if lane else "")


def _cells(row: ModelRow, now, lane: str | None = None) -> tuple:
    lane = row.lane if lane is None else lane
    lane_style = "bold" if lane and lane != CONTENDER else ""
    return (  # in COLUMNS' order
        Text(row.name, style=lane_style),
        _lane_cell(lane),
        _loaded_cell(row),
        Text(size(row.size), justify="right"),
        Text(context_label(row.context_length), justify="right"),
        row.quantization or "-",
        row.parameter_size or "-",
        " ".join(CAPABILITY_SHORT.get(c, c) for c in row.notable_capabilities) or "-",
        row.family or "-",
        modified_label(row.modified_at, now),
    )


# ---------------------------------------------------------------------------- screen


class ModelsScreen(Screen):
    DEFAULT_CSS = """
    ModelsScreen #models-box {
        height: 1fr;
        min-height: 9;
        border: round $primary;
        border-title-color: $primary;
        border-title-style: bold;
    }
    ModelsScreen #models { height: 1fr; }
    ModelsScreen #models-status { height: 1; padding: 0 1; color: $text-muted; }
    ModelsScreen #model-info {
        display: none;
        height: auto;
        max-height: 14;
        border: round $panel-lighten-2;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }
    ModelsScreen #model-info.-active { display: block; }
    ModelsScreen #model-info-text { height: auto; }
    /* 80x24: the panels give way so the list keeps at least five rows */
    ModelsScreen.-short #model-info { max-height: 7; }
    ModelsScreen.-short PullProgressView #pull-layers { display: none; }
    ModelsScreen.-short PullProgressView #pull-disk { display: none; }
    ModelsScreen.-short PullProgressView #pull-log { display: none; }
    """
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("p", "pull", "Pull"),
        Binding("f", "fit", "Fit"),
        Binding("w", "would_fit", "Would it fit?", show=False),  # ? lists it; the footer keeps 80 columns
        Binding("l", "load", "Load"),
        Binding("L", "force_load", "Force load", show=False),
        Binding("u", "unload", "Unload"),
        Binding("x,delete", "delete", "Delete"),
        Binding("r", "refresh_list", "Refresh", show=False),  # the list refreshes itself after each action
        # shown only while they apply, so the footer fits 80 columns
        Binding("escape", "close_panel", "Close"),
        Binding("c", "cancel_pull", "Cancel pull"),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.listing: ModelList | None = None
        self.rows: dict[str, ModelRow] = {}
        self.show_cache: ShowCache = {}
        self.busy: str | None = None  # the load/unload/delete in flight, if any
        self.last_fit: FitReport | None = None
        self.last_load: LoadReport | None = None
        self.last_refusal: str | None = None
        # the latest fit verdict per model (from f or a refused l): what L may force past
        self.override_fit: FitReport | None = None
        # the context / keep-alive last asked for each model: the dialog starts from them, L reuses them
        self.choices: dict[str, LoadChoice] = {}
        self._loaded_key: dict[str, str] = {}
        self._lane_key: dict[str, str] = {}
        # Where pulls check free disk space; None: found from the server's OLLAMA_MODELS / the defaults.
        self.model_store: ModelStore | None = None

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="models-box") as box:
            box.border_title = "Local models"
            yield RowTable(id="models", cursor_type="row", zebra_stripes=True)
            yield Label("reading the engine…", id="models-status")
        with VerticalScroll(id="model-info", can_focus=False) as info:
            info.border_title = "Result"
            info.border_subtitle = "esc: close"
            yield Static("", id="model-info-text")
        yield PullProgressView(id="pull-view")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#models", DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        watch_while_shown(self, "report", self._on_report, init=False)
        self.refresh_list()

    def on_screen_resume(self) -> None:
        catch_up(self)  # the Loaded and Lane columns as the engine has them now

    # -- helpers ---------------------------------------------------------------------------
    @property
    def cfg(self):
        return self.app.config

    @property
    def contenders(self) -> set[str]:
        """Keys of the models side-loaded from sparkctl (kept by the app, so the dashboard
        marks them too, and in sparkctl's own state file, so a restart keeps them)."""
        return getattr(self.app, "contenders", set())

    def _mark(self, name: str, on: bool, lane: str = "") -> None:
        if (model_key(name) in self.contenders) != on or (on and lane and lane != self._lane_of_contender(name)):
            self.app.set_contender(name, on, lane)

    def _lane_of_contender(self, name: str) -> str:
        return getattr(self.app, "contender_lanes", {}).get(model_key(name), "")

    def lane_of(self, row: ModelRow) -> str | None:
        """The config's lane (read now: a promotion changes it), else "contender" for a
        model side-loaded from sparkctl that is still resident."""
        lane = self.cfg.lane_of(row.name)
        key = model_key(row.name)
        if lane:
            self._mark(row.name, False)  # promoted: its lane says what it is now
            return lane
        if key in self.contenders and row.loaded:
            return CONTENDER
        return None

    def _now(self):
        return self.app.clock()

    def selected(self) -> ModelRow | None:
        table = self.query_one("#models", DataTable)
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None
        return self.rows.get(key)

    def _show_info(self, title: str, text: Text) -> None:
        info = self.query_one("#model-info", VerticalScroll)
        info.border_title = title
        self.query_one("#model-info-text", Static).update(text)
        info.add_class("-active")
        info.scroll_home(animate=False)
        self.refresh_bindings()

    def _need_model(self) -> ModelRow | None:
        row = self.selected()
        if row is None:
            self._show_info("Result", Text("no model selected: pull one with p", style="yellow"))
        return row

    def _claim(self, what: str) -> bool:
        if self.busy:
            self._show_info("Busy", Text(f"wait: {self.busy} is still running", style="yellow"))
            return False
        self.busy = what
        return True

    def _after_change(self) -> None:
        self.refresh_list()
        refresh = getattr(self.app, "action_refresh_now", None)
        if refresh is not None:
            refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_panel":  # in the footer only while there is a panel to close
            return self.query_one("#model-info").has_class("-active") or self.query_one(PullProgressView).closable
        if action == "cancel_pull":
            return self.query_one(PullProgressView).running
        return True

    # -- the table -------------------------------------------------------------------------
    def _fill(self, listing: ModelList) -> None:
        table = self.query_one("#models", DataTable)
        keep = self.selected()
        rows = tuple(unique_by_name(listing.rows))  # the table is keyed by name: one row each
        report = getattr(self.app, "report", None)
        if report is not None and report.engine.reachable:
            rows = with_resident(rows, report.engine.resident)
        self.rows = {r.name: r for r in rows}
        now = self._now()
        table.clear()
        self._lane_key = {}
        for r in self.rows.values():
            lane = self.lane_of(r)
            self._lane_key[r.name] = lane or "-"
            table.add_row(*_cells(r, now, lane or ""), key=r.name)
        self._loaded_key = {r.name: _loaded_cell(r).plain for r in self.rows.values()}
        if keep is not None and keep.name in self.rows:
            table.move_cursor(row=list(self.rows).index(keep.name))
        status = f"{len(self.rows)} model(s) · Ollama {listing.engine_version}"
        for lane, model in listing.missing_lanes:
            status += f" · lane {lane}: {model} not stored"
        self.query_one("#models-status", Label).update(status)

    def _on_report(self, report) -> None:
        """Keep the Loaded and Lane columns live from the app's one-second engine sample."""
        if report is None or not self.rows or not report.engine.reachable:
            return
        table = self.query_one("#models", DataTable)
        fresh = with_resident(tuple(self.rows.values()), report.engine.resident)
        for r in fresh:
            cell = _loaded_cell(r)
            if self._loaded_key.get(r.name) != cell.plain:
                self._loaded_key[r.name] = cell.plain
                table.update_cell(r.name, "loaded", cell)
            lane = self.lane_of(r) or "-"
            if self._lane_key.get(r.name) != lane:
                self._lane_key[r.name] = lane
                table.update_cell(r.name, "lane", _lane_cell(lane if lane != "-" else None))
        self.rows = {r.name: r for r in fresh}

    # -- workers (engine calls only here; they post messages) ------------------------------
    @work(group="models-list", exclusive=True, exit_on_error=False)
    async def refresh_list(self) -> None:
        try:
            listing = await list_models(self.cfg, self.app.engine, cache=self.show_cache)
        except EngineError as exc:
            self.post_message(ModelsListFailed(exc.message))
            return
        self.post_message(ModelsListed(listing))

    @work(group="pull", exclusive=True, exit_on_error=False)
    async def run_pull(self, name: str) -> None:
        clock = lambda: self.app.clock().timestamp()  # noqa: E731 - the app's clock, fixed in tests
        last_paint = 0.0
        painted: tuple[int, int] = (-1, -1)
        stream = pull_model(self.app.engine, name, clock=clock, store=self.model_store)
        try:
            async for view in stream:
                now = time.monotonic()
                shape = (len(view.log), len(view.layers))
                if view.done or shape != painted or now - last_paint >= PULL_PAINT_S:
                    self.post_message(PullProgressed(view))
                    painted, last_paint = shape, now
        finally:
            await stream.aclose()  # closes the HTTP stream: Ollama's only cancel

    @work(group="pull-fit", exclusive=True, exit_on_error=False)
    async def run_pull_fit(self, typed: str, then_pull: bool = True) -> None:
        """The registry read takes the name as typed (an http:// scheme picks plain HTTP for
        its host, as the CLI's does); what follows (the pull, the titles) the checked name."""
        name = validate_model_name(typed)
        try:
            report = await remote_fit_check(self.cfg, self.app.engine, self.app.probes, typed)
        except EngineError as exc:
            self.post_message(PullFitChecked(name, None, exc.message, then_pull))
            return
        self.post_message(PullFitChecked(name, report, then_pull=then_pull))

    @work(group="fit", exclusive=True, exit_on_error=False)
    async def run_fit(self, name: str, num_ctx: int | None = None) -> None:
        try:
            report = await fit_check(self.cfg, self.app.engine, self.app.probes, name, num_ctx)
        except EngineError as exc:
            self.post_message(ActionReported(f"Fit {name}", Text(f"✘ {exc.message}", style="bold red"), False))
            return
        self.post_message(FitChecked(report))

    async def _repair_first(self) -> None:
        """Before a load or unload changes what is resident: put back what a dead bench left
        on this engine (the dashboard only shows it), or the next command's repair would undo
        this change. In the worker; the repair's file and lock work runs in threads."""
        from sparkctl.services.bench.recovery import repair_before

        report = await repair_before(self.cfg, self.app.engine, lambda _t: None, lock_held=False)
        for line in report.lines:
            self.notify(line, severity="warning" if line.startswith("WARNING") else "information", timeout=15)

    @work(group="load", exclusive=True, exit_on_error=False)
    async def run_load(self, name: str, force: bool = False, choice: LoadChoice | None = None) -> None:
        choice = choice or LoadChoice()
        try:
            await self._repair_first()
            report = await side_load(self.cfg, self.app.engine, self.app.probes, name, force=force,
                                     num_ctx=choice.num_ctx, keep_alive=choice.keep_alive)
        except ModelsRefused as exc:
            self.post_message(LoadRefused(name, exc.reason, exc.fit))
            return
        except LoadFailed as exc:
            t = Text(f"✘ load of {name} failed: {exc.message}", style="bold red")
            for lost in exc.lost_lanes:
                t.append(f"\n!! EVICTED: {lost} (lane {self.cfg.lane_of(lost)}) is no longer resident", style="bold red")
            self.post_message(ActionReported(f"Load {name}", t))
            return
        except EngineError as exc:
            self.post_message(ActionReported(f"Load {name}", Text(f"✘ {exc.message}", style="bold red")))
            return
        self.post_message(LoadFinished(report))

    @work(group="unload", exclusive=True, exit_on_error=False)
    async def run_unload(self, name: str) -> None:
        try:
            await self._repair_first()
            report: UnloadReport = await unload_model(self.app.engine, name, cfg=self.cfg)
        except EngineError as exc:
            self.post_message(ActionReported(f"Unload {name}", Text(f"✘ {exc.message}", style="bold red")))
            return
        style = "bold green" if report.was_loaded else "dim"
        self.post_message(ActionReported(f"Unload {name}", Text(report.line(), style=style), gone=name))

    @work(group="delete", exclusive=True, exit_on_error=False)
    async def run_delete(self, name: str) -> None:
        try:
            report: DeleteReport = await delete_model(self.cfg, self.app.engine, name)
        except ModelsRefused as exc:
            self.post_message(ActionReported(f"Delete {name}", Text(f"refused: {exc.reason}", style="bold yellow")))
            return
        except EngineError as exc:
            self.post_message(ActionReported(f"Delete {name}", Text(f"✘ {exc.message}", style="bold red")))
            return
        self.post_message(ActionReported(f"Delete {name}", Text(report.line(), style="bold green"),
                                         gone=report.model, deleted=True))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        w = event.worker
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        if w.group in ("load", "unload", "delete"):
            self.busy = None
        if w.group == "pull" and event.state is WorkerState.CANCELLED:
            self.query_one(PullProgressView).cancelled()
            self.refresh_bindings()
        if event.state is WorkerState.ERROR:
            self._show_info("Error", Text(f"✘ {w.group}: {w.error}", style="bold red"))

    # -- handlers own the widgets ------------------------------------------------------------
    def on_models_listed(self, message: ModelsListed) -> None:
        self.listing = message.listing
        try:
            self._fill(message.listing)
        except Exception as exc:  # an engine answer that breaks the table is a line, never a crash
            self.query_one("#models-status", Label).update(
                Text(f"could not show the engine's list: {exc!r}", style="bold red"))

    def on_models_list_failed(self, message: ModelsListFailed) -> None:
        self.query_one("#models-status", Label).update(Text(f"engine: {message.error}", style="bold red"))

    def on_pull_progressed(self, message: PullProgressed) -> None:
        view = self.query_one(PullProgressView)
        hint = ""
        if message.view.error_kind == "not_found":
            hint = did_you_mean(message.view.model, list(self.rows)).removeprefix("; ")
        view.show(message.view, hint=hint)
        if message.view.done:
            self.refresh_bindings()
        if message.view.outcome == "success":
            self._after_change()

    def on_pull_fit_checked(self, message: PullFitChecked) -> None:
        """Show the verdict, then pull; a model that cannot fit here is pulled only if the
        user says so."""
        name, report = message.name, message.report
        if not message.then_pull:  # w: the verdict is the answer; nothing is pulled
            self._show_info(f"Fit {name} (from its registry; nothing pulled)",
                            remote_fit_text(report) if report is not None
                            else Text(f"✘ {message.error}", style="bold red"))
            return
        if report is None:
            self._show_info(f"Pull {name}", Text(f"✘ {message.error}", style="bold red"))
            return
        self._show_info(f"Fit {name} (before the pull)", remote_fit_text(report))
        if not report.cannot_fit:
            self._pull_chosen(name)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._pull_chosen(name)

        self.app.push_screen(ConfirmDialog(f"{name} cannot fit here:\n\n{report.summary()}\n\nPull it anyway?",
                                           yes_label="Pull anyway"), answered)

    def on_fit_checked(self, message: FitChecked) -> None:
        self.last_fit = message.report
        self.override_fit = message.report
        self._show_info(f"Fit {message.report.model}", fit_text(message.report))

    def on_load_finished(self, message: LoadFinished) -> None:
        report = message.report
        self.last_load = report
        self.last_refusal = None
        self.override_fit = None
        if report.verification.resident is not None and not self.cfg.lane_of(report.model):
            # "contender" until promoted or unloaded, for the lane the load named
            self._mark(report.model, True, self.choices.get(report.model, LoadChoice()).lane)
        self._show_info(f"Load {report.model}", load_text(report))
        self._after_change()

    def on_load_refused(self, message: LoadRefused) -> None:
        self.last_refusal = message.reason
        self.override_fit = message.fit
        t = Text(f"refused: {tui_words(message.reason, 'models')}", style="bold yellow")
        if message.fit is None or override_offered(message.fit):
            t.append("\npress L to load anyway", style="yellow")
        else:
            t.append(f"\n{override_blocker(message.fit) or 'no override can load it'}", style="bold red")
        if message.fit is not None:
            for line in _lines(message.fit)[1:]:
                t.append("\n" + line)
        self._show_info(f"Load {message.model}", t)

    def on_action_reported(self, message: ActionReported) -> None:
        self._show_info(message.title, message.text)
        if message.gone:
            self._mark(message.gone, False)  # unloaded or deleted: no longer a contender
        if message.deleted and message.gone:
            pull = self.query_one(PullProgressView)
            if pull.subject and same_model(pull.subject, message.gone):
                pull.close()  # "cancelled: press p to resume" is moot once the model is deleted
            self.choices.pop(message.gone, None)
        if message.refresh:
            self._after_change()

    # -- actions -------------------------------------------------------------------------------
    def action_refresh_list(self) -> None:
        self.refresh_list()

    def action_close_panel(self) -> None:
        """Escape: the result panel first, then a finished pull's panel."""
        info = self.query_one("#model-info")
        pull = self.query_one(PullProgressView)
        if info.has_class("-active"):
            info.remove_class("-active")
        elif pull.closable:
            pull.close()
        self.refresh_bindings()

    def pull_suggestions(self) -> list[str]:
        """Lane models not stored yet first (the likeliest pull), then the local models
        (pulling one again updates it)."""
        missing = [m for _, m in self.listing.missing_lanes] if self.listing else []
        return missing + list(self.rows)

    def action_pull(self) -> None:
        if self.query_one(PullProgressView).running:
            self._show_info("Pull", Text("a pull is running: c cancels it", style="yellow"))
            return
        self.app.push_screen(PullDialog(self.pull_suggestions()), self._pull_requested)

    def action_would_fit(self) -> None:
        """w: name any model (local or not): its fit here, read from its registry (the
        manifest and the GGUF header, a few kB); nothing is pulled."""
        self.app.push_screen(PullDialog(self.pull_suggestions(), title="Would it fit here? (nothing is pulled)",
                                        action="see the verdict"), self._would_fit_requested)

    def _would_fit_requested(self, typed: str | None) -> None:
        """`typed`: the dialog's answer, an http(s):// scheme kept for the registry read."""
        if not typed:
            return
        self._show_info(f"Fit {validate_model_name(typed)} (from its registry; nothing pulled)",
                        Text("reading the registry's manifest and GGUF header…", style="dim"))
        self.run_pull_fit(typed, then_pull=False)

    def _pull_requested(self, typed: str | None) -> None:
        """The dialog's answer: check the fit from the registry first (a worker), then pull."""
        if not typed:
            return
        self._show_info(f"Fit {validate_model_name(typed)} (before the pull)",
                        Text("reading the registry's manifest and GGUF header…", style="dim"))
        self.run_pull_fit(typed)

    def _pull_chosen(self, name: str | None) -> None:
        if not name:
            return
        self.query_one(PullProgressView).start(name)
        self.refresh_bindings()
        self.run_pull(name)

    def action_cancel_pull(self) -> None:
        if self.query_one(PullProgressView).running:
            self.workers.cancel_group(self, "pull")

    def _dialog(self, row: ModelRow, load: bool) -> LoadDialog:
        models = self.cfg.models
        if models.num_ctx > 0:
            ctx = f"[models] num_ctx {models.num_ctx}"
        else:
            trained = f", capped at the model's {row.context_length}" if row.context_length else ""
            ctx = f"the engine's choice (Ollama's default for this box{trained})"
        try:
            keep = f"[models] keep_alive {_keep_alive(models.keep_alive).label}"
        except ValueError:
            keep = f"[models] keep_alive {models.keep_alive}"
        return LoadDialog(row.name, load=load, choice=self.choices.get(row.name), ctx_default=ctx,
                          keep_alive_default=keep, lanes=tuple(lane for lane, m in self.cfg.lanes.items() if m))

    def action_fit(self) -> None:
        row = self._need_model()
        if row is None:
            return

        def chosen(choice: LoadChoice | None) -> None:
            if choice is None:
                return
            kept = self.choices.get(row.name, LoadChoice())
            self.choices[row.name] = LoadChoice(choice.num_ctx, kept.keep_alive, kept.lane)
            self._show_info(f"Fit {row.name}", Text("checking…", style="dim"))
            self.run_fit(row.name, choice.num_ctx)

        self.app.push_screen(self._dialog(row, load=False), chosen)

    def action_load(self) -> None:
        row = self._need_model()
        if row is None:
            return

        def chosen(choice: LoadChoice | None) -> None:
            if choice is None or not self._claim(f"load of {row.name}"):
                return
            self.choices[row.name] = choice
            self._show_info(f"Load {row.name}", Text("checking the fit, then loading…", style="dim"))
            self.run_load(row.name, False, choice)

        self.app.push_screen(self._dialog(row, load=True), chosen)

    def action_force_load(self) -> None:
        """L: load past the guard's refusal, after a confirmation that shows the whole reason,
        and only where forcing could work (it would fit once the others are evicted)."""
        row = self._need_model()
        if row is None:
            return
        fit = self.override_fit if self.override_fit and same_model(self.override_fit.model, row.name) else None
        if fit is None:
            self._show_info(f"Load {row.name}", Text(
                "L loads past a refusal: check first with f (fit) or l (load)", style="yellow"))
            return
        why = refusal_reason(fit)
        if why is None:
            self._show_info(f"Load {row.name}", Text("nothing to force: it fits; l loads it", style="yellow"))
            return
        blocker = override_blocker(fit)
        if blocker is not None:
            self._show_info(f"Load {row.name}", Text(f"refused: {why}\n{blocker}", style="bold red"))
            return
        choice = self.choices.get(row.name, LoadChoice())
        extra = []
        if choice.num_ctx:
            extra.append(f"num_ctx {choice.num_ctx}")
        if choice.keep_alive:
            extra.append(f"keep-alive {choice.keep_alive}")
        question = f"Load {row.name} anyway?\n\n{why}" + (f"\n\nwith {', '.join(extra)}" if extra else "")

        def answered(yes: bool | None) -> None:
            if yes and self._claim(f"load of {row.name}"):
                self._show_info(f"Load {row.name}", Text("loading (forced)…", style="dim"))
                self.run_load(row.name, True, choice)

        self.app.push_screen(ConfirmDialog(question, yes_label="Load anyway"), answered)

    def action_unload(self) -> None:
        row = self._need_model()
        if row is not None and self._claim(f"unload of {row.name}"):
            self._show_info(f"Unload {row.name}", Text("unloading, waiting for the engine to free it…", style="dim"))
            self.run_unload(row.name)

    def action_delete(self) -> None:
        row = self._need_model()
        if row is None:
            return
        if row.lane:
            self._show_info(
                f"Delete {row.name}",
                Text(f"refused: {row.name} serves lane {row.lane}; change [lanes] first "
                     f"(or sparkctl rm {row.name} --force)", style="bold yellow"),
            )
            return

        def answered(yes: bool | None) -> None:
            if yes and self._claim(f"delete of {row.name}"):
                self._show_info(f"Delete {row.name}", Text("deleting…", style="dim"))
                self.run_delete(row.name)

        self.app.push_screen(
            ConfirmDialog(f"Delete {row.name} ({size(row.size)}) from the engine's store?", yes_label="Delete"),
            answered,
        )
