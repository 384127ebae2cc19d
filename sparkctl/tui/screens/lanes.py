"""`l` on the dashboard: the lanes (`sparkctl lanes`) and rolling one back (`sparkctl
rollback LANE`): each lane's model, residency, since when and by what; `R` rolls the
selected lane back after a dialog that shows the plan. Engine and state-file reads run in
workers; the switch goes through the same service as the CLI."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

COLUMNS = ("Lane", "Model", "Resident", "Since", "Set by")


class LanesLoaded(Message):
    def __init__(self, rows: list) -> None:
        super().__init__()
        self.rows = rows


class LanesScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    LanesScreen { align: center middle; }
    LanesScreen #lanes-box {
        width: 96%; max-width: 130; height: auto; max-height: 80%;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    LanesScreen #lanes { height: auto; max-height: 12; }
    LanesScreen #lanes-status { height: auto; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,l", "close", "Close"), Binding("R", "rollback", "Roll back"),
                Binding("r", "reload", "Reload")]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list = []

    def compose(self) -> ComposeResult:
        with Vertical(id="lanes-box") as box:
            box.border_title = "Lanes"
            yield DataTable(id="lanes", cursor_type="row", zebra_stripes=True)
            yield Label("reading the lanes…", id="lanes-status")

    def on_mount(self) -> None:
        self.query_one("#lanes", DataTable).add_columns(*COLUMNS)
        self.load()

    def action_reload(self) -> None:
        self.load()

    @work(group="lanes", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        import asyncio

        from sparkctl.engines.base import EngineError
        from sparkctl.services.lanes import lane_rows

        try:
            resident = await self.app.engine.ps()
        except EngineError:
            resident = None  # residency unknown, said as such
        try:
            rows = await asyncio.to_thread(lane_rows, self.app.config, resident)  # reads the owned state file
        except Exception as exc:  # a broken state file: one line, not a crash
            self.query_one("#lanes-status", Label).update(Text(f"cannot read the lanes: {exc}", style="bold red"))
            return
        self.post_message(LanesLoaded(rows))

    def on_lanes_loaded(self, message: LanesLoaded) -> None:
        self.rows = message.rows
        table = self.query_one("#lanes", DataTable)
        table.clear()
        for r in self.rows:
            since = r.since.replace("T", " ")[:16] if r.since else "-"
            resident = Text(r.residency, style="bold yellow" if r.resident is None else "")
            table.add_row(r.lane, r.model, resident, since, Text(r.set_by), key=r.lane)  # as `sparkctl lanes`
        status = f"{len(self.rows)} lane(s) · R rolls the selected lane back · Esc closes"
        if not self.rows:
            status = f"no lanes: add them to [lanes] in {self.app.config.source}"
        self.query_one("#lanes-status", Label).update(status)

    def _selected(self):
        table = self.query_one("#lanes", DataTable)
        if not self.rows or table.cursor_row is None or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def action_rollback(self) -> None:
        row = self._selected()
        if row is None:
            return
        self.query_one("#lanes-status", Label).update(f"planning the rollback of lane {row.lane}…")
        self.plan_rollback(row.lane)

    @work(group="lanes-plan", exclusive=True, exit_on_error=False)
    async def plan_rollback(self, lane: str) -> None:
        from sparkctl.engines.base import EngineError
        from sparkctl.services.lanes import LaneError, plan_rollback
        from sparkctl.services.lanes.history import NothingToRollBack

        app = self.app
        try:
            plan = await plan_rollback(app.config, app.engine, app.probes, lane)
        except (LaneError, NothingToRollBack, EngineError, ValueError) as exc:
            self.query_one("#lanes-status", Label).update(
                Text(f"cannot roll back {lane}: {getattr(exc, 'message', None) or exc}", style="bold red"))
            return
        from sparkctl.tui.widgets.model_dialogs import ConfirmDialog

        question = f"Roll lane {lane} back to {plan.model}?\n\n" + "\n".join(plan.lines())
        label = "Force roll back" if plan.unmet else "Roll back"

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_switch(plan, bool(plan.unmet))

        self.app.push_screen(ConfirmDialog(question, yes_label=label), answered)

    @work(group="lanes-switch", exclusive=True, exit_on_error=False)
    async def run_switch(self, plan, force: bool) -> None:
        from sparkctl.tui.screens.promote_dialog import apply_switch

        self.query_one("#lanes-status", Label).update(f"rolling lane {plan.lane} back: loading and verifying…")
        message, failed = await apply_switch(self.app, plan, force)
        self.app.notify(message, severity="error" if failed else "information", timeout=20 if failed else 15)
        self.load()

    def action_close(self) -> None:
        self.dismiss(None)
