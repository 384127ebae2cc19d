"""The fleet: one row per host, each read over ssh (`sparkctl status --json` there).

The asks are asyncio subprocesses in an async worker: the UI thread never waits on ssh.
Every [fleet] refresh_s the screen asks each host that is not still being asked (one ssh
session per host at most), and each answer repaints its own row as it arrives, so a host
that answers shows at once while another times out. Polling runs only while this screen
or a host's dashboard opened from it is shown. Enter opens the selected host's dashboard,
read-only, fed by the same asks.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Label, Static

from sparkctl.core.host_status import age_label, lane_of
from sparkctl.core.snapshots import GIB, MemInfo
from sparkctl.tui.screens.dashboard import DashboardScreen, set_if_changed
from sparkctl.tui.widgets.footer import KeysFooter

# the long cells last: at 80-120 columns a row still says what state a host is in and why
COLUMNS = (("Host", "host"), ("State", "state"), ("Seen", "seen"), ("Warnings", "warnings"), ("Memory", "memory"),
           ("GPU", "gpu"), ("Engine", "engine"), ("Models", "models"))
CELL_MAX = 44  # a warning or reason cut here; the line under the table has it whole
BENCHES_EVERY_S = 60.0  # lanes' last benches change when someone benches: a minute is fresh enough
STATE_STYLE = {"live": "bold green", "engine-down": "bold red", "engine-error": "bold red",
               "unreachable": "bold red", "waiting": "dim"}


class HostUpdated(Message):
    def __init__(self, view: Any) -> None:
        super().__init__()
        self.view = view


class HostsFound(Message):
    def __init__(self, hosts: list, config=None, error: str = "") -> None:
        super().__init__()
        self.hosts = hosts
        self.config = config  # re-read by r: the config the hosts come from (None: the app's)
        self.error = error  # r could not re-read the config: why (the hosts stay as they were)


class BenchesLoaded(Message):
    def __init__(self, name: str, benches: tuple) -> None:
        super().__init__()
        self.name = name
        self.benches = benches


def _engine_cell(view) -> Text:
    s = view.status
    if s is None:
        return Text("-", style="dim")
    text = Text(f"{s.engine_kind} {s.engine_version or '?'}")
    if s.runners:
        text.append(f" ({', '.join(s.runners)})", style="dim")
    if view.current and s.engine_state != "up":
        text.append(f" {s.engine_state}", style="bold red")
    return text


def _memory_cell(view) -> Text:
    s = view.status
    if s is None or s.available is None or s.total is None:
        return Text("-", style="dim")
    style = {"critical": "bold red", "warn": "bold yellow"}.get(s.level or "", "")
    head = s.headroom
    text = f"{s.available / GIB:.1f}/{s.total / GIB:.1f} GiB"
    if head is not None:
        text += f" {head / GIB:+.1f}"  # headroom above that host's reserve
    return Text(text, style=style)


def _gpu_cell(view) -> Text:
    s = view.status
    if s is None:
        return Text("-", style="dim")
    if not s.gpus:
        return Text("no GPU", style="dim")
    g = s.gpus[0]
    util = "-" if g.utilization_pct is None else f"{g.utilization_pct:.0f}%"
    power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
    return Text(f"{util} · {power}")


def _models_cell(view) -> Text:
    s = view.status
    if s is None or not view.current or s.engine_state != "up":
        return Text("?" if s is not None else "-", style="dim")
    if not s.resident:
        return Text("none", style="dim")
    text = Text()
    for i, r in enumerate(s.resident):
        if i:
            text.append(", ")
        lane = lane_of(s, view.host.lanes or None, r.name)
        text.append(r.name, style="bold" if lane else "")
        if lane:
            text.append(f" [{lane}]", style="dim")
        if r.placement != "100% GPU":
            text.append(f" {r.placement}", style="bold red")
    return text


def _warnings_cell(view) -> Text:
    from sparkctl.services.fleet import UNREACHABLE

    if view.state == UNREACHABLE:
        return Text(_clip_middle(view.reason), style="red")
    warnings = view.warnings
    if not warnings:
        return Text("-", style="dim")
    more = f" (+{len(warnings) - 1})" if len(warnings) > 1 else ""
    return Text(_clip(warnings[0], CELL_MAX - len(more)) + more, style="yellow")


def _clip(text: str, width: int = CELL_MAX) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip_middle(text: str, width: int = CELL_MAX) -> str:
    """A reason keeps its head and its tail ("ssh: connect…: Connection refused")."""
    if len(text) <= width:
        return text
    head = width // 3
    return text[:head] + "…" + text[len(text) - (width - head - 1):]


def _seen_cell(view, now: datetime) -> Text:
    if view.status is None or view.seen_at is None:
        return Text("never" if view.checked_at else "asking…", style="dim")
    age = age_label(view.age_s(now))
    return Text("now" if view.current else f"{age} ago", style="" if view.current else "bold yellow")


def row_cells(view, now: datetime) -> tuple[Text, ...]:
    by_key = {"host": Text(view.name, style="bold"), "state": Text(view.state, style=STATE_STYLE.get(view.state, "")),
              "seen": _seen_cell(view, now), "warnings": _warnings_cell(view), "memory": _memory_cell(view),
              "gpu": _gpu_cell(view), "engine": _engine_cell(view), "models": _models_cell(view)}
    return tuple(by_key[key] for _label, key in COLUMNS)


def detail_text(view, now: datetime) -> Text:
    """Everything about the selected host that a cell cuts short."""
    t = Text()
    t.append(f"{view.name}", style="bold")
    t.append(f" · ssh {view.host.destination}")
    s = view.status
    if s is not None:
        t.append(f" · {s.hostname or '?'} · {s.hardware.label}", style="dim")
    if view.state == "unreachable":
        t.append(f"\nunreachable: {view.reason}", style="bold red")
        if s is not None:
            t.append(f"\nshowing its last known state, {age_label(view.age_s(now))} old", style="yellow")
    for w in view.warnings:
        t.append(f"\n⚠ {w}", style="yellow")
    for b in view.benches:
        if b.engine_version is None:
            t.append(f"\nlast bench of {b.lane} ({b.model}): none on this host", style="dim")
        else:
            tps = "-" if b.decode_tps is None else f"{b.decode_tps:.1f} tok/s"
            t.append(f"\nlast bench of {b.lane} ({b.model}): {tps} on {b.engine_version}")
    return t


class FleetScreen(Screen):
    AUTO_FOCUS = "#fleet"
    DEFAULT_CSS = """
    FleetScreen #fleet-box { height: 1fr; min-height: 5; border: round $primary; border-title-style: bold; }
    FleetScreen #fleet { height: 1fr; }
    FleetScreen #fleet-detail { height: auto; max-height: 10; padding: 0 1; }
    FleetScreen #fleet-status { height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [Binding("r", "refresh", "Refresh now"), Binding("enter", "open_host", "Open host")]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.poller = None
        self.views: dict[str, Any] = {}
        self._benches_at: dict[str, float] = {}
        self._timer = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="fleet-box") as box:
            box.border_title = "Fleet"
            yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Static("", id="fleet-detail")
        yield Label("reading the host list…", id="fleet-status")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one("#fleet", DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        self.find_hosts()

    @work(thread=True, group="fleet-hosts", exclusive=True, exit_on_error=False)
    def find_hosts(self) -> None:
        """The host list reads the ssh config (a file): not on the UI thread."""
        from sparkctl.services.fleet import fleet_hosts

        self.post_message(HostsFound(fleet_hosts(self.app.config)))

    def on_hosts_found(self, message: HostsFound) -> None:
        from dataclasses import replace

        from sparkctl.services.fleet import FleetPoller

        status = self.query_one("#fleet-status", Label)
        if message.error:  # r on a config that does not read: the hosts stay as they were
            status.update(Text(f"hosts not re-read: {message.error}", style="bold red"))
            self.ask_hosts()
            return
        if message.config is not None:
            # r: the hosts (and how they are asked) as the config says now
            cfg = message.config
            self.app.config = replace(self.app.config, hosts=cfg.hosts, fleet=cfg.fleet)
            if self.poller is not None:
                old, self.poller = self.poller, None
                self.run_worker(old.close(), group="fleet-close", exit_on_error=False)
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            self.views = {}
            self.query_one("#fleet", DataTable).clear()
        if not message.hosts:
            status.update(Text(f"no hosts: add [hosts.NAME] tables (or [fleet] ssh_hosts) to {self.app.config.source}",
                               style="yellow"))
            return
        self.poller = FleetPoller(self.app.config, message.hosts, on_update=lambda v: self.post_message(HostUpdated(v)),
                                  clock=self.app.clock)
        table = self.query_one("#fleet", DataTable)
        now = self.app.clock()
        for h in message.hosts:
            view = self.poller.views[h.name]
            self.views[h.name] = view
            table.add_row(*row_cells(view, now), key=h.name)
        status.update(f"{len(message.hosts)} host(s) · asked every {self.app.config.fleet.refresh_s:g} s over ssh "
                      f"(timeout {self.app.config.fleet.timeout_s:g} s) · Enter opens a host, read-only")
        self._start_polling()

    # ---- polling: only while the fleet (or a host opened from it) is on screen ------------

    def _start_polling(self) -> None:
        if self.poller is None:
            return
        if self._timer is None:
            self._timer = self.set_interval(self.app.config.fleet.refresh_s, self.ask_hosts)
        else:
            self._timer.resume()
        self.ask_hosts()

    def on_screen_resume(self) -> None:
        if self.poller is not None:
            self._start_polling()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def ask_hosts(self, names: list[str] | None = None) -> None:
        if self.poller is not None:
            self.run_worker(self.poller.refresh(names), group="fleet", exclusive=False, exit_on_error=False)

    def action_refresh(self) -> None:
        """r: read the config's hosts again (a host added or removed while the fleet is
        open), then ask every host now."""
        self.query_one("#fleet-status", Label).update(f"re-reading the hosts from {self.app.config.source}…")
        self.reread_hosts()

    @work(thread=True, group="fleet-hosts", exclusive=True, exit_on_error=False)
    def reread_hosts(self) -> None:
        """The config file and the ssh config again (files): not on the UI thread."""
        from sparkctl.config import ConfigError, load_config
        from sparkctl.services.fleet import fleet_hosts

        source = self.app.config.source
        try:
            cfg = load_config(None if source == "built-in defaults" else source)
        except ConfigError as exc:
            from sparkctl.core.redact import redact_text
            from sparkctl.core.termtext import safe_line

            # as the CLI prints it: a bad value may hold a URL with a password in it
            self.post_message(HostsFound([], error=safe_line(redact_text(str(exc)))))
            return
        self.post_message(HostsFound(fleet_hosts(cfg), config=cfg))

    async def on_unmount(self) -> None:
        if self.poller is not None:
            await self.poller.close()

    # ---- answers ---------------------------------------------------------------------------

    def on_host_updated(self, message: HostUpdated) -> None:
        view = message.view
        if self.poller is None or view.name not in self.poller.views or view.name not in self.views:
            return  # an answer of a poller r replaced (the host may be gone from the config)
        self.views[view.name] = view
        self._show(view)
        host_screen = next((s for s in self.app.screen_stack if isinstance(s, HostDashboardScreen)
                            and s.host_name == view.name), None)
        if host_screen is not None:
            host_screen.show_view(view)
        import time

        if view.current and view.status is not None and view.status.engine_state == "up" \
                and time.monotonic() - self._benches_at.get(view.name, -BENCHES_EVERY_S) >= BENCHES_EVERY_S:
            self._benches_at[view.name] = time.monotonic()
            self.load_benches(view)

    def _show(self, view) -> None:
        table = self.query_one("#fleet", DataTable)
        now = self.app.clock()
        for (_label, key), cell in zip(COLUMNS, row_cells(view, now)):
            table.update_cell(view.name, key, cell, update_width=True)
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one("#fleet", DataTable)
        if not self.views or table.row_count == 0:
            return
        name = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        view = self.views.get(name)
        if view is not None:
            set_if_changed(self.query_one("#fleet-detail", Static), detail_text(view, self.app.clock()))

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @work(thread=True, group="fleet-benches", exclusive=False, exit_on_error=False)
    def load_benches(self, view) -> None:
        """The lanes' last benches on that host, from the (shared) tracking store."""
        store = getattr(self.app, "store", None)
        if store is None:
            return
        from sparkctl.services.fleet.lastbench import lane_benches

        try:
            benches = lane_benches(store, view.status, view.host.lanes or None)
        except Exception:  # a store away or failing: the row goes on without them
            return
        self.post_message(BenchesLoaded(view.name, benches))

    def on_benches_loaded(self, message: BenchesLoaded) -> None:
        if self.poller is not None and message.name in self.poller.views:
            view = self.poller.set_benches(message.name, message.benches)
            self.views[view.name] = view
            self._show(view)

    # ---- a host's dashboard ----------------------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(str(event.row_key.value))

    def action_open_host(self) -> None:
        table = self.query_one("#fleet", DataTable)
        if table.row_count:
            self._open(str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value))

    def _open(self, name: str) -> None:
        view = self.views.get(name)
        if view is None:
            return
        if view.status is None:
            self.notify(f"{name}: no status yet ({view.reason or 'asking…'})", severity="warning")
            return
        if not isinstance(self.app.screen, HostDashboardScreen):  # Enter on the table and the screen's key: once
            self.app.push_screen(HostDashboardScreen(name, self, view))


class HostDashboardScreen(DashboardScreen, inherit_bindings=False):
    """A host's dashboard, read-only: its own status (budget, models, engine, GPU) as that
    host computed it, refreshed by the fleet's asks. No keys change anything: the local
    dashboard's keys are not inherited (its Lanes act on this machine)."""

    BINDINGS = [*Screen.BINDINGS, Binding("escape", "close", "Back to the fleet"),
                Binding("r", "refresh", "Refresh now")]

    def __init__(self, host_name: str, fleet: FleetScreen, view) -> None:
        super().__init__()
        self.host_name = host_name
        self.fleet = fleet
        self._view = view
        n = max(10, int(fleet.app.config.ui.history_s / fleet.app.config.fleet.refresh_s))
        self._mem: deque[float] = deque(maxlen=n)
        self._gpu: deque[float] = deque(maxlen=n)
        self._down_since: float | None = None
        self._timer = None
        self._paused = False

    def _watch_sources(self) -> None:
        self.fleet.ask_hosts([self.host_name])  # fresh as soon as it opens
        self._timer = self.set_interval(self.app.config.fleet.refresh_s,
                                        lambda: self.fleet.ask_hosts([self.host_name]))
        self.show_view(self._view)

    # Asked over ssh only while on screen: another mode in front (the local dashboard, the
    # Runs screen...) pauses the asks, as the fleet's own table pauses its own.

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()
            self._paused = True

    def on_screen_resume(self) -> None:
        if self._paused:
            self._paused = False
            self.fleet.ask_hosts([self.host_name])  # fresh as soon as it is back
            self._timer.resume()

    def show_view(self, view) -> None:
        from sparkctl.services.fleet.report import report_from_status

        self._view = view
        if view.status is None:
            return
        now = self.app.clock()
        what = "now" if view.current else f"UNREACHABLE ({view.reason}), last known state {age_label(view.age_s(now))} old"
        self.sub_title = f"{self.host_name} · read-only · {what}"
        report = report_from_status(view.status.raw, now)
        if view.current:  # the history is of fresh answers only, never a remembered one
            if isinstance(report.host.meminfo, MemInfo):
                self._mem.append(round(report.host.meminfo.available / GIB, 1))
            utils = [g.utilization_pct for g in view.status.gpus if g.utilization_pct is not None]
            if utils:
                self._gpu.append(float(max(utils)))
        self._show_report(report)

    def _show_first_run(self, r) -> None:
        """The set-up hints are about this machine's engine: not shown for another host."""
        self.query_one("#first-run", Static).display = False
        self.query_one("#resident", DataTable).display = True

    def _runners(self) -> dict:
        return {}  # this machine's runners say nothing about another host's models

    def _engine_down_for(self) -> float | None:
        return None

    def _contenders(self):
        return ()  # this machine's marks say nothing about another host's models

    def _show_history(self, r) -> None:
        mem, gpu = list(self._mem), list(self._gpu)
        if isinstance(r.host.meminfo, MemInfo):  # available out of that host's MemTotal
            self.query_one("#spark-mem").bounds = (0.0, round(r.host.meminfo.total / GIB, 1))
        if mem:
            self.query_one("#spark-mem").data = mem
        if gpu:
            self.query_one("#spark-gpu").data = gpu
        set_if_changed(self.query_one("#spark-mem-label", Label),
                       f"{mem[-1]:.1f} GiB now · min {min(mem):.1f} (since opened)" if mem else "no data yet")
        set_if_changed(self.query_one("#spark-gpu-label", Label),
                       f"{gpu[-1]:.0f}% now · max {max(gpu):.0f}% (since opened)" if gpu else "no data")

    def action_refresh(self) -> None:
        self.fleet.ask_hosts([self.host_name])

    def action_close(self) -> None:
        self.app.pop_screen()
