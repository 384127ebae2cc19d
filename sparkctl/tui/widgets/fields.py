"""Form fields and tables that never trap the keyboard.

- ``Field``: a text input that Escape and Enter both leave, so the footer's keys work
  again. Enter never starts anything: a long run starts from a Run button or a key.
- ``ModelField``: a Field for model names (several, space-separated) that completes the
  word being typed from the engine's local models and names close ones for a typo.
- ``RowTable``: a row-cursor table where Home and End move the cursor to the first and
  last row (Textual's only scroll sideways for a row cursor).
"""

from __future__ import annotations

from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import DataTable, Input


class Field(Input):
    BINDINGS = [
        Binding("escape", "leave", "Leave field", show=False),
        Binding("enter", "submit", "Leave field", show=False),
    ]

    def action_leave(self) -> None:
        self.screen.set_focus(None)

    async def action_submit(self) -> None:
        await super().action_submit()  # Input.Submitted still tells the screen (validation, hints)
        self.action_leave()


class LastWordSuggester(Suggester):
    """Completes the word being typed from a list of names (several models are typed
    space-separated, so the whole value is not one name)."""

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


class ModelField(Field):
    """Model names, completed (→ accepts) from the engine's local models."""

    class NamesListed(Message):
        def __init__(self, names: list[str]) -> None:
            super().__init__()
            self.names = names

    def __init__(self, **kwargs) -> None:
        self._names = LastWordSuggester()
        # names are added to, not retyped: focus puts the cursor at the end, selecting nothing
        super().__init__(suggester=self._names, select_on_focus=False, **kwargs)
        self.border_title = "models"  # a title that stays when the placeholder gives way to names
        self.local: list[str] | None = None  # None: not known (no engine answer yet)

    def on_mount(self) -> None:
        self.list_local()

    @work(group="model-names", exclusive=True, exit_on_error=False)
    async def list_local(self) -> None:
        try:
            models = await self.app.engine.tags()
        except Exception:  # an engine away: typing names still works, without completion
            return
        self.post_message(self.NamesListed(sorted(m.name for m in models)))

    def on_model_field_names_listed(self, message: NamesListed) -> None:
        message.stop()
        self.local = message.names
        self._names.names = message.names
        if message.names:
            shown = " ".join(message.names[:3]) + (" …" if len(message.names) > 3 else "")
            self.placeholder = f"→ completes: {shown}"

    def unknown(self, names: list[str]) -> str | None:
        """A line for the first name the engine does not store, with the close local names;
        None when each is stored or the local list is not known."""
        if not self.local:
            return None
        from sparkctl.core.names import same_model
        from sparkctl.services.models import did_you_mean

        for name in names:
            if not any(same_model(name, have) for have in self.local):
                return f"{name} is not a local model{did_you_mean(name, self.local)} (the Models screen pulls one)"
        return None


class RowTable(DataTable):
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]
