"""The dashboard: budget bar, resident models, engine, GPU, pressure and history."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.events import ScreenResume
from textual.screen import Screen
from textual.widget import MountError, Widget
from textual.widgets import DataTable, Header, Label, Static

from sparkctl.core.budget import Level, MemoryBudget
from sparkctl.core.fmt import gib, na, size
from sparkctl.core.names import model_key
from sparkctl.core.snapshots import GIB, GpuMemory, MemInfo, Pressure, Unavailable
from sparkctl.core.placement import spill_headline, spill_warning
from sparkctl.core.rebench import rebench_blocker
from sparkctl.services.status import StatusReport
from sparkctl.tui.breakpoints import preset_breakpoints
from sparkctl.tui.shown import catch_up, watch_while_shown
from sparkctl.tui.widgets.budget_bar import BudgetBar
from sparkctl.tui.widgets.drift_gate import DriftGate
from sparkctl.tui.widgets.notes import Note
from sparkctl.tui.widgets.warning_lines import WarningLine, WarningLines

SPARK_EVERY = 3  # redraw the history sparklines every this many samples
RESIDENT_COLUMNS = ("Model", "Lane", "Size", "Processor", "Context", "Until", "Quant")
RUNNER_COLUMN = "Runner"  # wide terminals, once a runner is known: ctx per slot x slots, KV, FA, build
WIDE = 100  # terminal columns from which the resident table shows Quant (below: in Models)


class Panel(Static):
    """A bordered text panel that only repaints when its text changes."""

    DEFAULT_CSS = """
    Panel { border: round $panel-lighten-2; padding: 0 1; height: auto; }
    """

    def set_text(self, text: Text | str) -> None:
        set_if_changed(self, text)


def _home(path: str) -> str:
    """A path as a user types it: ~ for the home directory."""
    import os

    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home + os.sep) else path


def set_if_changed(widget: Static, text: Text | str) -> None:
    """Update a Static only when its text changed, and lay the screen out again only when
    the text's shape changed: most refreshes change a figure in place ("1.2%" to "1.3%"),
    and a layout of the whole screen every second is most of an idle dashboard's CPU."""
    key = text.markup if isinstance(text, Text) else text
    if getattr(widget, "_sparkctl_key", None) != key:
        widget._sparkctl_key = key
        shape = _shape(text)
        same = shape == getattr(widget, "_sparkctl_shape", None)
        widget._sparkctl_shape = shape
        widget.update(text, layout=not same)


def _shape(text: Text | str) -> tuple[int, ...]:
    """The cell width of each line: text of the same shape takes the same room wherever it
    is laid out (wrapped or not), so changing it needs a repaint, not a layout."""
    plain = text.plain if isinstance(text, Text) else text
    return tuple(cell_len(line) for line in plain.split("\n"))


class DashboardScreen(Screen):
    BINDINGS = [("r", "app.refresh_now", "Refresh now"), ("l", "lanes", "Lanes"),
                Binding("N", "warnings", "Warnings and messages", show=False),
                Binding("P", "app.put_back", "Put back", show=False)]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._gates = {"pressure": DriftGate(far=1.0), "spark-mem": DriftGate(far=1.0),
                       "sparks": DriftGate(far=float("inf"))}
        self._history_shown = False  # its boxes are mounted after the first frame
        self._history_seen = 0
        self._history_ticks = SPARK_EVERY * 100  # the first samples are drawn at once
        self._resumed = False  # shown once already
        self._written = False  # a frame of it written to the terminal
        self._last_report: StatusReport | None = None
        preset_breakpoints(self)  # styled once for its size, not again at the first resize

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="budget-box") as v:
            v.border_title = "Memory budget"
            yield BudgetBar(id="budget")
        with Vertical(id="resident-box") as v:
            v.border_title = "Resident models"
            yield Static("", id="first-run")
            yield DataTable(id="resident", cursor_type="row", zebra_stripes=True)
            # under the rows, never above them: one line per warning, N opens them whole
            yield WarningLines(id="warnings")
        with Horizontal(id="panels"):
            yield Panel("connecting…", id="engine")
            yield Panel("reading…", id="gpu")
            yield Panel("reading…", id="pressure")
        if self.app.config.engines:  # only with [engines.NAME] entries: the usual layout stays as it was
            yield Panel("connecting…", id="engines")
        # the history's boxes and the footer's keys come after the first frame (_after_first_frame):
        # their room is kept, so nothing moves when they come
        yield Horizontal(id="history")
        yield Widget(id="keys")

    async def _after_first_frame(self) -> None:
        """Once the first frame is on the terminal: the app's own work that waited for it,
        then the two history boxes and the footer. A history of one sample says nothing
        yet, and the keys (one widget each) can follow a frame later; styling, laying out
        and drawing them was ~15-20% of the Python calls before the first frame (about
        50-90 ms of CPU on a 2-core box). Their room (#history's fixed height, #keys' line)
        is in the first frame. Their modules are imported here (Textual's Sparkline brings
        the statistics module with it, the footer Textual's Footer)."""
        first_frame_written = getattr(self.app, "first_frame_written", None)
        if first_frame_written is not None:
            first_frame_written()
        if self.app._exit or not self.is_attached:
            return  # quit before this came (ctrl+q at once): nothing more to show
        from sparkctl.tui.widgets.footer import KeysFooter
        from sparkctl.tui.widgets.history_sparkline import HistorySparkline

        mem = Vertical(HistorySparkline([], id="spark-mem", bounds=(0.0, 1.0)),  # 0..MemTotal once known
                       Label("", id="spark-mem-label"), classes="spark")
        mem.border_title = "Available memory"
        gpu = Vertical(HistorySparkline([], id="spark-gpu", bounds=(0.0, 100.0)), Label("", id="spark-gpu-label"),
                       classes="spark")
        gpu.border_title = "GPU utilization"
        try:
            await self.query_one("#history", Horizontal).mount(mem, gpu)
            if self.app._exit or not self.is_attached:
                return  # quit while the history boxes were mounted
            await self.query_one("#keys").mount(KeysFooter())
        except (MountError, NoMatches):  # the app quit while they were mounted
            return
        self._history_shown = True
        if self._last_report is not None:
            self._show_history(self._last_report)

    def _compositor_refresh(self) -> None:
        # Inside App.run's start-up batch Textual renders the screen and then drops the
        # frame (App._display writes nothing while a batch is open; textual is pinned):
        # ~20 ms of CPU for nothing. Left dirty, it is drawn by the first frame after.
        if self.app._batch_count:
            return
        super()._compositor_refresh()
        if not self._written:
            # This is the first frame written. Not Textual's Ready, nor a call_after_refresh
            # from on_mount: both come before it, as the refresh they follow is the one
            # dropped in the start-up batch, and what they started was paid for by the
            # first frame.
            self._written = True
            self.call_later(self._after_first_frame)

    def action_lanes(self) -> None:
        from sparkctl.tui.screens.lanes import LanesScreen

        self.app.push_screen(LanesScreen())

    def action_warnings(self) -> None:
        """N: every warning the resident box shows in one line, whole; then the messages."""
        from sparkctl.tui.widgets.notes import NotesScreen

        level = {"error": "error", "warning": "warning"}
        messages = [Note(text, level.get(sev, "info"), at) for at, sev, text in reversed(self.app.messages)]
        warnings = self.query_one("#warnings", WarningLines).notes
        if not isinstance(self.app.screen, NotesScreen):
            self.app.push_screen(NotesScreen("Warnings, then messages (newest first)", [*warnings, *messages]))

    def _resident_columns(self) -> tuple[str, ...]:
        if self.app.size.width < WIDE:
            return RESIDENT_COLUMNS[:-1]
        return RESIDENT_COLUMNS + ((RUNNER_COLUMN,) if self._runners() else ())

    def _runners(self) -> dict:
        """This machine's runners (the fleet's view of another host has none)."""
        return getattr(self.app, "runners", None) or {}

    def _show_runners(self, _runners: dict) -> None:
        self.on_resize()  # a Runner column comes or goes
        if self.app.report is not None:
            self._rows_key = None
            self._show_report(self.app.report)

    def on_resize(self) -> None:
        if getattr(self, "_columns", None) not in (None, self._resident_columns()):
            table = self.query_one("#resident", DataTable)
            table.clear(columns=True)
            self._columns = self._resident_columns()
            _add_columns(table, self._columns)
            self._rows_key = self._widths = None  # refilled, columns sized, at the next report
            if self.app.report is not None:
                self._show_report(self.app.report)

    def on_mount(self) -> None:
        table = self.query_one("#resident", DataTable)
        self._columns = self._resident_columns()
        _add_columns(table, self._columns)
        first = self.query_one("#first-run", Static)
        first.styles.padding = (0, 1)
        first.display = False
        self.query_one("#engine", Panel).border_title = "Engine"
        self.query_one("#gpu", Panel).border_title = "GPU"
        self.query_one("#pressure", Panel).border_title = "Memory pressure"
        self._watch_sources()

    def _watch_sources(self) -> None:
        """This machine's state, as the app samples it (the fleet's read-only view of
        another host feeds the same widgets from that host's status instead)."""
        watch_while_shown(self, "report", self._show_report)
        watch_while_shown(self, "stale_lanes", self._show_drift)
        watch_while_shown(self, "runners", self._show_runners, init=False)
        if self.app.config.engines:
            self.query_one("#engines", Panel).border_title = "Bench engines"
            watch_while_shown(self, "engines_status", self._show_engines)

    def on_screen_resume(self, event: ScreenResume) -> None:
        if not self._resumed:
            self._resumed = True
            if self._css_update_count == self.app._css_update_count:
                # Textual styles the whole screen again when it is first shown, though every
                # widget was styled as it was composed, with the stylesheet as it still is
                # (preset_breakpoints): ~30 widgets, 10-20 ms of CPU before the first frame
                # on a 2-core box, for styles that come out the same. Handled here, before
                # Screen's own handler reads it (textual is pinned).
                event.refresh_styles = False
        catch_up(self)  # what changed while another mode was on screen

    def _contenders(self):
        """Model keys this machine's sparkctl marked contender (the legend says so too)."""
        return getattr(self.app, "contenders", ())

    def _engine_down_for(self) -> float | None:
        return self.app.engine_down_for()

    # ---- rendering a report --------------------------------------------------------------

    def _show_drift(self, stale: tuple) -> None:
        self._stale = stale
        if self.app.report is not None or not stale:
            self._show_warnings(self.app.report)

    def _show_warnings(self, r: StatusReport | None) -> None:
        """Every warning of the resident box, loudest first, as one line each (widgets/
        warning_lines.py): models a dead bench left changed, lanes spilled to the CPU, lanes
        to re-bench (with the key that does it, or why no key can), lanes not resident, and
        what NVML says of the engine's memory."""
        items: list[WarningLine] = []

        def add(line: Text, text: str, level: str) -> None:
            items.append(WarningLine(line, Note(text, level)))

        spilled: set[str] = set()
        if r is not None:
            for w in r.residency_warnings:
                # a view only shows it; the repair is the user's to start
                line = Text(f"⚠ {_residency_headline(w)}", style="bold red")
                line.append(" (P)", style="dim")
                add(line, f"{w}; P puts them back (what `sparkctl lanes --restore` does)", "error")
            for row in r.rows:
                if row.lane is None:
                    continue
                m = row.model
                whole = spill_warning(row.lane, m.name, m.size, m.size_vram)
                if whole:
                    spilled.add(row.lane)
                    add(Text(f"⚠ {spill_headline(row.lane, m.name, m.size, m.size_vram)}", style="bold yellow"),
                        whole, "warning")
        notes = [entry[1] for entry in getattr(self, "_stale", ()) if not entry[0]]
        for entry in getattr(self, "_stale", ()):
            lane, message = entry[0], entry[1]
            if not lane:
                continue  # a note, not a lane: how the history was read (below)
            has_run = bool(entry[2]) if len(entry) > 2 else True
            blocker = rebench_blocker(has_run, lane in spilled)
            if lane in spilled:
                hint, why = " (spilled: not now)", f"; not now: {blocker}"
            elif blocker:
                hint, why = " (b)", "; the Bench screen (b) benches it"
            else:
                hint, why = " (h then B)", "; h then B re-benches it with the settings of its last run"
            line = Text(f"⚠ {message}", style="bold yellow")
            line.append(hint, style="dim")
            add(line, message + why, "warning")
        if r is not None:
            for lane, model in r.lanes_not_resident:
                line = Text(f"○ lane {lane}: {model} NOT RESIDENT", style="bold yellow")
                line.append(" (its next request loads it cold)", style="dim")
                add(line, f"lane {lane}: {model} is not resident: the router's next request to it loads it cold",
                    "warning")
            self._attribution(r, add)
        for message in notes:  # the history read through MLflow's client (slower): said, dim
            add(Text(message, style="dim"), message, "info")
        self.query_one("#warnings", WarningLines).show(items)

    def _attribution(self, r: StatusReport, add) -> None:
        """What is known of the resident models' memory: NVML's share of the engine's."""
        a = r.attribution
        if not r.engine.reachable:
            add(Text("engine unreachable: resident models unknown", style="bold red"),
                "engine unreachable: resident models unknown", "error")
        elif r.engine.error is not None:
            add(Text("engine error: resident models unknown", style="bold red"),
                "engine error: resident models unknown", "error")
        elif not r.rows:
            add(Text("no models loaded", style="dim"), "no models loaded", "info")
        elif a is not None and a.mismatch:
            line = (f"⚠ NVML sees {gib(a.nvml_bytes)} of the {gib(a.claimed_vram)} the engine reports on GPU"
                    if a.nvml_bytes is not None else f"⚠ {a.mismatch}")
            add(Text(line, style="bold yellow"), a.mismatch, "warning")
        elif a is not None and a.nvml_bytes is not None:
            text = (f"NVML attributes {gib(a.nvml_bytes)} to the engine's processes "
                    f"(engine reports {gib(a.claimed_vram)} on GPU)")
            add(Text(text), text, "info")
        else:
            add(Text("NVML per-process memory: n/a", style="dim"), "NVML per-process memory: n/a", "info")

    def _show_report(self, report: StatusReport | None) -> None:
        if report is None:
            return
        self.query_one(BudgetBar).show(report.budget, self._contenders())
        self._show_resident(report)
        self._show_engine(report)
        self._show_first_run(report)
        self._show_gpu(report)
        self._show_pressure(report)
        self._last_report = report
        if self._history_shown:
            self._show_history(report)

    def _show_first_run(self, r: StatusReport) -> None:
        """No engine answered: what was looked for, how that address was chosen, how to
        point elsewhere; the sampler keeps retrying, so this goes away by itself."""
        panel = self.query_one("#first-run", Static)
        down = not r.engine.reachable and r.engine.error != "connecting…"
        panel.display = down
        self.query_one("#resident", DataTable).display = not down
        if not down:
            return
        from sparkctl import paths
        from sparkctl.core.redact import redact_uri

        cfg = self.app.config
        source = cfg.sources.get("engine.host")
        how = ("$OLLAMA_HOST" if source == "$OLLAMA_HOST" else f"[engine] host in {_home(source)}" if source
               else "default: no config, no $OLLAMA_HOST")
        config_file = _home(cfg.source) if cfg.source != "built-in defaults" else (
            f"{_home(str(paths.user_config_file()))} (sparkctl config --init)")
        # four short lines: at 80x24 the box holds about that many
        t = Text()
        t.append(f"No engine at {redact_uri(r.engine.host)}", style="bold yellow")
        t.append(f" ({how})\n")
        t.append("Start it: `ollama serve`")
        t.append(f" · retrying every {cfg.ui.refresh_s:g} s (r: now)\n", style="dim")
        t.append("Elsewhere: OLLAMA_HOST=http://HOST:11434, or [engine] host in\n")
        t.append(config_file)
        set_if_changed(panel, t)

    def _show_resident(self, r: StatusReport) -> None:
        table = self.query_one("#resident", DataTable)
        runners = self._runners()
        rows = []
        for row in r.rows:
            m = row.model
            # a side-loaded model is the contender: named so, in the legend's colour for it
            lane = row.lane or ("contender" if model_key(m.name) in self._contenders() else None)
            lane_colour = self.app.theme_variables.get(f"lane-{lane or 'other'}", "")
            processor = Text(row.placement, style="bold red" if row.placement != "100% GPU" else "")
            # every cell a Text: a str cell is read as Rich markup (a model's or a quant's
            # name is the engine's, never markup), and that read loads Rich's emoji table
            rows.append((
                Text(m.name, style=f"bold {lane_colour}"),
                Text(lane or "-"),
                Text(size(m.size)),  # a 1 MB model is "976.6 KiB", not "0.0 GiB"
                processor,
                Text(str(m.context_length) if m.context_length else "n/a"),
                Text(row.until),
                Text(m.details.quantization_level or "-"),
                Text(runners[m.name].short() if m.name in runners else "-"),
            ))
        width = len(self._columns)  # narrow: Quant left out; Runner only once one is known
        key = [tuple(str(c) for c in row[:width]) for row in rows]
        if key != getattr(self, "_rows_key", None):
            self._rows_key = key
            # Each column as wide as its widest cell, given with the columns: a DataTable
            # sizes auto-width columns only when it next idles, and a frame drawn before
            # that stays cached at the old widths ("gpt-o" for "gpt-oss:120b") until the
            # rows change again.
            widths = [max([cell_len(label), *(cell_len(str(row[i])) for row in rows)])
                      for i, label in enumerate(self._columns)]
            if widths != getattr(self, "_widths", None):
                self._widths = widths
                table.clear(columns=True)
                for label, cells in zip(self._columns, widths):
                    table.add_column(Text(label), width=cells)
            else:
                table.clear()
            for row in rows:
                table.add_row(*row[:width])
        # its height said at once (the header line and a line per row, what its auto height
        # comes to, plus the horizontal scrollbar's line when the columns are wider than the
        # screen, which auto height adds too): a DataTable works its height out only when
        # it next idles, after the frame in progress, which then showed one row of two
        wide = sum(w + 2 * table.cell_padding for w in getattr(self, "_widths", [])[:width])
        room = table.size.width or self.app.size.width
        height = 1 + len(rows) + (table.styles.scrollbar_size_horizontal if wide > room else 0)
        if table.styles.height is None or table.styles.height.value != height:
            table.styles.height = height
        self._show_warnings(r)

    def _compact(self) -> bool:
        """The three panels in three short lines each: a short terminal (80x24) gives their
        rows to the resident models, a narrow one their width to nothing that wraps."""
        return self.has_class("-short") or self.app.size.width < WIDE

    def _show_engine(self, r: StatusReport) -> None:
        e = r.engine
        if self._compact():
            t = self._engine_status(r, compact=True)
            t.append(e.host, style="dim")
        else:
            t = Text(f"{e.kind} · {e.host}\n")
            t.append_text(self._engine_status(r, compact=False))
            if not (e.reachable and e.error is None):
                t.append("retrying every refresh…", style="dim")
        self.query_one("#engine", Panel).set_text(t)

    def _engine_status(self, r: StatusReport, compact: bool) -> Text:
        """Whether the engine answers, its version and what it holds (or its error); in
        fewer words when `compact`."""
        e = r.engine
        t = Text()
        version = " " if compact else "   version "
        if e.reachable and e.error is not None:
            # it answered, with an error: up but failing (a runner that died, an HTTP 500)
            t.append("● ENGINE ERROR", style="bold red")
            if e.version:
                t.append(f"{version}{e.version}")
            t.append(f"\n{'' if compact else 'engine error: '}{e.error}\n", style="red")
        elif e.reachable:
            t.append("● reachable", style="bold green")
            t.append(f"{version}{e.version}\n")
            t.append(f"{e.kind} · {len(e.resident)} resident\n" if compact else f"{len(e.resident)} model(s) resident")
        else:
            t.append("● UNREACHABLE", style="bold red")
            down = self._engine_down_for()
            if down is not None:
                t.append(f" {down:.0f} s" if compact else f" for {down:.0f} s")
            t.append(f"\n{e.error}\n", style="red")
        return t

    def _show_gpu(self, r: StatusReport) -> None:
        if self._compact():
            self.query_one("#gpu", Panel).set_text(self._gpu_compact(r))
            return
        t = Text()
        gpu = r.host.gpu
        if gpu.unavailable is not None or not gpu.gpus:
            reason = gpu.unavailable.reason if gpu.unavailable else "no GPU found"
            t.append(f"n/a ({reason})\n", style="dim")
            t.append("util n/a · temp n/a · power n/a\nSM clock n/a · throttle n/a", style="dim")
        for g in gpu.gpus[:2]:
            t.append(_gpu_text(g, compact=False))
            t.append("\n")
            if g.unified_memory:
                t.append("memory: unified (budget from /proc/meminfo)", style="dim")
            elif isinstance(g.memory, GpuMemory):
                t.append(f"VRAM {gib(g.memory.used)} / {gib(g.memory.total)}")
            else:
                t.append(f"VRAM {na(g.memory)}")
        self.query_one("#gpu", Panel).set_text(t)

    def _show_pressure(self, r: StatusReport) -> None:
        p, b = r.host.pressure, r.budget
        # PSI in 0.1 % and memory in 0.1 GiB drift all the time: small moves are shown
        # every few seconds (widgets/drift_gate.py), a change of level (or of layout) at once
        figures = (p.some_avg10, p.full_avg10, p.some_avg60, p.full_avg60) if isinstance(p, Pressure) else ()
        level = (b.level, round(b.reserve / GIB, 1)) if isinstance(b, MemoryBudget) else None
        alarm = isinstance(p, Pressure) and (p.full_avg10 > 5, p.some_avg10 > 10)
        available = (round(b.available / GIB, 1),) if isinstance(b, MemoryBudget) else ()
        compact = self._compact()
        if not self._gates["pressure"].due((type(p), str(p) if not figures else "", level, alarm, compact),
                                           figures + available):
            return
        if compact:
            self.query_one("#pressure", Panel).set_text(self._pressure_compact(r))
            return
        t = Text()
        if isinstance(p, Pressure):
            style = "bold red" if p.full_avg10 > 5 else "bold yellow" if p.some_avg10 > 10 else ""
            t.append(f"some {p.some_avg10:.1f}% · full {p.full_avg10:.1f}% (10 s)\n", style=style)
            t.append(f"some {p.some_avg60:.1f}% · full {p.full_avg60:.1f}% (60 s)\n")
        else:
            t.append(f"PSI {p}\n", style="dim")
        b = r.budget
        if isinstance(b, MemoryBudget):
            if b.level is Level.CRITICAL:
                t.append(f"available {gib(b.available)} is at or below the {gib(b.reserve)} reserve:\n"
                         "unload a model before loading anything", style="bold white on red")
            elif b.level is Level.WARN:
                t.append(f"available {gib(b.available)} is nearing the {gib(b.reserve)} reserve",
                         style="bold yellow")
            else:
                t.append(f"available {gib(b.available)}, reserve {gib(b.reserve)}", style="green")
        self.query_one("#pressure", Panel).set_text(t)

    # ---- the panels in three lines each (80x24) ------------------------------------------

    def _gpu_compact(self, r: StatusReport) -> Text:
        gpu = r.host.gpu
        if gpu.unavailable is not None or not gpu.gpus:
            reason = gpu.unavailable.reason if gpu.unavailable else "no GPU found"
            return Text(f"n/a ({reason})", style="dim")
        return _gpu_text(gpu.gpus[0], compact=True)

    def _pressure_compact(self, r: StatusReport) -> Text:
        t = Text()
        p = r.host.pressure
        if isinstance(p, Pressure):
            style = "bold red" if p.full_avg10 > 5 else "bold yellow" if p.some_avg10 > 10 else ""
            t.append(f"PSI {p.some_avg10:.1f}% / {p.full_avg10:.1f}% 10 s\n", style=style)
        else:
            t.append(f"PSI {p}\n", style="dim")
        b = r.budget
        if isinstance(b, MemoryBudget):
            style = {Level.CRITICAL: "bold white on red", Level.WARN: "bold yellow"}.get(b.level, "green")
            t.append(f"available {gib(b.available)}\n", style=style)
            t.append("AT OR BELOW " if b.level is Level.CRITICAL else "", style=style)
            t.append(f"reserve {gib(b.reserve)}", style=style if b.level is not Level.OK else "")
        return t

    def _show_engines(self, statuses: tuple) -> None:
        """One line per [engines.NAME]: reachable or not, what it is, and whether it serves its model."""
        if not statuses:
            return
        t = Text()
        for i, e in enumerate(statuses):
            if i:
                t.append("\n")
            if e.reachable and e.error is not None:
                t.append("● ", style="bold red")
                t.append(f"{e.name}", style="bold")
                t.append(f"  ENGINE ERROR {e.url}", style="bold red")
                t.append(f"\n    engine error: {e.error}", style="red")
            elif e.reachable:
                t.append("● ", style="bold green")
                t.append(f"{e.name}", style="bold")
                t.append(f"  {e.kind} {e.version} · {e.url}")
                if e.model_served is False:
                    t.append(f" · {e.model} NOT served", style="bold yellow")
                    t.append(f" (serves {', '.join(e.served) or 'nothing'})", style="yellow")
                elif e.model:
                    t.append(f" · {e.model}")
                elif e.served:
                    t.append(f" · {', '.join(e.served)}")
            else:
                t.append("● ", style="bold red")
                t.append(f"{e.name}", style="bold")
                t.append(f"  UNREACHABLE {e.url}", style="bold red")
                if e.model:
                    t.append(f" · {e.model}")
                t.append(f"\n    {e.error}", style="red")
        self.query_one("#engines", Panel).set_text(t)

    def _show_history(self, r: StatusReport) -> None:
        from sparkctl.tui.widgets.history_sparkline import HistorySparkline  # imported by _after_first_frame

        mem = list(self.app.history_available)
        gpu = list(self.app.history_gpu)
        mem_spark = self.query_one("#spark-mem", HistorySparkline)
        if isinstance(r.host.meminfo, MemInfo):
            mem_spark.bounds = (0.0, round(r.host.meminfo.total / GIB, 1))  # available out of MemTotal
        # One sparkline column spans several samples (300 s over ~56 cells), so redrawing
        # every refresh moves nothing a user can see: once per column's worth of samples,
        # and then on the drift gates' shared boundary, so the new bars reach the screen in
        # the frame that brings the budget's and the labels' drift (widgets/drift_gate.py), not
        # in a frame of their own. The first samples are drawn at once.
        # No samples stay no samples: a blank sparkline, never a placeholder value.
        width = mem_spark.size.width  # 0 while hidden (the -short layout) or not laid out yet
        per_column = self.app.history_available.maxlen // width if width else SPARK_EVERY
        self._history_seen += 1  # samples shown so far: what the gate sees move (a full history keeps its length)
        self._history_ticks += 1  # samples since the sparklines were last given data
        if (self._history_ticks >= max(SPARK_EVERY, per_column)
                and self._gates["sparks"].due((bool(mem), bool(gpu)), (self._history_seen,))):
            self._history_ticks = 0
            for spark, data in ((mem_spark, mem), (self.query_one("#spark-gpu", HistorySparkline), gpu)):
                if list(spark.data or []) != data:
                    spark.data = data
        window = _window_label(self.app.config.ui.history_s)
        if self._gates["spark-mem"].due(bool(mem), (mem[-1], min(mem)) if mem else ()):
            set_if_changed(
                self.query_one("#spark-mem-label", Label),
                f"{mem[-1]:.1f} GiB now · min {min(mem):.1f} · last {window}" if mem else "no data yet",
            )
        set_if_changed(
            self.query_one("#spark-gpu-label", Label),
            f"{gpu[-1]:.0f}% now · max {max(gpu):.0f}% · last {window}" if gpu else _no_gpu_data(r),
        )


def _add_columns(table: DataTable, labels: tuple[str, ...]) -> None:
    """The resident table's columns, labelled with plain Text: a str label is read as Rich
    markup, and the first markup read loads Rich's emoji table (~3 ms before the first frame)."""
    for label in labels:
        table.add_column(Text(label))


def _residency_headline(warning: str) -> str:
    """A residency warning (tracking/residency_journal.py) in a few words for its one line: which
    run left what; the engine, the pid and the repair are a key away (N shows it whole)."""
    pid = warning.find(" (pid ")
    if warning.startswith("models not put back after ") and pid > 0:
        return warning[:pid]
    if "died; what it changed is not put back yet" in warning and pid > 0:
        return f"{warning[:pid]} died: what it changed is not put back yet"
    return warning


def _gpu_text(g, compact: bool) -> Text:
    """One GPU's reading in three lines: name; utilization, temperature, power; SM clock and
    throttling. `compact` drops the words a narrow panel cannot hold (the panel is titled GPU)."""
    util, temp = na(g.utilization_pct, '{:.0f}', '%'), na(g.temperature_c, '{:.0f}', '°C')
    power, clock = na(g.power_w, '{:.0f}', ' W'), na(g.sm_clock_mhz, '{:.0f}', ' MHz')
    t = Text()
    t.append(f"{na(g.name)}\n", style="bold")
    t.append(f"{util} · {temp} · {power}\n" if compact else f"util {util} · temp {temp} · power {power}\n")
    t.append(f"{clock} · " if compact else f"SM clock {clock} · ")
    thr = g.throttle_reasons
    if isinstance(thr, Unavailable):
        t.append(f"throttle {thr}")
    elif thr:
        t.append(("THROTTLED " if compact else "throttle ") + ", ".join(thr), style="bold yellow")
    else:
        t.append("no throttle" if compact else "no throttling")
    return t


def _no_gpu_data(r: StatusReport) -> Text:
    """The label of an empty GPU history: that there is no data, and why."""
    gpu = r.host.gpu
    if gpu.unavailable is not None:
        why = gpu.unavailable.reason
    elif not gpu.gpus:
        why = "no GPU found"
    else:
        reasons = {str(g.utilization_pct.reason) for g in gpu.gpus if isinstance(g.utilization_pct, Unavailable)}
        why = f"utilization {', '.join(sorted(reasons))}" if reasons else "no sample yet"
    return Text(f"no data ({why})", style="dim")


def _window_label(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"


__all__ = ["DashboardScreen", "GIB"]
