"""Modal questions for the Models screen: which model to pull, the context and keep-alive
of a fit or a load, and "are you sure?". Each is a `ModalScreen` typed by what it returns."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from sparkctl.core.names import InvalidModelName, validate_model_name


class PullDialog(ModalScreen[str | None]):
    """Ask for a model name; checked with Ollama's rules before the dialog closes. The
    answer is the name as typed when it starts with a scheme (http:// reads that host's
    registry over plain HTTP, as `sparkctl pull/fit` do), else the checked name."""

    DEFAULT_CSS = """
    PullDialog { align: center middle; }
    PullDialog > Vertical {
        width: 64; height: auto; padding: 1 2;
        border: round $accent; background: $panel;
    }
    PullDialog #pull-error { color: $error; height: auto; }
    PullDialog .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, suggestions: Iterable[str] = (), title: str = "Pull a model from the registry",
                 action: str = "pull") -> None:
        super().__init__()
        # local models (to update one) and lane models not stored yet, completed from a
        # typed prefix: right arrow or end accepts the suggestion
        self.suggestions = list(dict.fromkeys(suggestions))
        self.title_text, self.action_text = title, action  # the Models screen's w asks a fit only

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, classes="title")
            suggester = SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None
            yield Input(placeholder="e.g. qwen3:8b", id="pull-name", suggester=suggester)
            yield Label("", id="pull-error")
            hint = f"enter: {self.action_text} · → completes a local name · escape: cancel" if self.suggestions else \
                f"enter: {self.action_text} · escape: cancel"
            yield Label(hint, classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            name = validate_model_name(event.value)
        except InvalidModelName as exc:
            self.query_one("#pull-error", Label).update(Text(str(exc)))
            return
        typed = event.value.strip()
        self.dismiss(typed if typed.lower().startswith(("http://", "https://")) else name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question; `y`/`n`, enter on a button, or escape (no)."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical {
        width: 72; height: auto; padding: 1 2;
        border: round $warning; background: $panel;
    }
    ConfirmDialog #confirm-question { width: 1fr; height: auto; margin-bottom: 1; }
    ConfirmDialog Horizontal { height: auto; align-horizontal: right; }
    ConfirmDialog Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question), id="confirm-question")  # wraps: the whole reason shows
            with Horizontal():
                yield Button("No", id="no")
                yield Button(self.yes_label, id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


# ---------------------------------------------------------------------------- fit / load

_CTX = re.compile(r"^\s*(\d+)\s*([kK])?\s*$")


def parse_context(text: str) -> int | None:
    """ "" -> None (the default); "8192" -> 8192; "32k"/"32K" -> 32768. ValueError otherwise."""
    if not text.strip():
        return None
    m = _CTX.match(text.replace("_", "").replace(",", ""))
    if not m:
        raise ValueError(f"context: expected a number of tokens like 8192 or 32k, got {text.strip()!r}")
    value = int(m.group(1)) * (1024 if m.group(2) else 1)
    if value < 1:
        raise ValueError("context: at least 1 token")
    from sparkctl.core.limits import MAX_NUM_CTX

    if value > MAX_NUM_CTX:  # as the CLI's --ctx: Ollama reads num_ctx as a 64-bit integer
        raise ValueError(f"context: at most {MAX_NUM_CTX} tokens")
    return value


@dataclass(frozen=True)
class LoadChoice:
    """What a fit or a load asks for. None: the default (config, else the engine's choice)."""

    num_ctx: int | None = None
    keep_alive: str | None = None
    lane: str = ""  # a load: the lane the model is a contender for ("" when the config has none)


class LoadDialog(ModalScreen["LoadChoice | None"]):
    """The context (num_ctx) of a fit, or the context and keep-alive of a load: the TUI form
    of `sparkctl fit/load --ctx N --keep-alive D`. Blank fields keep the defaults shown."""

    DEFAULT_CSS = """
    LoadDialog { align: center middle; }
    LoadDialog > Vertical {
        width: 72; max-width: 100%; height: auto; max-height: 100%; padding: 0 2;
        border: round $accent; background: $panel;
    }
    LoadDialog .title { text-style: bold; margin-bottom: 1; }
    LoadDialog Input { width: 1fr; }
    LoadDialog .field { height: auto; }
    LoadDialog .field Label { width: 13; padding: 1 0 0 0; }
    LoadDialog .default { color: $text-muted; height: auto; width: 1fr; }
    LoadDialog #load-error { color: $error; height: auto; width: 1fr; }
    LoadDialog .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, model: str, *, load: bool, choice: LoadChoice | None = None,
                 ctx_default: str = "the engine's choice", keep_alive_default: str = "",
                 lanes: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.model = model
        self.load = load
        self.choice = choice or LoadChoice()
        self.ctx_default = ctx_default
        self.keep_alive_default = keep_alive_default
        # a load marks the model contender for a lane: its bench and eval run at that lane
        # model's context (services/bench/context.py); asked only when there is a choice
        self.lanes = lanes

    def compose(self) -> ComposeResult:
        verb = "Load" if self.load else "Fit check"
        with Vertical():
            yield Label(f"{verb} {self.model}", classes="title")
            with Horizontal(classes="field"):
                yield Label("context")
                yield Input(str(self.choice.num_ctx or ""), placeholder="num_ctx, e.g. 8192 or 32k", id="load-ctx")
            yield Static(Text(f"blank: {self.ctx_default}"), classes="default")  # "[models]" is not markup
            if self.load:
                with Horizontal(classes="field"):
                    yield Label("keep-alive")
                    yield Input(self.choice.keep_alive or "", placeholder='e.g. 30m, 2h, -1 (forever)',
                                id="load-keep-alive")
                yield Static(Text(f"blank: {self.keep_alive_default}"), classes="default")
                if len(self.lanes) > 1:
                    with Horizontal(classes="field"):
                        yield Label("for lane")
                        yield Input(self.choice.lane, placeholder=" or ".join(self.lanes), id="load-lane")
                    yield Static(Text(f"blank: {self.lanes[0]} (the contender runs at that lane model's context)"),
                                 classes="default")
            yield Static("", id="load-error")
            go = "load" if self.load else "check the fit"
            yield Label(f"enter: {go} · tab: next field · escape: cancel", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#load-ctx", Input).focus()

    def _read(self) -> LoadChoice:
        from sparkctl.core.keepalive import HINT, parse_keep_alive

        ctx = parse_context(self.query_one("#load-ctx", Input).value)
        keep: str | None = None
        if self.load:
            keep = self.query_one("#load-keep-alive", Input).value.strip() or None
            if keep is not None:
                try:
                    parse_keep_alive(keep)
                except ValueError:
                    raise ValueError(f"keep-alive: expected {HINT}, got {keep!r}") from None
        lane = ""
        if self.load and self.lanes:
            lane = self.query_one("#load-lane", Input).value.strip() if len(self.lanes) > 1 else ""
            if lane and lane not in self.lanes:
                raise ValueError(f"for lane: expected one of {', '.join(self.lanes)}, got {lane!r}")
            lane = lane or self.lanes[0]
        return LoadChoice(ctx, keep, lane)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            choice = self._read()
        except ValueError as exc:
            self.query_one("#load-error", Static).update(Text(str(exc)))
            return
        self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
