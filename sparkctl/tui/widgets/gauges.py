"""Live bench gauges drawn by one widget with a fixed size, so an update repaints this
region only (a Static.update would re-run the whole screen's layout ~20 times a second)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from sparkctl.core.termtext import safe_line

FIELDS = (
    ("tokens", "tokens"),
    ("elapsed", "elapsed"),
    # short enough for one line each at 80 columns: the figures under them must show
    ("ttft", "TTFT"),
    ("tps", "tok/s (client)"),
    ("rep", "repetition"),
)


class Gauges(Widget):
    DEFAULT_CSS = """
    Gauges { height: 2; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.values: dict[str, str] = {key: "-" for key, _ in FIELDS}

    def set(self, **values: str) -> None:
        """Show `values` as they are: a value is plain text (a model name from another program
        may hold `[` or an escape sequence), never Rich markup."""
        changed = False
        for key, value in values.items():
            value = safe_line(value)
            if self.values.get(key) != value:
                self.values[key] = value
                changed = True
        if changed:
            self.refresh()

    def render(self) -> Table:
        table = Table.grid(expand=True)
        for _ in FIELDS:
            table.add_column(ratio=1)
        # styled spans over plain text (not a base style, which would style the cell's padding too)
        table.add_row(*(Text.assemble((label, "dim")) for _, label in FIELDS))
        table.add_row(*(Text.assemble((self.values[key], "bold")) for key, _ in FIELDS))
        return table
