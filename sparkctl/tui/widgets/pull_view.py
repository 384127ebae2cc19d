"""A live view of one pull: overall bar, per-layer lines, numbers and Ollama's status log.

It renders `PullView` snapshots from the models service; it never talks to the engine.
The status log is a bounded `Log` (a pull sends a handful of status lines, but a flaky
registry can repeat them).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log, ProgressBar, Static

from sparkctl.services.models import PullView as PullSnapshot
from sparkctl.services.models import eta_label, rate_label, size_label

LAYER_STATES = {
    "present": "already present",
    "resumed": "resuming",
    "downloading": "downloading",
    "done": "done",
}


def stats_text(view: PullSnapshot) -> Text:
    t = Text()
    if view.percent is None:
        t.append(f"{size_label(view.completed)} of unknown size", style="bold")
    else:
        t.append(f"{view.percent:5.1f}%", style="bold")
        t.append(f"  {size_label(view.completed)} / {size_label(view.total)}")
    if view.outcome is None:
        t.append(f"  {rate_label(view.speed_bps)}  {eta_label(view.eta_s)}")
    else:
        t.append(f"  in {view.elapsed_s:.1f} s")
    if view.sizes_unknown:
        t.append("  (the registry sent no sizes for some layers)", style="dim")
    return t


def layers_text(view: PullSnapshot, limit: int = 6) -> Text:
    t = Text()
    layers = view.layers[-limit:]
    hidden = len(view.layers) - len(layers)
    if hidden:
        t.append(f"… {hidden} earlier layer(s)\n", style="dim")
    for i, layer in enumerate(layers):
        size = size_label(layer.total) if layer.total is not None else "size unknown"
        state = LAYER_STATES.get(layer.state, layer.state)
        if layer.state == "downloading" or layer.state == "resumed":
            frac = layer.fraction
            state = f"{state} {frac * 100:.0f}%" if frac is not None else f"{state} {size_label(layer.completed)}"
        if layer.start_completed and layer.state != "present":
            state += f" (resumed from {size_label(layer.start_completed)})"
        style = "dim" if layer.state == "present" else ("green" if layer.state == "done" else "")
        t.append(f"{layer.short}  {size:>10}  ", style="bold")
        t.append(state, style=style)
        if i < len(layers) - 1:
            t.append("\n")
    if not view.layers:
        t.append("no layers yet", style="dim")
    return t


def outcome_text(view: PullSnapshot) -> Text:
    if view.outcome == "success":
        return Text(f"✔ pulled {view.model} with Ollama {view.engine_version}", style="bold green")
    if view.outcome == "cancelled":
        return Text(f"cancelled: press p and pull {view.model} again to resume", style="bold yellow")
    if view.outcome == "failed":
        return Text(f"✘ {view.error}", style="bold red")
    return Text(f"{view.status}", style="bold")


class PullProgressView(Vertical):
    """Hidden until a pull starts; then stays up with the result until it is closed
    (escape on the Models screen), the next pull starts, or its model is deleted."""

    DEFAULT_CSS = """
    PullProgressView {
        height: auto;
        display: none;
        border: round $accent;
        border-title-style: bold;
        padding: 0 1;
    }
    PullProgressView.-active { display: block; }
    PullProgressView #pull-bar { width: 1fr; height: 1; }
    PullProgressView #pull-bar Bar { width: 1fr; }
    PullProgressView #pull-outcome { height: auto; }
    PullProgressView #pull-stats { height: 1; }
    PullProgressView #pull-layers { height: auto; max-height: 7; }
    PullProgressView #pull-disk { height: auto; }
    PullProgressView #pull-log { height: 5; border: none; background: $surface; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model: str | None = None  # the pull running, if any
        self.subject: str | None = None  # the model the panel is about, running or not
        self.last: PullSnapshot | None = None
        self._logged = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="pull-outcome")
        yield ProgressBar(total=100, show_eta=False, id="pull-bar")
        yield Static("", id="pull-stats")
        yield Static("", id="pull-layers")
        yield Static("", id="pull-disk")
        yield Log(max_lines=200, id="pull-log")

    @property
    def running(self) -> bool:
        return self.model is not None and (self.last is None or self.last.outcome is None)

    @property
    def shown(self) -> bool:
        return self.has_class("-active")

    @property
    def closable(self) -> bool:
        return self.shown and not self.running

    def close(self) -> None:
        """Hide the finished (or cancelled) pull's panel."""
        if not self.running:
            self.remove_class("-active")
            self.subject = None

    def start(self, model: str) -> None:
        self.model = model
        self.subject = model
        self.last = None
        self._logged = 0
        self.border_title = f"Pull {model}"
        self.border_subtitle = "c: cancel"
        self.add_class("-active")
        self.query_one("#pull-bar", ProgressBar).update(total=100, progress=0)
        self.query_one("#pull-outcome", Static).update(Text("starting…", style="bold"))
        self.query_one("#pull-stats", Static).update("")
        self.query_one("#pull-layers", Static).update("")
        self.query_one("#pull-disk", Static).update("")
        self.query_one("#pull-log", Log).clear()

    def show(self, view: PullSnapshot, hint: str = "") -> None:
        if view.model != self.model:
            return
        self.last = view
        bar = self.query_one("#pull-bar", ProgressBar)
        if view.percent is None and view.outcome is None:
            bar.update(total=None)  # indeterminate: the registry sent no sizes
        else:
            bar.update(total=100, progress=view.percent or 0)
        outcome = outcome_text(view)
        if hint:
            outcome.append(f"\n{hint}", style="yellow")
        self.query_one("#pull-outcome", Static).update(outcome)
        self.query_one("#pull-stats", Static).update(stats_text(view))
        self.query_one("#pull-layers", Static).update(layers_text(view))
        log = self.query_one("#pull-log", Log)
        for line in view.log[self._logged:]:
            log.write_line(line)
        self._logged = len(view.log)
        if view.disk is not None:
            self.query_one("#pull-disk", Static).update(Text(view.disk.note, style="dim"))
        if view.outcome is not None:
            self.border_subtitle = f"{view.outcome} · esc: close"

    def cancelled(self) -> None:
        """The worker was cancelled: the stream is closed, the engine keeps the partial blobs."""
        if self.model is None:
            return
        self.border_subtitle = "cancelled · esc: close"
        self.query_one("#pull-outcome", Static).update(
            Text(f"cancelled: press p and pull {self.model} again to resume", style="bold yellow")
        )
        bar = self.query_one("#pull-bar", ProgressBar)
        if bar.total is None:
            bar.update(total=100, progress=0)
        self.last = None
        self.model = None
