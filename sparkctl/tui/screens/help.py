"""`?`: help for the screen underneath: its own keys first, then the ones that work
everywhere (read from the bindings, so the list cannot go stale), then what its columns
mean and where the data comes from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Markdown

from sparkctl.tui.help_texts import help_for


def _declared(node) -> list[Binding]:
    """The bindings sparkctl's own classes give `node` (Textual's generic ones, such as
    tab or copy, are the same on every screen and left out), most derived class first."""
    out: list[Binding] = []
    for cls in type(node).__mro__:
        if cls.__module__.startswith("sparkctl.") and "BINDINGS" in cls.__dict__:
            out.extend(Binding.make_bindings(cls.__dict__["BINDINGS"]))
    return out


def _rows(app, node, skip: set[str]) -> list[tuple[str, str]]:
    """(keys, description) for each action `node` binds, in its own order: one row per
    action (its keys joined), none that `skip` already lists."""
    rows: dict[str, tuple[list[str], str]] = {}
    for binding in _declared(node):
        if not binding.description or binding.action in skip:
            continue
        desc = binding.description
        if node.check_action(binding.action, ()) is False:
            desc += " (when it applies)"  # the footer shows it only then
        keys, _ = rows.setdefault(binding.action, ([], desc))
        shown = app.get_key_display(binding)
        if shown not in keys:
            keys.append(shown)
    skip.update(rows)
    return [(" / ".join(keys), desc) for keys, desc in rows.values()]


def key_table(screen) -> str:
    """Markdown lists of the keys on `screen`: its own first, then the ones that work on
    every screen; each once, one line each (a table's ruled rows would fill 80x24 with five
    keys). The keys of a focused table or field (arrows, copy) are the widget's, the same
    everywhere: one line says so instead of a row each."""
    app = screen.app
    seen: set[str] = set()
    own = _rows(app, screen, seen)
    everywhere = _rows(app, app, seen)
    if "command_palette" not in seen:
        everywhere.append(("ctrl+p", "command palette: every action, searchable"))

    def table(rows: list[tuple[str, str]]) -> list[str]:
        return [f"- `{k}` {d}" for k, d in rows]

    lines = []
    if own:
        lines += ["**Keys on this screen**", "", *table(own), ""]
    lines += ["**Keys everywhere**", "", *table(everywhere), "",
              "In a table: arrows move, `home` / `end` go to the first and last row. In a field: "
              "`escape` or `enter` leaves it (enter never starts a run), `tab` goes to the next one."]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-box {
        width: 90%; max-width: 110; height: 90%;
        border: round $primary; border-title-style: bold; background: $surface; padding: 0 1;
    }
    HelpScreen #help-status { height: 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, screen) -> None:
        super().__init__()
        self.keys = key_table(screen)
        self.name_of = type(screen).__name__
        self.text = help_for(self.name_of)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = f"Help: {self.name_of.removesuffix('Screen')}"
            # the keys first: they are what `?` is pressed for
            yield Markdown(f"{self.keys}\n\n{self.text}\n", id="help-text")
        yield Label("Esc closes", id="help-status")

    def action_close(self) -> None:
        self.dismiss(None)
