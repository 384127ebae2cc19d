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
from textual.binding import Binding
from textual.widgets import Button, Collapsible, DataTable, Header, Input, Label, ProgressBar, Select, Switch

from sparkctl.core.limits import MAX_REPS, MAX_WARMUP
from sparkctl.services.bench import (
    BenchFinished,
    BenchRefused,
    BenchRunner,
    BenchSettings,
    ContextChosen,
    Live,
    Notice,
    Phase,
    RepDone,
    RepStarted,
)
from sparkctl.tui.widgets.fields import Field, ModelField, RowTable
from sparkctl.tui.widgets.footer import KeysFooter
from sparkctl.tui.widgets.gauges import Gauges
from sparkctl.tui.widgets.notes import Note, NotesPanel, NotesScreen
from sparkctl.tui.widgets.stream_tail import StreamTail
from sparkctl.tui.wording import tui_words

LOG_LINES = 5000
SUMMARY_COLUMNS = ("Model", "decode tok/s", "min", "max", "CV %", "client", "prefill", "TTFT s", "load s",
                   "roof %", "J/tok", "placement", "DNF", "verdict", "MLflow")
# under WIDE columns, the ones a verdict needs (the rest are in MLflow and the run's detail)
NARROW_COLUMNS = ("Model", "decode tok/s", "CV %", "TTFT s", "placement", "DNF", "verdict")
WIDE = 110
OLLAMA = "ollama"  # the engine picker's value for the dashboard's engine
SWEEP_FIELDS = ("profile", "depth", "concurrency", "slo")  # the settings' sweep inputs


def _after_run(app) -> None:
    """A run ended: recount the spool (a run MLflow did not take waits there), re-read
    the residency journals (a restore that failed stays loud on the dashboard) and compute
    the dashboard's re-bench warnings again (the run may have answered one)."""
    for name in ("count_pending", "check_residency", "recheck_drift"):
        fn = getattr(app, name, None)
        if callable(fn):
            fn()


def _gpu_busy(app) -> float | None:
    """The highest GPU utilization of the app's last host sample (None without one)."""
    from sparkctl.core.snapshots import Unavailable

    host = getattr(app, "_host", None)
    utils = [g.utilization_pct for g in host.gpu.gpus if not isinstance(g.utilization_pct, Unavailable)] if host else []
    return float(max(utils)) if utils else None


class BenchEvent(Message):
    def __init__(self, event) -> None:
        super().__init__()
        self.event = event


class Said(Message):
    """How a run ended when it ended without runs to show (refused, failed): a note for the
    notes panel and the phase line's one-line summary."""

    def __init__(self, note: Note, phase: str) -> None:
        super().__init__()
        self.note = note
        self.phase = phase


class SweepFinished(Message):
    """A sweep ended (finished, stopped, refused or failed): its cells so far."""

    def __init__(self, result, view) -> None:
        super().__init__()
        self.result = result  # services.bench.sweep.SweepResult
        self.view = view  # core.sweep.SweepView of the cells with numbers


# A one-line explanation of each flag word the runner writes, shown for the selected row.
FLAG_HELP = (
    ("placement", "not 100% on the GPU: part of the model ran on the CPU, so the speed is not the GPU's"),
    ("prefill cached", "the engine reused its prompt cache: prefill and TTFT left out of the medians"),
    ("prompt truncated", "the prompt did not fit num_ctx: the engine evaluated fewer tokens than sent"),
    ("foreign load", "another client used the engine or GPU during the bench: speeds are shared"),
    ("engine busy", "another client was served just before the repetitions"),
    ("reload", "the model was reloaded after the warm-up (a changed option or eviction)"),
    ("throttled", "the GPU slowed its clocks (power, thermal): the numbers are below what it can do"),
    ("did not finish", "repetitions past the ceiling ([bench] timeout_s) are DNF, left out of the medians"),
    ("nothing measured", "every repetition was DNF or an engine error: the run has no figure, so it is FAILED"),
    ("failed", "repetitions the engine answered with an error"),
    ("roofline", "faster than memory bandwidth allows: the model's size or [bench] bandwidth_gbps is wrong"),
    ("lane restore", "a lane model could not be put back as it was"),
    ("placement not verified", "this engine does not report where the weights are"),
)


def explain(flag: str) -> str:
    low = flag.lower()
    for word, text in FLAG_HELP:
        if word in low:
            return text
    return ""


class BenchScreen(Screen):
    BINDINGS = [
        Binding("ctrl+r", "start", "Run"),
        Binding("escape", "stop", "Stop"),
        Binding("ctrl+s", "toggle_settings", "Settings"),
        Binding("w", "toggle_sweep", "Sweep"),
        Binding("n", "notes", "Notes"),
        Binding("f", "follow", "Follow"),  # a llama-benchy run, live (its --emit-progress file)
    ]
    # nothing typed into by accident: the form is reached with tab or a click
    AUTO_FOCUS = ""
    DEFAULT_CSS = """
    #bench-form { height: auto; padding: 0 1; }
    #bench-form Input { width: 1fr; min-width: 24; }
    #bench-form #kind { width: 13; }
    #bench-form #engine { width: 22; }
    #bench-form .badge { padding: 0 1; margin: 1 0 0 1; background: $warning; color: $text; text-style: bold; }
    #sweep-row { height: auto; padding: 0 1; display: none; }
    #sweep-row.-on { display: block; }
    #sweep-row Horizontal { height: 1; }
    #sweep-row Label, #settings Label { padding: 0 1 0 1; }
    #sweep-row Label { width: 14; text-align: right; }
    #sweep-row Input { width: 1fr; }
    #settings { height: auto; padding: 0 1; }
    #settings > Contents > Horizontal { height: 1; margin: 0 0 1 0; }
    #settings Horizontal.last { margin: 0; }
    #settings Input { width: 1fr; }
    #settings #reps, #settings #warmup { width: 6; }
    #settings #cache { width: 12; }
    #settings Switch { border: none; padding: 0; height: 1; width: 6; }
    BenchScreen.-short #settings > Contents > Horizontal { margin: 0; }
    #progress { padding: 0 1; height: 1; }
    #streams { height: 1fr; min-height: 5; }
    #streams > Vertical { border: round $panel-lighten-2; }
    #thinking-box { width: 2fr; }
    #answer-box { width: 3fr; }
    #thinking { color: $text-muted; text-style: italic; }
    #summary { height: auto; max-height: 8; }
    #summary.-empty { display: none; }
    BenchScreen.-short #summary { max-height: 4; }
    #phase { padding: 0 1; height: 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        b = self.app.config.bench
        yield Header()
        with Horizontal(id="bench-form"):
            # a sweep is a mode you can see, never a side effect of fields left filled in
            yield Select([("bench", "bench"), ("sweep", "sweep")], value="bench", allow_blank=False, id="kind")
            yield ModelField(placeholder="e.g. qwen3:32b qwen3:8b", id="models")
            yield Select(self._engine_options(), value=OLLAMA, allow_blank=False, id="engine")
            # solo unloads production: never a state hidden in the collapsed settings
            yield Label("SOLO", id="solo-badge", classes="badge")
            yield Button("Run", id="run", variant="primary")
        # the sweep's own fields, shown in sweep mode only; each keeps its label
        with Vertical(id="sweep-row"):
            with Horizontal():
                yield Label("profiles")
                yield Field(placeholder="prose", id="profile", compact=True)
                yield Label("depths")
                yield Field(placeholder="0", id="depth", compact=True)
            with Horizontal():
                yield Label("concurrency")
                yield Field(placeholder="1", id="concurrency", compact=True)
                yield Label("SLO")
                yield Field(placeholder="e.g. ttft=2s,itl=0.1s", id="slo", compact=True)
        # everything else has the config's value and sits in the settings, so the model
        # field keeps its width at 80 columns; one line per row, so opening them leaves the
        # live panes on screen
        with Collapsible(title=self._settings_title(), collapsed=True, id="settings"):
            with Horizontal():
                yield Label("reps")
                yield Field(value=str(b.reps), id="reps", type="integer", compact=True)
                yield Label("warm-up")
                yield Field(value=str(b.warmup), id="warmup", type="integer", compact=True)
                yield Label("solo" if b.mode == "solo" else "beside", id="mode-label")
                yield Switch(value=b.mode == "solo", id="solo", tooltip="solo: unload every other model first")
                yield Label("cache")
                yield Select([("cold", "cold"), ("warm", "warm")], value="cold", allow_blank=False, id="cache",
                             compact=True)
            with Horizontal():
                yield Label("num_ctx")
                # empty: one context for every model, chosen as the settings line says
                yield Field(placeholder="auto", id="num_ctx", compact=True)
                yield Label("num_predict")
                yield Field(value=str(b.num_predict), id="num_predict", type="integer", compact=True)
                yield Label("ceiling s")
                yield Field(value=f"{b.timeout_s:g}", id="timeout", type="number", compact=True)
            with Horizontal():
                yield Label("think")
                yield Switch(value=b.think, id="think")
                yield Label("allow CPU")
                yield Switch(value=False, id="allow_cpu")
                yield Label("keep loaded")
                yield Switch(value=b.keep_loaded, id="keep_loaded",
                             tooltip="leave the models the bench loads resident afterwards (default: unloaded)")
            with Horizontal(classes="last"):
                yield Label("prompt")
                yield Field(placeholder="empty: the configured one", id="prompt", compact=True)
        yield Label("", id="phase", markup=False)
        yield Gauges(id="gauges")
        yield ProgressBar(id="progress", show_eta=False)
        with Horizontal(id="streams"):
            with Vertical(id="thinking-box") as v:
                v.border_title = "thinking"
                yield StreamTail(id="thinking", max_lines=LOG_LINES)
            with Vertical(id="answer-box") as v:
                v.border_title = "answer"
                yield StreamTail(id="answer", max_lines=LOG_LINES)
        yield RowTable(id="summary", zebra_stripes=True, cursor_type="row", classes="-empty")
        yield NotesPanel(id="notes")
        yield KeysFooter()

    def on_mount(self) -> None:
        s = self.app.config.bench
        self.query_one("#phase", Label).update(
            f"prompt sha256 {BenchSettings.from_config(s).prompt_sha256[:12]} · "
            f"num_predict {s.num_predict} · warm-up {s.warmup} · ceiling {s.timeout_s:g} s · "
            f"temperature {s.temperature:g} · seed {s.seed}"
        )
        self._what_runs: dict[str, str] | None = None  # what the running bench runs, for the settings line
        # the context a run would choose moves with what is resident: the line follows it
        self.watch(self.app, "report", lambda _r: self._settings_changed(), init=False)
        self._total_steps = 0
        self._done_steps = 0
        self.runs: list = []
        self.notes: list[Note] = []  # what this screen has to say beside the runs' own flags
        self.query_one("#notes", NotesPanel).hint = "enter on a row or n: all notes"
        self.query_one("#solo-badge", Label).display = self.app.config.bench.mode == "solo"
        self.watch(self.app, "engines_status", self._engine_reachability, init=True)

    # ---- engine picker ---------------------------------------------------------------------

    @property
    def sweep_mode(self) -> bool:
        return self.query_one("#kind", Select).value == "sweep"

    def _settings_title(self) -> str:
        """The settings in one line, so a collapsed panel still says what a run will do (and,
        while one runs, what it runs: its kind and the context it chose). Within 80 columns:
        the mode only when solo (the SOLO badge says it too). Literal text, never markup."""
        from textual.markup import escape

        b = self.app.config.bench
        if not self.is_mounted:
            solo = " · solo" if b.mode == "solo" else ""
            return f"settings (ctrl+s): {b.reps} reps · {b.warmup} warm-up{solo} · num_ctx auto · cold"
        running = getattr(self, "_what_runs", None)
        if running is not None:
            solo = " · solo" if running["mode"] == "solo" else ""
            return escape(f"running {running['kind']}: {running['reps']} reps · {running['warmup']} warm-up{solo} · "
                          f"{running['ctx']} · {running['cache']}{running['keep']}")
        q = self.query_one
        solo = " · solo" if q("#solo", Switch).value else ""
        keep = " · keep loaded" if q("#keep_loaded", Switch).value else ""
        return escape(f"settings (ctrl+s): {q('#reps', Input).value} reps · {q('#warmup', Input).value} warm-up{solo} · "
                      f"{self._ctx_text()} · {q('#cache', Select).value}{keep}")

    def _ctx_text(self) -> str:
        """The context the form's models would run at, as the runner will choose it."""
        from sparkctl.tui.context_hint import context_label, explicit_ctx, predicted_context

        raw = self.query_one("#num_ctx", Input).value
        try:
            explicit = explicit_ctx(raw)
        except ValueError:
            return f"num_ctx {raw.strip()!r}?"
        if str(self.query_one("#engine", Select).value) != OLLAMA:
            return f"num_ctx {explicit}" if explicit is not None else "num_ctx: the server's"
        models = self.query_one("#models", Input).value.split()
        return context_label(predicted_context(self.app, models, explicit))

    @on(Input.Changed, "#settings Input, #models")
    @on(Switch.Changed, "#settings Switch")
    @on(Select.Changed, "#cache, #engine")
    def _settings_changed(self) -> None:
        title = self._settings_title()
        settings = self.query_one("#settings", Collapsible)
        if settings.title != title:
            settings.title = title

    @on(Select.Changed, "#kind")
    def _kind_changed(self) -> None:
        sweep = self.sweep_mode
        self.query_one("#sweep-row").set_class(sweep, "-on")
        self.query_one("#run", Button).label = "Run sweep" if sweep else "Run"

    def action_toggle_sweep(self) -> None:
        kind = self.query_one("#kind", Select)
        kind.value = "bench" if self.sweep_mode else "sweep"

    @on(Input.Submitted)
    def _field_left(self) -> None:
        """Enter leaves a field (widgets/fields.py); it never starts a run."""
        if not self._bench_running():
            what = "sweep" if self.sweep_mode else "bench"
            self.query_one("#phase", Label).update(f"ctrl+r or Run starts the {what}")

    def _engine_options(self, statuses: tuple = ()) -> list[tuple[str, str]]:
        seen = {st.name: st for st in statuses}
        opts = [("ollama", OLLAMA)]  # the dashboard's engine (its host is in the header)
        for name, e in self.app.config.engines.items():
            st = seen.get(name)
            mark = "" if st is None else (" ●" if st.reachable else " ○ unreachable")
            opts.append((f"{name} ({e.kind}){mark}", name))
        return opts

    def _engine_reachability(self, statuses: tuple) -> None:
        if not self.app.config.engines:
            return
        select = self.query_one("#engine", Select)
        value = select.value
        select.set_options(self._engine_options(statuses))
        select.value = value

    @on(Select.Changed, "#engine")
    def _engine_changed(self, event: Select.Changed) -> None:
        name = event.value
        models = self.query_one("#models", Input)
        if name != OLLAMA and name in self.app.config.engines:
            configured = self.app.config.engines[name].model
            if configured and not models.value.strip():
                models.value = configured
            self.query_one("#solo", Switch).value = False  # one fixed model per server: nothing to unload

    @on(Switch.Changed, "#solo")
    def _mode_changed(self, event: Switch.Changed) -> None:
        self.query_one("#mode-label", Label).update("solo" if event.value else "beside")
        self.query_one("#solo-badge", Label).display = event.value

    def _reset_solo(self) -> None:
        """After a run the switch goes back to the config's [bench] mode: solo stays on only
        where the user pinned it there, never by accident from an earlier run."""
        self.query_one("#solo", Switch).value = self.app.config.bench.mode == "solo"

    def action_toggle_settings(self) -> None:
        c = self.query_one("#settings", Collapsible)
        c.collapsed = not c.collapsed

    # ---- starting and stopping -------------------------------------------------------------

    def _bench_running(self) -> bool:
        return any(w.group == "bench" and not w.is_finished for w in self.workers)

    def _form_settings(self) -> tuple[list[str], str, BenchSettings] | None:
        """Models, engine name and settings from the form; None after telling what is wrong."""
        from sparkctl.core.names import InvalidModelName, ModelName, validate_model_name

        field = self.query_one("#models", ModelField)
        models = field.value.split()
        if not models:
            return self._refuse("name at least one model to bench")
        engine = str(self.query_one("#engine", Select).value)
        if engine != OLLAMA:
            models = [ModelName.served(m) for m in models]  # the server's own names, kept as given
        else:
            try:
                models = [validate_model_name(m) for m in models]  # parsed here, passed on as they are
            except InvalidModelName as exc:
                return self._refuse(str(exc))
            unknown = field.unknown(models)
            if unknown:
                return self._refuse(unknown)

        def number(field: str, kind, low: float, what: str, high: float | None = None):
            raw = self.query_one(f"#{field}", Input).value.strip()
            try:
                value = kind(raw)
                if value < low or (kind is float and not value > 0) or (high is not None and value > high):
                    raise ValueError
            except ValueError:
                within = f"from {low:g} to {high:g}" if high is not None else f">= {low:g}"
                shown = raw if len(raw) <= 20 else raw[:17] + "..."
                self._refuse(f"{what} must be a {'whole ' if kind is int else ''}number {within}, not {shown!r}")
                raise
            return value

        try:
            reps = number("reps", int, 1, "reps", MAX_REPS)
            warmup = number("warmup", int, 0, "warm-up", MAX_WARMUP)
            num_predict = number("num_predict", int, 1, "num_predict")
            timeout = number("timeout", float, 0.001, "the ceiling")
        except ValueError:
            return None
        from sparkctl.tui.context_hint import ctx_field

        try:
            num_ctx = ctx_field(self.query_one("#num_ctx", Input).value)
        except ValueError as exc:
            return self._refuse(str(exc))
        solo = self.query_one("#solo", Switch).value
        if solo and engine != OLLAMA:
            return self._refuse("solo needs Ollama: an OpenAI-compatible server serves one fixed model")
        b = self.app.config.bench
        prompt = self.query_one("#prompt", Input).value.strip() or None
        settings = BenchSettings.from_config(
            b, reps=reps, warmup=warmup, num_predict=num_predict, timeout_s=timeout,
            num_ctx=num_ctx, prompt=prompt,
            mode="solo" if solo else "beside", cache=str(self.query_one("#cache", Select).value),
            think=self.query_one("#think", Switch).value, allow_cpu=self.query_one("#allow_cpu", Switch).value,
            keep_loaded=self.query_one("#keep_loaded", Switch).value,
        )
        return models, engine, settings

    def _refuse(self, text: str, level: str = "error") -> None:
        """Why the form cannot run, on the screen (the phase line and the notes), not only
        in a toast; returns None for the callers' `return`."""
        self.notes = [Note(text, level)]
        self._show_notes()
        self.query_one("#phase", Label).update(f"not started: {text}")
        self.app.remember(text, level)  # the notes hold it whole: no toast over them
        return None

    @on(Button.Pressed, "#run")
    def action_start(self) -> None:
        if self._bench_running():
            # exclusive workers would cancel the running bench: never by a stray Enter
            self.notify("a bench is running; escape stops it", severity="warning")
            return
        got = self._form_settings()
        if got is None:
            return
        models, engine, settings = got
        plan = self._sweep_form(settings)
        if plan is False:
            return
        if settings.mode == "solo" and engine == OLLAMA:
            self.confirm_solo(models, settings, engine, plan)  # production goes down: ask first
            return
        self._go(models, settings, engine, plan)

    def _go(self, models: list[str], settings: BenchSettings, engine: str, plan) -> None:
        if plan is not None:
            self._launch_sweep(models, settings, engine, plan)
        else:
            self._launch(models, settings, engine)

    @work(group="solo-preview", exclusive=True, exit_on_error=False)
    async def confirm_solo(self, models: list[str], settings: BenchSettings, engine: str, plan) -> None:
        """Solo takes lane models down: say which, for about how long, and what can be known
        about their use (services/bench/solo.py); start only on yes."""
        from sparkctl.services.bench.solo import solo_preview
        from sparkctl.tui.widgets.model_dialogs import ConfirmDialog

        self.query_one("#phase", Label).update("solo: reading what is resident and whether it is in use…")
        try:
            preview = await solo_preview(self.app.config, self.app.engine, models, settings, _gpu_busy(self.app))
        except Exception as exc:  # no engine: the bench itself would fail the same way, with its reason
            message = getattr(exc, "message", None) or str(exc)
            self._refuse(f"solo: cannot read the engine's resident models: {message}")
            return
        self.query_one("#phase", Label).update("")
        if not preview.unload:
            self._go(models, settings, engine, plan)
            return

        def answered(yes: bool | None) -> None:
            if yes and not self._bench_running():
                self._go(models, settings, engine, plan)
            elif not yes:
                self.query_one("#phase", Label).update("solo bench not started")

        self.app.push_screen(ConfirmDialog(preview.text(), yes_label="Unload them and run solo"), answered)

    def _sweep_form(self, settings: BenchSettings):
        """(profiles, depths, concurrencies, slo) from the sweep fields; None outside sweep
        mode (a plain bench, whatever the fields hold); False after telling what is wrong."""
        from sparkctl.core.latency import parse_slo
        from sparkctl.core.sweep import parse_int_list
        from sparkctl.services.bench.profiles import DEFAULT_PROFILE, resolve

        if not self.sweep_mode:
            return None
        raw = {f: self.query_one(f"#{f}", Input).value.strip() for f in SWEEP_FIELDS}
        b = self.app.config.bench
        prompt = self.query_one("#prompt", Input).value.strip() or None
        try:
            profiles = resolve(raw["profile"] or DEFAULT_PROFILE, b,
                               settings.num_predict if settings.num_predict != b.num_predict else None, prompt)
            depths = parse_int_list(raw["depth"] or "0", "depth", 0)
            conc = parse_int_list(raw["concurrency"] or "1", "concurrency", 1)
            if max(conc) > 64:
                raise ValueError(f"concurrency: {max(conc)} is above 64")
            try:
                slo = parse_slo(raw["slo"]) if raw["slo"] else None
            except ValueError as exc:
                raise ValueError(f"SLO: {exc}") from None
        except ValueError as exc:
            self._refuse(tui_words(str(exc)))
            return False
        return profiles, depths, conc, slo

    def _begin(self, total: int | None) -> None:
        """A run starts: nothing of the last one stays on screen (its figures, rows, notes)."""
        self._total_steps = total or 0
        self._done_steps = 0
        self.runs = []
        self.notes = []
        # a sweep runs rounds of K streams at once: the phase line names the cell and round, the bar pulses
        self.query_one("#progress", ProgressBar).update(total=total, progress=0)
        self.query_one("#summary", DataTable).clear().add_class("-empty")
        self._show_notes()
        self.query_one(Gauges).set(**{key: "-" for key in self.query_one(Gauges).values})
        self.query_one("#run", Button).disabled = True
        # keys must do what the footer says: nothing left typing into the model field
        self.set_focus(None)
        # Long-lived objects made since start-up (this screen, render caches) leave the
        # collector's view, so full collections stay short while tokens stream in.
        gc.freeze()

    def _launch_sweep(self, models: list[str], settings: BenchSettings, engine: str, plan) -> None:
        self._begin(None)
        self._show_running("sweep", settings)
        self.run_sweep(models, settings, engine, plan)

    def _launch(self, models: list[str], settings: BenchSettings, engine: str = OLLAMA) -> None:
        self._begin(len(models) * (settings.reps + settings.warmup))
        self._show_running("bench", settings)
        self.run_bench(models, settings, engine)

    def _show_running(self, kind: str, settings: BenchSettings) -> None:
        """The settings line says what runs, not what the form holds (a re-bench runs other
        settings); its context once the runner has chosen it (ContextChosen)."""
        self._what_runs = {
            "kind": kind, "reps": str(settings.reps), "warmup": str(settings.warmup), "mode": settings.mode,
            "ctx": f"num_ctx {settings.num_ctx}" if settings.ctx_explicit else "num_ctx: choosing…",
            "cache": settings.cache, "keep": " · keep loaded" if settings.keep_loaded else ""}
        self._settings_changed()

    def start_with(self, models: list[str], overrides: dict, why: str = "") -> None:
        """Start a bench of `models` with settings other than the form's (a re-bench that
        repeats an earlier run's settings); the phase line says why."""
        if self._bench_running():
            self.notify("a bench is running; escape stops it", severity="warning")
            return
        b = self.app.config.bench
        settings = BenchSettings.from_config(b, **overrides)
        # the form shows what runs: a plain bench (never a sweep left selected), its context
        # and the rest of the settings it repeats
        q = self.query_one
        q("#kind", Select).value = "bench"
        q("#sweep-row").set_class(False, "-on")
        q("#models", Input).value = " ".join(models)
        q("#engine", Select).value = OLLAMA
        q("#reps", Input).value = str(settings.reps)
        q("#warmup", Input).value = str(settings.warmup)
        q("#num_ctx", Input).value = str(settings.num_ctx) if settings.ctx_explicit else ""
        q("#num_predict", Input).value = str(settings.num_predict)
        q("#timeout", Input).value = f"{settings.timeout_s:g}"
        q("#cache", Select).value = settings.cache
        q("#think", Switch).value = settings.think
        q("#keep_loaded", Switch).value = settings.keep_loaded
        q("#prompt", Input).value = "" if settings.prompt == b.prompt else settings.prompt
        if why:
            self.query_one("#phase", Label).update(why)
            self.notify(why, timeout=10)
        if settings.mode == "solo":
            self.confirm_solo(models, settings, OLLAMA, None)
            return
        self._launch(models, settings)

    def action_follow(self) -> None:
        """Watch a llama-benchy run through its --emit-progress file: the gauges move with its
        requests; at its end the run is recorded (kind import, every request a step)."""
        if self._bench_running():
            self.notify("a bench is running; escape stops it", severity="warning")
            return
        from sparkctl.tui.widgets.follow_dialog import FollowBenchyDialog

        def chosen(path: str | None) -> None:
            if path:
                self._follow_path = path
                self._begin(None)
                self.query_one("#phase", Label).update(f"following {path} (escape stops)")
                self.follow_benchy(path)

        self.app.push_screen(FollowBenchyDialog(getattr(self, "_follow_path", "")), chosen)

    @work(group="bench", exclusive=True, thread=True, exit_on_error=False)
    def follow_benchy(self, path: str) -> None:
        import os
        import threading
        import time
        from pathlib import Path

        from sparkctl.core.benchy_progress import ProgressState
        from sparkctl.services.imports.benchy_live import FollowFailed, follow
        from sparkctl.services.imports.llama_benchy import progress_records

        self._follow_stop = stop = threading.Event()
        state = ProgressState()
        file = os.path.expanduser(path)
        try:
            follow(file, lambda ev: self.post_message(BenchEvent(ev)), stop=stop, state=state)
            recs = progress_records(state, Path(file).name, experiment=self.app.config.tracking.experiment,
                                    now_ms=int(time.time() * 1000))
            results = [self.app.recorder(rec) for rec in recs] if self.app.recorder is not None else []
            written = sum(1 for r in results if r is not None and getattr(r, "run_id", None))
            how = "complete" if state.complete else "stopped before bench_complete: recorded KILLED"
            self.post_message(BenchEvent(Phase(
                f"llama-benchy run {how}: {len(recs)} run(s) of kind import, {written} in MLflow (Runs screen: h)")))
        except FollowFailed as exc:
            self._said(f"follow failed: {exc}", "follow failed (why: in the notes below)")
        finally:
            self._follow_stop = None
            self.post_message(BenchEvent(None))
            self.app.call_from_thread(_after_run, self.app)

    def action_stop(self) -> None:
        stop = getattr(self, "_follow_stop", None)
        if stop is not None:  # following llama-benchy: stop watching, record what finished
            stop.set()
            self.query_one("#phase", Label).update("stopping: recording what llama-benchy finished so far…")
            return
        if not self._bench_running():
            self.set_focus(None)  # Esc leaves a text field, so the footer's keys work again
            return
        cancelled = self.workers.cancel_group(self, "bench")
        if cancelled:
            self.query_one("#phase", Label).update("stopping: recording the run as KILLED and putting lanes back…")
            self.notify("bench stopped: the run is recorded KILLED with its repetitions (the interrupted one marked)")

    @work(group="bench", exclusive=True, exit_on_error=False)
    async def run_bench(self, models: list[str], settings: BenchSettings, engine_name: str = OLLAMA) -> None:
        engine = self.app.engine if engine_name == OLLAMA else self.app.named_engines.get(engine_name)
        if engine is None:
            self.post_message(BenchEvent(Phase(f"engine {engine_name!r} could not be built from the config")))
            self.post_message(BenchEvent(None))
            return
        runner = BenchRunner(self.app.config, engine, self.app.probes, settings,
                             sink=lambda ev: self.post_message(BenchEvent(ev)),
                             recorder=self.app.recorder, journal=getattr(self.app, "journal", None))
        try:
            await runner.run(models)
        except BenchRefused as exc:
            self._said(f"bench refused: {exc}", "REFUSED: nothing ran (why: in the notes below)")
        except Exception as exc:  # engine gone, etc.: say so, keep the app alive
            message = getattr(exc, "message", None) or str(exc)
            self._said(f"bench failed: {message}", "bench failed (why: in the notes below)")
        finally:
            self.post_message(BenchEvent(None))
            _after_run(self.app)

    @work(group="bench", exclusive=True, exit_on_error=False)
    async def run_sweep(self, models: list[str], settings: BenchSettings, engine_name: str, plan) -> None:
        """The same worker group and events as a bench; SweepRunner runs the cells (one
        MLflow run each) and the matrix opens at the end."""
        from sparkctl.core.sweep import SweepView
        from sparkctl.services.bench.sweep import SweepRunner

        engine = self.app.engine if engine_name == OLLAMA else self.app.named_engines.get(engine_name)
        if engine is None:
            self.post_message(BenchEvent(Phase(f"engine {engine_name!r} could not be built from the config")))
            self.post_message(BenchEvent(None))
            return
        profiles, depths, conc, slo = plan
        runner = SweepRunner(self.app.config, engine, self.app.probes, settings, profiles, depths, conc, slo,
                             sink=lambda ev: self.post_message(BenchEvent(ev)), recorder=self.app.recorder,
                             journal=getattr(self.app, "journal", None))
        try:
            await runner.run(models)
        except BenchRefused as exc:
            self._said(f"sweep refused: {exc}", "REFUSED: nothing ran (why: in the notes below)")
        except Exception as exc:  # engine gone, etc.: say so, keep the app alive
            message = getattr(exc, "message", None) or str(exc)
            self._said(f"sweep failed: {message}", "sweep failed (why: in the notes below)")
        finally:
            res = runner.result
            done = [c for c in res.cells if c.result is not None]
            version = runner.engine_version
            view = SweepView(res.sweep_id, tuple(c.result for c in done), slo.text() if slo else "",
                             f"{getattr(engine, 'kind', '')} {version}".strip(), tuple(c.run.status for c in done))
            self.post_message(SweepFinished(res, view))
            self.post_message(BenchEvent(None))
            _after_run(self.app)

    def _said(self, text: str, phase: str) -> None:
        """From the worker: an ending the notes panel holds whole (N keeps it too)."""
        text = tui_words(text)
        self.post_message(Said(Note(text, "error"), phase))
        self.app.remember(text, "error")

    def on_said(self, message: Said) -> None:
        # why nothing ran comes first: at 80x24 the panel shows a few lines, and the notices
        # said on the way (the context chosen, a wait) matter less than the ending
        self.notes.insert(0, message.note)
        self._show_notes()
        self.query_one("#phase", Label).update(message.phase)

    def on_sweep_finished(self, message: SweepFinished) -> None:
        res = message.result
        if not res.cells:
            return
        self._show_summary(res.runs, labels=[f"{c.cell.model} {c.cell.key}" for c in res.cells])
        stopped = any(c.run.status == "KILLED" for c in res.cells)
        self.query_one("#phase", Label).update(
            f"sweep {'stopped' if stopped else 'finished'}: {len(res.cells)} cell(s), sweep.id {res.sweep_id}")
        if message.view.results:
            from sparkctl.tui.screens.sweep_matrix import SweepMatrixScreen

            self.app.push_screen(SweepMatrixScreen(view=message.view))

    # ---- events from the runner ------------------------------------------------------------

    def on_worker_state_changed(self, event) -> None:
        if event.worker.group == "bench":
            self.refresh_bindings()  # Run or Stop in the footer

    def on_bench_event(self, message: BenchEvent) -> None:
        ev = message.event
        if ev is None:  # the worker ended, however it ended
            self._what_runs = None
            self._settings_changed()
            self.query_one("#run", Button).disabled = False
            self._reset_solo()
            # no live figure outlives its stream (a refusal leaves none of the last run's either)
            self.query_one(Gauges).set(tps="-", elapsed="-")
            phase = self.query_one("#phase", Label)
            if str(phase.render()).startswith(("streaming", "stopping", "loading", "recording")) or \
                    " is resident at num_ctx " in str(phase.render()):
                phase.update("bench stopped" if any(r.status == "KILLED" for r in self.runs) or not self.runs
                             else "bench finished")
        elif isinstance(ev, ContextChosen):
            if self._what_runs is not None:
                self._what_runs["ctx"] = f"num_ctx {ev.num_ctx}" + (f" ({ev.why})" if ev.why else "")
                self._settings_changed()
        elif isinstance(ev, Phase):
            self.query_one("#phase", Label).update(tui_words(ev.text))
        elif isinstance(ev, Notice):
            text = tui_words(ev.text)
            self.query_one("#phase", Label).update(text)
            error = ev.text.startswith("ERROR")
            self.notes.append(Note(text, "error" if error else "warning"))
            self._show_notes()
            self.app.remember(text, "error" if error else "warning")
        elif isinstance(ev, RepStarted):
            what = ev.label or (f"warm-up {-ev.index}/{ev.total}" if ev.warmup else f"{ev.index + 1}/{ev.total}")
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
                tps=("-" if ev.decode_tps is None else f"{ev.decode_tps:.1f}")
                + ("" if ev.acceptance_pct is None else f" · acc {ev.acceptance_pct:.0f}%"),
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

    def _show_summary(self, runs, labels: list[str] | None = None) -> None:
        self.runs = list(runs)
        self._labels = labels
        table = self.query_one("#summary", DataTable)
        self._fill_summary()
        if self.runs and (self.focused is None or not isinstance(self.focused, Input)):
            table.focus()  # up/down pick a run, enter reads its notes
        count = len(self.notes) + sum(len(run_notes(r)) for r in runs)
        stopped = any(r.status == "KILLED" for r in runs)
        head = "bench stopped (KILLED): the finished repetitions are recorded" if stopped else "bench finished"
        self.query_one("#phase", Label).update(head + (f" · {count} note(s) below: enter or n reads them whole"
                                                       if count else ""))
        self._show_notes(0)

    def on_resize(self) -> None:
        if self.runs:
            self._fill_summary()  # the columns that fit the new width

    def _fill_summary(self) -> None:
        """One row per run; every column from WIDE terminal columns, the verdict's own below."""
        table = self.query_one("#summary", DataTable)
        columns = SUMMARY_COLUMNS if self.size.width >= WIDE else NARROW_COLUMNS
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_columns(*columns)
        table.set_class(not self.runs, "-empty")
        labels = getattr(self, "_labels", None)

        def f(x, spec=".1f"):
            return "-" if x is None else format(x, spec)

        for i, run in enumerate(self.runs):
            s = run.summary
            if run.status != "FINISHED":
                verdict = Text(f"{run.status} ({len(run.reps)} rep)", style="bold yellow")
            elif run.invalid:
                verdict = Text("INVALID", style="bold red")
            elif run.stable:
                verdict = Text("stable", style="bold green")
            elif "decode_tps_cv_pct" in s:
                verdict = Text("unstable", style="bold yellow")
            else:
                verdict = Text("- (1 rep)", style="dim")
            # after = n/a: the run stopped before the check after it (no reading, no change)
            placement = run.placement_before if run.placement_after in (run.placement_before, "n/a") else (
                f"{run.placement_before} → {run.placement_after}")
            cells = dict(zip(SUMMARY_COLUMNS, (
                labels[i] if labels else run.model, f(s.get("decode_tps_median")), f(s.get("decode_tps_min")),
                f(s.get("decode_tps_max")), f(s.get("decode_tps_cv_pct")), f(s.get("client_decode_tps_median")),
                f(s.get("prefill_tps_median"), ".0f"), f(s.get("ttft_s_median"), ".2f"),
                f(s.get("load_s_median"), ".2f"), f(s.get("roofline_pct"), ".0f"), f(s.get("joules_per_token"), ".2f"),
                Text(placement, style="" if placement == "100% GPU" else "yellow"),
                str(int(s.get("dnf_count", 0))), verdict,
                run.run_id[:8] if run.run_id else "spooled" if run.sync_message else "-",
            )))
            table.add_row(*(cells[c] for c in columns))
        if self.runs:
            table.move_cursor(row=min(max(cursor, 0), len(self.runs) - 1))

    @on(DataTable.RowHighlighted, "#summary")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_notes(event.cursor_row)

    @on(DataTable.RowSelected, "#summary")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a run: its notes on a whole screen."""
        if 0 <= event.cursor_row < len(self.runs):
            run = self.runs[event.cursor_row]
            self.app.push_screen(NotesScreen(f"Notes: {run.model}", [*self.notes, *run_notes(run)]))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the footer shows what applies now: Run or Stop, Notes while there are some
        if action == "notes":
            return bool(getattr(self, "notes", None) or getattr(self, "runs", None))
        if action in ("start", "stop"):
            return self._bench_running() == (action == "stop")
        if action == "follow":
            return not self._bench_running()
        return True

    def action_notes(self) -> None:
        named = len(self.runs) > 1
        self.app.push_screen(NotesScreen("Notes", [*self.notes, *(n for r in self.runs for n in run_notes(r, named))]))

    def _show_notes(self, index: int | None = None) -> None:
        """The screen's own notes (a refusal, a residency warning), then the selected run's
        flags, each with what it means for the numbers."""
        if index is None:
            index = self.query_one("#summary", DataTable).cursor_row
        run = self.runs[index] if self.runs and 0 <= index < len(self.runs) else None
        notes = [*self.notes, *(run_notes(run) if run is not None else ())]
        title = f"notes: {run.model}" if run is not None and len(self.runs) > 1 else "notes"
        self.query_one("#notes", NotesPanel).show(notes, title)
        self.refresh_bindings()


def run_notes(run, named: bool = False) -> list[Note]:
    """A run's flags and what it said about its ending, as notes (services.bench ModelRun);
    `named`: each note names the run's model (a list of several runs' notes)."""
    from sparkctl.core.specdec import summary_text

    about = run.model if named else ""
    # what makes the numbers suspect first (at 80x24 the panel shows a few lines), then
    # what the run merely reports
    notes = []
    flags = list(dict.fromkeys(run.invalid + run.flags))
    # a cause before its consequence: the repetitions that did not finish, then "nothing measured"
    flags.sort(key=lambda flag: flag.startswith("nothing measured"))
    for flag in flags:
        notes.append(Note(tui_words(flag), "error" if flag in run.invalid else "warning", about, explain(flag)))
    if run.sync_message and not run.run_id:
        notes.append(Note(run.sync_message, "warning", about))
    if summary_text(run.summary):  # what the engine reported of its draft model
        notes.append(Note(summary_text(run.summary), "info", about))
    if run.residency and run.residency != "as before":  # what the end of the bench unloaded and put back
        notes.append(Note(f"residency after the bench: {run.residency}", "info", about))
    return notes
