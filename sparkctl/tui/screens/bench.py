"""The Bench screen: pick models, watch the stream live, read the verdict.

The runner (services/bench.py) does the timing and batches what it reports to ~20 updates
a second; this screen only appends those batches to bounded Logs and moves gauges.
"""

from __future__ import annotations

import gc

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, ProgressBar, Switch

from sparkctl.tui.widgets.gauges import Gauges
from sparkctl.tui.widgets.stream_tail import StreamTail
from sparkctl.services.bench import (
    BenchFinished,
    BenchRefused,
    BenchRunner,
    BenchSettings,
    Live,
    Notice,
    Phase,
    RepDone,
    RepStarted,
)

LOG_LINES = 5000
SUMMARY_COLUMNS = ("Model", "decode tok/s", "min", "max", "CV %", "client", "prefill", "TTFT s", "load s",
                   "DNF", "verdict", "MLflow")


class BenchEvent(Message):
    def __init__(self, event) -> None:
        super().__init__()
        self.event = event


class BenchScreen(Screen):
    BINDINGS = [
        ("ctrl+r", "start", "Run bench"),
        ("escape", "stop", "Stop bench"),
    ]
    DEFAULT_CSS = """
    #bench-form { height: auto; padding: 0 1; }
    #bench-form Input { width: 1fr; }
    #bench-form #reps { width: 12; }
    #bench-form Label { padding: 1 1 0 1; }
    #progress { padding: 0 1; height: 1; }
    #streams { height: 1fr; }
    #streams > Vertical { border: round $panel-lighten-2; }
    #thinking-box { width: 2fr; }
    #answer-box { width: 3fr; }
    #thinking { color: $text-muted; text-style: italic; }
    #summary { height: auto; max-height: 10; }
    #phase { padding: 0 1; height: 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="bench-form"):
            yield Input(placeholder="models to bench, e.g. qwen3:32b qwen3:8b", id="models")
            yield Label("reps")
            yield Input(value=str(self.app.config.bench.reps), id="reps", type="integer")
            yield Label("solo")
            yield Switch(value=self.app.config.bench.mode == "solo", id="solo")
            yield Button("Run", id="run", variant="primary")
        yield Label("", id="phase")
        yield Gauges(id="gauges")
        yield ProgressBar(id="progress", show_eta=False)
        with Horizontal(id="streams"):
            with Vertical(id="thinking-box") as v:
                v.border_title = "thinking"
                yield StreamTail(id="thinking", max_lines=LOG_LINES)
            with Vertical(id="answer-box") as v:
                v.border_title = "answer"
                yield StreamTail(id="answer", max_lines=LOG_LINES)
        yield DataTable(id="summary", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#summary", DataTable).add_columns(*SUMMARY_COLUMNS)
        s = self.app.config.bench
        self.query_one("#phase", Label).update(
            f"prompt sha256 {BenchSettings.from_config(s).prompt_sha256[:12]} · num_ctx {s.num_ctx} · "
            f"num_predict {s.num_predict} · warm-up {s.warmup} · ceiling {s.timeout_s:g} s · "
            f"temperature {s.temperature:g} · seed {s.seed}"
        )
        self._total_steps = 0
        self._done_steps = 0

    # ---- starting and stopping -------------------------------------------------------------

    @on(Button.Pressed, "#run")
    @on(Input.Submitted)
    def action_start(self) -> None:
        if any(w.group == "bench" and not w.is_finished for w in self.workers):
            # exclusive workers would cancel the running bench: never by a stray Enter
            self.notify("a bench is running; escape stops it", severity="warning")
            return
        models = self.query_one("#models", Input).value.split()
        if not models:
            self.notify("name at least one model to bench", severity="warning")
            return
        from sparkctl.core.names import InvalidModelName, validate_model_name

        for m in models:
            try:
                validate_model_name(m)
            except InvalidModelName as exc:
                self.notify(str(exc), severity="error")
                return
        try:
            reps = int(self.query_one("#reps", Input).value)
            if reps < 1:
                raise ValueError
        except ValueError:
            self.notify("reps must be a whole number >= 1", severity="error")
            return
        settings = BenchSettings.from_config(
            self.app.config.bench, reps=reps,
            mode="solo" if self.query_one("#solo", Switch).value else "beside",
        )
        self._launch(models, settings)

    def _launch(self, models: list[str], settings: BenchSettings) -> None:
        self._total_steps = len(models) * (settings.reps + settings.warmup)
        self._done_steps = 0
        self.query_one("#progress", ProgressBar).update(total=self._total_steps, progress=0)
        self.query_one("#summary", DataTable).clear()
        self.query_one("#run", Button).disabled = True
        # Long-lived objects made since start-up (this screen, render caches) leave the
        # collector's view, so full collections stay short while tokens stream in.
        gc.freeze()
        self.run_bench(models, settings)

    def start_with(self, models: list[str], overrides: dict, why: str = "") -> None:
        """Start a bench of `models` with settings other than the form's (a re-bench that
        repeats an earlier run's settings); the phase line says why."""
        if any(w.group == "bench" and not w.is_finished for w in self.workers):
            self.notify("a bench is running; escape stops it", severity="warning")
            return
        settings = BenchSettings.from_config(self.app.config.bench, **overrides)
        self.query_one("#models", Input).value = " ".join(models)
        self.query_one("#reps", Input).value = str(settings.reps)
        if why:
            self.query_one("#phase", Label).update(why)
            self.notify(why, timeout=10)
        self._launch(models, settings)

    def action_stop(self) -> None:
        cancelled = self.workers.cancel_group(self, "bench")
        if cancelled:
            self.notify("bench stopped: the run is recorded KILLED with its repetitions (the interrupted one marked)")

    @work(group="bench", exclusive=True, exit_on_error=False)
    async def run_bench(self, models: list[str], settings: BenchSettings) -> None:
        runner = BenchRunner(self.app.config, self.app.engine, self.app.probes, settings,
                             sink=lambda ev: self.post_message(BenchEvent(ev)),
                             recorder=self.app.recorder, journal=getattr(self.app, "journal", None))
        try:
            await runner.run(models)
        except BenchRefused as exc:
            self.post_message(BenchEvent(Phase(f"REFUSED: {exc}")))
            self.app.notify(f"bench refused: {exc}", severity="error", timeout=10)
        except Exception as exc:  # engine gone, etc.: say so, keep the app alive
            message = getattr(exc, "message", None) or str(exc)
            self.post_message(BenchEvent(Phase(f"bench failed: {message}")))
            self.app.notify(f"bench failed: {message}", severity="error", timeout=10)
        finally:
            self.post_message(BenchEvent(None))

    # ---- events from the runner ------------------------------------------------------------

    def on_bench_event(self, message: BenchEvent) -> None:
        ev = message.event
        if ev is None:
            self.query_one("#run", Button).disabled = False
        elif isinstance(ev, Phase):
            self.query_one("#phase", Label).update(ev.text)
        elif isinstance(ev, Notice):
            self.query_one("#phase", Label).update(ev.text)
            error = ev.text.startswith("ERROR")
            self.app.notify(ev.text, severity="error" if error else "warning", timeout=20 if error else 8)
        elif isinstance(ev, RepStarted):
            what = f"warm-up {-ev.index}/{ev.total}" if ev.warmup else f"{ev.index + 1}/{ev.total}"
            self.query_one(Gauges).set(rep=f"{ev.model} {what}", tokens="0", elapsed="0.0 s", ttft="-", tps="-")
            self.query_one("#phase", Label).update(f"streaming {ev.model} ({what})")
            for view_id in ("#thinking", "#answer"):
                self.query_one(view_id, StreamTail).write_line(f"── {ev.model} {what} ──")
        elif isinstance(ev, Live):
            if ev.thinking:
                self._append("#thinking", ev.thinking)
            if ev.answer:
                self._append("#answer", ev.answer)
            self.query_one(Gauges).set(
                tokens=str(ev.tokens), elapsed=f"{ev.elapsed_s:.1f} s",
                ttft="-" if ev.ttft_s is None else f"{ev.ttft_s:.2f} s",
                tps="-" if ev.decode_tps is None else f"{ev.decode_tps:.1f}",
            )
        elif isinstance(ev, RepDone):
            self._done_steps += 1
            self.query_one("#progress", ProgressBar).update(progress=self._done_steps)
            r = ev.result
            if r.dnf:
                self.query_one("#answer", StreamTail).write_line(f"\n[DNF after {r.wall_s:.0f} s, {r.client_tokens} tokens]")
            elif r.error:
                self.query_one("#answer", StreamTail).write_line(f"\n[error: {r.error}]")
        elif isinstance(ev, BenchFinished):
            self._show_summary(ev.runs)

    def _append(self, view_id: str, text: str) -> None:
        self.query_one(view_id, StreamTail).append(text)

    def _show_summary(self, runs) -> None:
        table = self.query_one("#summary", DataTable)
        table.clear()

        def f(x, spec=".1f"):
            return "-" if x is None else format(x, spec)

        for run in runs:
            s = run.summary
            if run.invalid:
                verdict = Text("INVALID", style="bold red")
            elif run.stable:
                verdict = Text("stable", style="bold green")
            elif "decode_tps_cv_pct" in s:
                verdict = Text("unstable", style="bold yellow")
            else:
                verdict = Text("- (1 rep)", style="dim")
            table.add_row(
                run.model, f(s.get("decode_tps_median")), f(s.get("decode_tps_min")), f(s.get("decode_tps_max")),
                f(s.get("decode_tps_cv_pct")), f(s.get("client_decode_tps_median")),
                f(s.get("prefill_tps_median"), ".0f"), f(s.get("ttft_s_median"), ".2f"),
                f(s.get("load_s_median"), ".2f"), str(int(s.get("dnf_count", 0))), verdict,
                run.run_id[:8] if run.run_id else "spooled" if run.sync_message else "-",
            )
        notes = []
        for run in runs:
            notes.extend(f"{run.model}: {m}" for m in run.invalid + run.flags)
            if run.sync_message and not run.run_id:
                notes.append(f"{run.model}: {run.sync_message}")
        self.query_one("#phase", Label).update("; ".join(notes) if notes else "bench finished")
