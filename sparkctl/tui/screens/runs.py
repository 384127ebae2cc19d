"""The Runs screen: past bench runs read back from MLflow, filtered and sorted in memory.

One page of runs (newest first) is read in a thread worker: ``import mlflow`` and the
SQLite reads block, so they never run on the UI thread. The rows are kept as data
(``RunRow``); the filter refills the table from them and sorting uses ``DataTable.sort``,
so both answer at once on a page of 100-1000 rows. Enter opens a run's detail: its
per-repetition decode tok/s and TTFT (metric histories, read in a thread worker), its
flags and the reasons the bench called it invalid.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Header, Input, Label, Static
from textual.worker import get_current_worker

from sparkctl.core.termtext import safe_line
from sparkctl.services.runs import RunRow, list_runs
from sparkctl.tui.screens.run_extra import run_extra
from sparkctl.tui.screens.run_labels import date_label, error_line
from sparkctl.tui.widgets.fields import RowTable
from sparkctl.tui.widgets.footer import KeysFooter
from sparkctl.tui.wording import plain

PAGE = 100  # the first page of runs; newest first

# (label, key, the RunRow value it shows and sorts by). Status and kind come right after
# the date: at 80 columns a KILLED, FAILED or INVALID run must be seen without scrolling.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Date", "date"),
    ("Status", "status"),
    ("Kind", "kind"),
    ("Model", "model"),
    ("Engine", "engine"),
    ("tok/s", "decode"),
    ("CV%", "cv"),
    ("TTFT s", "ttft"),
    ("prefill", "prefill"),
    ("J/tok", "jpt"),
    ("roof%", "roofline"),
    ("score%", "score"),
    ("Flags", "flags"),
    ("Host", "host"),
    ("Run", "run_id"),
)
COLUMN_KEYS = tuple(key for _, key in COLUMNS)
# Under WIDE terminal columns: what a decision reads, within 80 columns without scrolling:
# whether the run counts (its status), whose, what kind, its speed and its score; then its
# flags cut to FLAGS_NARROW cells and the rest (Enter shows a run whole), the model's name
# cut to MODEL_NARROW cells.
WIDE = 110
NARROW_KEYS = ("status", "model", "kind", "decode", "score", "flags", "date", "engine", "cv", "ttft", "prefill",
               "jpt", "roofline", "host", "run_id")
FLAGS_NARROW = 18
MODEL_NARROW = 22
# per-repetition metrics the bench logs as steps (services/bench/runner.py to_record)
REP_DECODE = "client_decode_tps"
REP_TTFT = "ttft_s"
REP_ACCEPTANCE = "spec_acceptance_pct"


# ---------------------------------------------------------------------------- cells


class Cell(Text):
    """A table cell that remembers the raw value it sorts by (None sorts last)."""

    sort_value: Any = None


def _cell(text: str, value: Any, *, right: bool = False, style: str = "") -> Cell:
    c = Cell(text, style=style, justify="right" if right else "left")
    c.sort_value = value
    return c


def _num(value: float | None, fmt: str) -> Cell:
    if value is None:
        return _cell("-", None, right=True, style="dim")
    return _cell(format(value, fmt), value, right=True)


def status_label(row: RunRow) -> tuple[str, str]:
    """(what the Status column says, its style): a finished run the bench marked invalid
    reads INVALID; a lane change that did not happen FAILED."""
    status = row.status or "-"
    if status == "FINISHED" and row.valid is False:
        return "INVALID", "bold red"
    if status == "FINISHED":
        return "ok", "green"
    return status, "bold red" if status == "FAILED" else "yellow"


def kind_label(row: RunRow) -> str:
    """Bench, sweep cell (with its cell), eval (with its suite), promote or rollback."""
    i = row.identity
    if i.kind == "sweep-cell":
        return f"cell {i.cell}"
    if i.kind == "eval":
        return f"eval {row.suite or i.suite}".strip()
    return {"promotion": "promote"}.get(i.kind, i.kind)


def cells(row: RunRow) -> tuple[Cell, ...]:
    engine = f"{row.engine_kind} {row.engine_version}".strip() or "-"
    flags = " ".join(row.flags)
    status, status_style = status_label(row)
    kind = kind_label(row)
    return (
        _cell(date_label(row.start_ms), row.start_ms),
        _cell(status, status, style=status_style),
        _cell(kind, kind, style="bold" if row.kind == "promotion" else ""),
        _cell(row.model or "-", row.model.lower()),
        _cell(engine, engine.lower()),
        _num(row.decode_tps_median, ".1f"),
        _num(row.decode_tps_cv_pct, ".1f"),
        _num(row.ttft_s_median, ".2f"),
        _num(row.prefill_tps_median, ".0f"),
        _num(row.joules_per_token, ".2f"),
        _num(row.roofline_pct, ".0f"),
        _cell("-" if row.score is None else f"{row.suite} {row.score * 100:.1f}", row.score,
              style="dim" if row.score is None else ""),
        _cell(flags or "-", flags, style="bold red" if "invalid" in row.flags else ("yellow" if flags else "dim")),
        _cell(row.host or "-", row.host.lower()),
        _cell(row.run_id[:8], row.run_id),
    )


def matches(row: RunRow, needle: str) -> bool:
    """The filter: a case-insensitive substring of the model or the engine version;
    a word ``host:NAME`` keeps the runs of hosts whose name holds NAME."""
    words = needle.strip().lower().split()
    hosts = [w[len("host:"):] for w in words if w.startswith("host:")]
    if hosts and not any(h in row.host.lower() for h in hosts):
        return False
    n = " ".join(w for w in words if not w.startswith("host:"))
    return not n or n in row.model.lower() or n in row.engine_version.lower()


def _sort_key(reverse: bool):
    def key(cell: Any) -> tuple:
        value = getattr(cell, "sort_value", None)
        missing = value is None or value == ""
        # None last either way: sort() reverses the whole key, so flip the flag with it
        return (not missing if reverse else missing, value if not missing else 0)

    return key


# ---------------------------------------------------------------------------- messages


class RunsLoaded(Message):
    def __init__(self, rows: list[RunRow]) -> None:
        super().__init__()
        self.rows = rows


class RebenchPlanned(Message):
    def __init__(self, plans: list, skipped: list | None = None) -> None:
        super().__init__()
        self.plans = plans  # (StaleLane, overrides, notes) per lane model to re-bench
        self.skipped = skipped or []  # (StaleLane, why B cannot re-bench it) per lane left out


class RunsFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = safe_line(error)  # may quote a tracking server's reply


class RunDetailLoaded(Message):
    def __init__(self, decode: list[float], ttft: list[float], tags: dict[str, str], extra: Text | None = None,
                 acceptance: list[float] | None = None) -> None:
        super().__init__()
        self.acceptance = acceptance or []  # speculative decoding, per repetition (where the engine said)
        self.decode = decode
        self.ttft = ttft
        # anyone who can write to the tracking server wrote these: what the detail shows of
        # them carries no escape sequence (an OSC in a tag retitled the terminal's pane)
        self.tags = {safe_line(k): safe_line(v) for k, v in tags.items()}
        self.extra = extra  # GPU samples and output (a bench), items (an eval)


class RunDetailFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = safe_line(error)


# ---------------------------------------------------------------------------- detail


class RunDetailScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RunDetailScreen { align: center middle; }
    RunDetailScreen #detail-box {
        width: 90;
        height: auto;
        max-height: 90%;
        border: round $primary;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    RunDetailScreen #detail-head { height: auto; }
    RunDetailScreen #reps { height: auto; max-height: 20; }
    RunDetailScreen #detail-guard { height: auto; }
    RunDetailScreen #detail-extra { height: auto; max-height: 16; }
    RunDetailScreen #detail-status { height: 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, row: RunRow, store: Any) -> None:
        super().__init__()
        self.row = row
        self.store = store
        self.decode: list[float] | None = None
        self.ttft: list[float] | None = None
        self.tags: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        r = self.row
        with Vertical(id="detail-box") as box:
            box.border_title = plain(f"Run {r.run_id[:8]} · {r.model}", one_line=True)  # a title is markup
            head = Text(f"{date_label(r.start_ms)} · {r.engine_kind} {r.engine_version} · {r.host or '-'} · {r.status}")
            if r.decode_tps_median is not None:
                head.append(f"\ndecode median {r.decode_tps_median:.1f} tok/s")
                if r.decode_tps_cv_pct is not None:
                    head.append(f" · CV {r.decode_tps_cv_pct:.1f}%")
            yield Static(head, id="detail-head")
            yield DataTable(id="reps", cursor_type="none", zebra_stripes=True)
            yield Static("", id="detail-guard")
            yield Static("", id="detail-extra")
            yield Label("loading repetitions…", id="detail-status")

    def on_mount(self) -> None:
        table = self.query_one("#reps", DataTable)
        table.add_column("rep", key="rep")
        table.add_column("decode tok/s", key="decode")
        table.add_column("TTFT s", key="ttft")
        self.load_detail()

    @work(thread=True, group="run-detail", exclusive=True, exit_on_error=False)
    def load_detail(self) -> None:
        from sparkctl.services.runs import quote

        try:
            decode = self.store.metric_history(self.row.run_id, REP_DECODE)
            ttft = self.store.metric_history(self.row.run_id, REP_TTFT)
            acceptance = (self.store.metric_history(self.row.run_id, REP_ACCEPTANCE)
                          if self.row.spec_acceptance_pct is not None else [])
            found = self.store.search_runs(f"attributes.run_id = {quote(self.row.run_id)}", max_results=1)
        except Exception as exc:  # TrackingError, or anything else: a line, never a crash
            if not get_current_worker().is_cancelled:
                self.post_message(RunDetailFailed(error_line(exc)))
            return
        tags = (found[0].get("tags") or {}) if found else {}
        try:
            extra = run_extra(self.store, self.row)
        except Exception as exc:  # an artifact that cannot be read: the rest of the detail still shows
            extra = Text(f"artifacts not shown: {error_line(exc)}", style="yellow")
        if not get_current_worker().is_cancelled:
            self.post_message(RunDetailLoaded(decode, ttft, tags, extra, acceptance))

    def on_run_detail_loaded(self, message: RunDetailLoaded) -> None:
        self.decode, self.ttft, self.tags = message.decode, message.ttft, message.tags
        table = self.query_one("#reps", DataTable)
        table.clear()
        if message.acceptance and "acc" not in table.columns:
            table.add_column("acc %", key="acc")  # beside decode: a drafter's share of the speed
        n = max(len(message.decode), len(message.ttft))
        for i in range(n):
            d = message.decode[i] if i < len(message.decode) else None
            t = message.ttft[i] if i < len(message.ttft) else None
            a = message.acceptance[i] if i < len(message.acceptance) else None
            table.add_row(
                Text(str(i + 1), justify="right"),
                Text("-" if d is None else f"{d:.1f}", justify="right"),
                Text("-" if t is None else f"{t:.3f}", justify="right"),
                *([Text("-" if a is None else f"{a:.1f}", justify="right")] if message.acceptance else []),
            )
        guard = Text()
        guard.append("flags: ", style="bold")
        guard.append(" ".join(self.row.flags) or "none")
        bench_flags = message.tags.get("guard.flags", "").strip()
        if bench_flags:
            guard.append(f"\nbench flags: {bench_flags}", style="yellow")
        reasons = message.tags.get("guard.invalid_reasons", "").strip()
        guard.append("\ninvalid: ", style="bold")
        guard.append(reasons or "no", style="bold red" if reasons else "")
        self.query_one("#detail-guard", Static).update(guard)
        if message.extra is not None:
            self.query_one("#detail-extra", Static).update(message.extra)
        what = f"{n} repetition(s)" if self.row.kind != "eval" else f"{self.row.eval_items or 0} item(s)"
        self.query_one("#detail-status", Label).update(f"{what} · Esc closes")

    def on_run_detail_failed(self, message: RunDetailFailed) -> None:
        label = self.query_one("#detail-status", Label)
        label.update(Text(f"✘ {message.error}", style="bold red"))

    def action_close(self) -> None:
        self.dismiss(None)


# ---------------------------------------------------------------------------- screen


class RunsScreen(Screen):
    # the table, not the filter, has the focus whenever the screen comes back (after a
    # dialog, a mode switch): keys do what the footer says; / moves to the filter
    AUTO_FOCUS = "#runs"
    DEFAULT_CSS = """
    RunsScreen #runs-filter-row { height: 1; padding: 0 1; }
    RunsScreen #runs-filter-row Label { padding: 0 1 0 0; color: $text-muted; }
    RunsScreen #runs-filter { width: 1fr; }
    RunsScreen #runs-box {
        height: 1fr;
        min-height: 6;
        border: round $primary;
        border-title-color: $primary;
        border-title-style: bold;
    }
    RunsScreen #runs { height: 1fr; }
    RunsScreen #runs-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    BINDINGS = [
        # r and s out of the footer: at 80 columns it keeps the keys to the other screens
        # (the runs reload on their own when the screen comes back; `?` lists every key)
        Binding("r", "reload", "Reload", show=False),
        Binding("slash", "focus_filter", "Filter"),
        Binding("s", "next_sort", "Sort", show=False),
        Binding("S", "flip_sort", "Reverse", show=False),
        Binding("space", "mark", "Mark"),
        Binding("v", "compare", "Compare"),
        Binding("c", "chart", "Chart"),
        Binding("M", "matrix", "Sweep matrix", show=False),
        Binding("n", "more", "More", show=False),
        Binding("B", "rebench", "Re-bench lanes", show=False),
        Binding("R", "regressions", "Regressions", show=False),
        Binding("escape", "leave_filter", "Leave filter", show=False),
        Binding("P", "promote", "Promote", show=False),
        Binding("g", "group_hosts", "Group by host", show=False),
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rows: list[RunRow] = []  # the loaded page, newest first
        self.by_id: dict[str, RunRow] = {}
        self._cells: dict[str, tuple[RunRow, tuple[Cell, ...]]] = {}
        self.shown: list[RunRow] = []
        self.sort_column: str | None = None  # None: as loaded (newest first)
        self.by_host = False  # g: rows grouped by host (host order, the sort within each)
        self.sort_reverse = False
        self.error: str | None = None
        # not `loading`: that is Textual's own reactive, which hides the screen's widgets
        # (and so moves the focus to the filter) while it is true
        self.fetching = False
        self.limit = PAGE  # n loads the next page
        self.marked: list[str] = []  # models marked for a head to head, in marking order

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        # one line with its label: the runs keep the rows at 80x24
        with Horizontal(id="runs-filter-row"):
            yield Label("filter (/)")
            yield Input(placeholder="model, engine version, host:NAME", id="runs-filter", compact=True)
        with Vertical(id="runs-box") as box:
            box.border_title = "Runs"
            yield RowTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield Label("loading…", id="runs-status")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        self._set_columns()
        table.focus()
        self._mounted_once = False
        self.action_reload()

    def on_screen_resume(self) -> None:
        """Back on the screen (from the Bench or Eval screen, a promotion, a dialog): read the
        runs again, so a run that just ended is listed without pressing r."""
        if getattr(self, "_mounted_once", False) and not self.fetching:
            self.action_reload()
        self._mounted_once = True

    # -- loading -------------------------------------------------------------------------
    def action_reload(self) -> None:
        self.fetching = True
        self.query_one("#runs-status", Label).update("loading…")
        self.load_runs()

    @work(thread=True, group="runs-list", exclusive=True, exit_on_error=False)
    def load_runs(self) -> None:
        try:
            store = getattr(self.app, "store", None)
            if store is None:
                from sparkctl.services.factory import make_spool_and_store

                _, store = make_spool_and_store(self.app.config)
                self.app.store = store
            rows = list_runs(store, limit=self.limit)
        except Exception as exc:  # TrackingError (unreachable, bad URI) or a setup error: one line
            if not get_current_worker().is_cancelled:
                self.post_message(RunsFailed(error_line(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(RunsLoaded(rows))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.fetching = False
        self.error = None
        self.rows = list(message.rows)
        self.by_id = {r.run_id: r for r in self.rows}
        self._fill()

    def _cells_of(self, row: RunRow) -> tuple[Cell, ...]:
        # built once per loaded run: the filter refills the table without re-rendering text
        got = self._cells.get(row.run_id)
        if got is None or got[0] is not row:
            got = self._cells[row.run_id] = (row, cells(row))
        return got[1]

    def on_runs_failed(self, message: RunsFailed) -> None:
        self.fetching = False
        self.error = message.error
        self.query_one("#runs-status", Label).update(Text(f"✘ {message.error}", style="bold red"))

    # -- the table -------------------------------------------------------------------------
    def _layout(self) -> tuple[str, ...]:
        return COLUMN_KEYS if self.size.width >= WIDE else NARROW_KEYS

    def _set_columns(self, widths: dict[str, int] | None = None) -> None:
        """The columns in the order the width calls for (see NARROW_KEYS)."""
        table = self.query_one("#runs", DataTable)
        self.layout_keys = self._layout()
        labels = {key: label for label, key in COLUMNS}
        table.clear(columns=True)
        narrow = self.layout_keys != COLUMN_KEYS
        self._narrow_widths = widths if narrow else None
        widths = {"flags": FLAGS_NARROW, "model": MODEL_NARROW, **(widths or {})} if narrow else {}
        for key in self.layout_keys:
            table.add_column(labels[key], key=key, width=widths.get(key))

    def _first_widths(self, rows: list[RunRow]) -> dict[str, int]:
        """Under WIDE columns, the first columns as wide as their widest cell, given with the
        columns: a DataTable sizes auto-width columns only when it next idles, and a frame
        drawn before that keeps the header's widths ("REFUSE", "benc")."""
        labels = {key: label for label, key in COLUMNS}
        out = {}
        for key in NARROW_KEYS[:5]:
            i = COLUMN_KEYS.index(key)
            out[key] = max([len(labels[key]), *(self._cells_of(r)[i].cell_len for r in rows)])
        out["model"] = min(out["model"], MODEL_NARROW)
        return out

    def on_resize(self) -> None:
        if getattr(self, "layout_keys", None) not in (None, self._layout()):
            self._set_columns()
            self._fill()

    def _fill(self) -> None:
        table = self.query_one("#runs", DataTable)
        needle = self.query_one("#runs-filter", Input).value
        self.shown = [r for r in self.rows if matches(r, needle)]
        if self.layout_keys != COLUMN_KEYS:
            widths = self._first_widths(self.shown)
            if widths != getattr(self, "_narrow_widths", None):
                self._set_columns(widths)
        table.clear()
        where = [COLUMN_KEYS.index(k) for k in self.layout_keys]
        for r in self._grouped(self.shown) if self.by_host else self.shown:
            row = self._cells_of(r)
            table.add_row(*(row[i] for i in where), key=r.run_id)
        if self.sort_column is not None and not self.by_host:
            table.sort(self.sort_column, key=_sort_key(self.sort_reverse), reverse=self.sort_reverse)
        self._status()

    def _grouped(self, rows: list[RunRow]) -> list[RunRow]:
        """Rows by host name, each host's rows in the current sort (newest first unsorted)."""
        if self.sort_column is not None:
            i, key = COLUMN_KEYS.index(self.sort_column), _sort_key(self.sort_reverse)
            rows = sorted(rows, key=lambda r: key(self._cells_of(r)[i]), reverse=self.sort_reverse)
        return sorted(rows, key=lambda r: r.host.lower())  # stable: the sort holds within a host

    def action_group_hosts(self) -> None:
        self.by_host = not self.by_host
        self._fill()

    def _status(self) -> None:
        if self.error is not None:
            return
        text = f"{len(self.shown)} of {len(self.rows)} run(s)"
        if len(self.rows) >= self.limit:
            text += f" (the newest {self.limit}; n: {PAGE} more)"
        if self.marked:
            text += " · marked " + ", ".join(self.marked) + " (v compares)"  # model names: shown as plain text
        if self.sort_column is not None:
            label = dict((k, lab) for lab, k in COLUMNS)[self.sort_column]
            text += f" · sorted by {label} {'↓' if self.sort_reverse else '↑'}"
        if self.by_host:
            text += f" · grouped by host ({len({r.host for r in self.shown})})"
        # the footer names the other keys: a narrow line keeps the counts whole
        text += " · Enter details · space mark · c chart · M sweep · / filter · s sort" if self.size.width >= WIDE \
            else " · Enter details · M sweep"
        self.query_one("#runs-status", Label).update(plain(text))

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._fill()

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one("#runs", DataTable).focus()

    def action_leave_filter(self) -> None:
        self.query_one("#runs", DataTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    # -- sorting -----------------------------------------------------------------------------
    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort the shown rows by ``column``; the same column again flips the direction.
        Numbers start high-first (the best tok/s on top), text low-first."""
        if reverse is None:
            if column == self.sort_column:
                reverse = not self.sort_reverse
            else:
                reverse = column in ("date", "decode", "cv", "ttft", "prefill", "jpt", "roofline")
        self.sort_column, self.sort_reverse = column, reverse
        if self.by_host:
            self._fill()
            return
        self.query_one("#runs", DataTable).sort(column, key=_sort_key(reverse), reverse=reverse)
        self._status()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def action_next_sort(self) -> None:
        keys = self.layout_keys  # in the order the columns are shown
        i = keys.index(self.sort_column) + 1 if self.sort_column in keys else 0
        self.sort_by(keys[i % len(keys)])

    def action_flip_sort(self) -> None:
        if self.sort_column is not None:
            self.sort_by(self.sort_column, reverse=not self.sort_reverse)

    # -- detail ------------------------------------------------------------------------------
    def selected(self) -> RunRow | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None
        return self.by_id.get(key)

    # -- marks, charts, head to head, more, re-bench ------------------------------------------
    def action_mark(self) -> None:
        row = self.selected()
        if row is None or not row.model:
            return
        if row.model in self.marked:
            self.marked.remove(row.model)
        else:
            self.marked.append(row.model)
        self._status()

    def action_compare(self) -> None:
        store = getattr(self.app, "store", None)
        models = list(self.marked)
        if len(models) < 2:
            self.notify("mark two or more models with space, then v compares them", severity="warning")
            return
        if store is not None:
            from sparkctl.tui.screens.run_charts import HeadToHeadScreen

            self.app.push_screen(HeadToHeadScreen(store, models, lanes=self.app.config.lanes,
                                                  margins=self.app.config.promote.quality_margin_pp,
                                                  limits=self.app.config.promote.limits()))

    def action_chart(self) -> None:
        row, store = self.selected(), getattr(self.app, "store", None)
        if row is not None and store is not None and row.model:
            from sparkctl.tui.screens.run_charts import HistoryChartScreen

            self.app.push_screen(HistoryChartScreen(store, row.model))

    def action_matrix(self) -> None:
        """M: the workload sweep the selected run is a cell of (its sweep.id tag), as a
        matrix and charts; a run outside any sweep says so."""
        row, store = self.selected(), getattr(self.app, "store", None)
        if row is not None and store is not None:
            from sparkctl.tui.screens.sweep_matrix import SweepMatrixScreen

            self.app.push_screen(SweepMatrixScreen(store, run_id=row.run_id))

    def action_promote(self) -> None:
        """P: promote the selected run's model to a lane, after a dialog that shows the
        preconditions and their evidence (the same checks as `sparkctl promote`)."""
        row, store = self.selected(), getattr(self.app, "store", None)
        lanes = list(self.app.config.lanes)
        if row is None or not row.model or store is None:
            return
        if not lanes:
            self.notify("no lanes in [lanes] of your sparkctl.toml to promote into", severity="warning")
            return
        from sparkctl.tui.screens.promote_dialog import PromoteDialog

        lane = "production" if "production" in lanes else lanes[0]
        self.app.push_screen(PromoteDialog(row.model, lanes, lane, store), callback=self._promote_confirmed)

    def _promote_confirmed(self, answer) -> None:
        if answer is not None:
            plan, force = answer
            self.notify(f"promoting {plan.model} to lane {plan.lane}: loading and verifying…", timeout=5)
            self.run_promotion(plan, force)

    @work(group="promote", exclusive=True, exit_on_error=False)
    async def run_promotion(self, plan, force: bool) -> None:
        from sparkctl.tui.screens.promote_dialog import apply_switch

        message, failed = await apply_switch(self.app, plan, force)
        self.notify(message, severity="error" if failed else "information", timeout=20 if failed else 15)
        self.action_reload()

    def action_regressions(self) -> None:
        store = getattr(self.app, "store", None)
        if store is not None:
            from sparkctl.tui.screens.run_charts import RegressionsScreen

            self.app.push_screen(RegressionsScreen(store))

    def action_more(self) -> None:
        if len(self.rows) >= self.limit and not self.fetching:
            self.limit += PAGE
            self.action_reload()

    def action_rebench(self) -> None:
        """Re-bench the lane models whose last valid bench ran on another engine version,
        with the settings of that run (the Bench screen shows it running)."""
        report = getattr(self.app, "report", None)
        version = report.engine.version if report is not None and report.engine.reachable else None
        if not version:
            self.notify("the engine's version is not known yet (is it reachable?)", severity="warning")
            return
        if not self.app.config.lanes:
            self.notify("no [lanes] in the config: nothing to re-bench", severity="warning")
            return
        self.find_rebench(report.engine.kind, version)

    @work(thread=True, group="rebench", exclusive=True, exit_on_error=False)
    def find_rebench(self, kind: str, version: str) -> None:
        from sparkctl.core.rebench import rebench_blocker
        from sparkctl.services.runs.drift import rebench_overrides, stale_lanes

        report = getattr(self.app, "report", None)
        spilled = report.spilled_lane_names if report is not None else frozenset()
        try:
            store = self.app.store
            stale = stale_lanes(store, self.app.config.lanes, kind, version)
            left = [(s, rebench_blocker(s.run is not None, s.lane in spilled)) for s in stale]
            plans = [(s, *rebench_overrides(store, s.run)) for s, why in left if not why]
        except Exception as exc:  # a line, and the table keeps its own status
            self.app.call_from_thread(self.notify, f"re-bench not planned: {error_line(exc)}", severity="error")
            return
        self.post_message(RebenchPlanned(plans, [(s, why) for s, why in left if why]))

    async def on_rebench_planned(self, message: "RebenchPlanned") -> None:
        # the lanes B leaves out, and why, in the words the dashboard uses
        skipped = "; ".join(f"{s.lane} ({s.model}): {why}" for s, why in message.skipped)
        if not message.plans:
            text = (f"nothing B can re-bench: {skipped}" if skipped
                    else "every lane model has a valid bench on this engine version")
            self.notify(text, severity="warning" if skipped else "information", timeout=10)
            return
        if skipped:
            self.notify(f"left out: {skipped}", severity="warning", timeout=10)
        # one bench per distinct set of settings would be exact; lanes benched together share
        # the first one's settings, and the Bench screen says which
        _stale, overrides, notes = message.plans[0]
        models = [s.model for s, _o, _n in message.plans]
        for note in notes:
            self.notify(note, severity="warning", timeout=8)
        await self.app.switch_mode("bench")  # mounted (its form exists) once awaited
        start = getattr(self.app.screen, "start_with", None)
        if callable(start):
            start(models, overrides, why="re-bench after an engine change: " +
                  "; ".join(s.message for s, _o, _n in message.plans))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.by_id.get(event.row_key.value)
        store = getattr(self.app, "store", None)
        if row is not None and store is not None:
            self.app.push_screen(RunDetailScreen(row, store))
