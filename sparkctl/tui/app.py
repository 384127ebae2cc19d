"""The Textual app: sampling workers, shared state, screens as modes.

The app samples the host (thread worker: /proc and NVML block) and the engine (async
worker) on a timer that restarts only when the previous sample finished, so slow reads
never stack up. Workers post messages; the handlers here own the state that screens watch.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.reactive import var
from textual.worker import Worker, WorkerState

from sparkctl import __version__
from sparkctl.config import Config
from sparkctl.core.snapshots import GIB, EngineStatus, HostSnapshot, MemInfo, Unavailable
from sparkctl.services.status import StatusReport, build_report, openai_engines_status, poll_engine_status
from sparkctl.tui.messages import EngineSampled, HostSampled, NamedEnginesSampled, RunnersSampled
from sparkctl.tui.screens.dashboard import DashboardScreen
from sparkctl.tui.themes import load_themes

FALLBACK_THEME = "sparkctl-dark"
SCREENS = Binding.Group("screens")
VERSION_EVERY_S = 10.0  # /api/ps every refresh; /api/version this often or after a failure
# worker groups that quitting would interrupt: the app asks first
BUSY_GROUPS = {"bench": "a bench", "eval": "an eval", "pull": "a pull"}
DRIFT_DELAY_S = 3.0  # after the engine's version is first seen: the lane re-bench check
ENGINES_REFRESH_S = 5.0  # the extra [engines.NAME] servers: a few seconds is fresh enough
MESSAGES_KEPT = 200  # toasts kept for N (Messages)
FIRST_FRAME_LATEST_S = 5.0  # what waits for the first frame starts by then whatever happens


class SparkApp(App):
    TITLE = "sparkctl"
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    # The Models and Bench screens (and the services behind them) are imported when first
    # opened: ~0.15 s that the first frame does not need.
    MODES = {"dashboard": DashboardScreen, "models": lambda: _models_screen(), "bench": lambda: _bench_screen(),
             "runs": lambda: _runs_screen(), "eval": lambda: _eval_screen(), "fleet": lambda: _fleet_screen()}
    DEFAULT_MODE = "dashboard"
    # screens get -short under 32 rows (app.tcss lets the dashboard's history give way)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    # sparkctl's own commands in the palette (ctrl+p), beside Textual's (theme, keys, quit)
    COMMANDS = App.COMMANDS | {lambda: _sparkctl_commands()}
    # The screens' keys share one group in the footer ("d m b h e screens"), so they stay on
    # it at 80 columns beside each screen's own keys; `?` lists them with their names.
    BINDINGS = [
        Binding("d", "switch_mode('dashboard')", "Dashboard", group=SCREENS),
        Binding("m", "switch_mode('models')", "Models", group=SCREENS),
        Binding("b", "switch_mode('bench')", "Bench", group=SCREENS),
        Binding("h", "switch_mode('runs')", "Runs", group=SCREENS),
        Binding("e", "switch_mode('eval')", "Eval", group=SCREENS),
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("y", "sync", "Sync runs", show=False),
        Binding("o", "show_config", "Config", show=False),
        Binding("F", "switch_mode('fleet')", "Fleet", show=False),
        Binding("N", "messages", "Messages", show=False),
    ]

    # a var, not a reactive: setting it must not repaint the whole screen twice a second
    report: var[StatusReport | None] = var(None, always_update=True)
    engines_status: var[tuple] = var((), always_update=True)
    # lanes whose last valid bench ran on another engine version: (lane, message) pairs
    stale_lanes: var[tuple] = var(())
    pending_runs: var[int] = var(0)  # runs in the spool not yet in MLflow (y syncs them)
    # resident model name -> its llama-server runner's facts (Ollama >= 0.30 on this machine)
    runners: var[dict] = var({}, always_update=True)

    def __init__(
        self,
        config: Config,
        engine: Any,
        probes: Any,
        clock: Callable[[], datetime] | None = None,
        user_theme_dir: Path | None = None,
        recorder: Callable[[Any], Any] | None = None,
        named_engines: dict[str, Any] | None = None,
        spool: Any = None,
        store: Any = None,
        first: Any = None,
        tracking: Any = None,
    ) -> None:
        super().__init__()
        # the CLI's StatusPrefetch (first samples taken while Textual imported), or None
        self._first = first
        self._first_host_due = self._first_engine_due = first is not None
        self._wake = {"probe": threading.Event(), "engine": threading.Event()}
        self._shown_at_mount: set[str] = set()  # sampling groups whose first sample the first frame had
        self._event_loop: asyncio.AbstractEventLoop | None = None
        # The spool (benches journal to it; dead runs are closed at start) and the MlflowStore
        # the Runs screen and the engine-change note read. With `tracking` (the CLI's
        # TrackingLater) they are opened when first used, after the first frame.
        self._tracking = tracking
        self._spool, self._store = spool, store
        self.named_engines = named_engines or {}  # [engines.NAME] -> engine object
        self.recorder = recorder
        self.config = config
        self.engine = engine
        self.probes = probes
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.user_theme_dir = user_theme_dir
        # Theme files are read here, before the event loop runs, not in a handler.
        self._themes, self.theme_problems = load_themes(user_theme_dir)
        for theme in self._themes:
            self.register_theme(theme)
        wanted = config.ui.theme
        if wanted not in self.available_themes:
            self.theme_problems.append(f"theme {wanted!r} not found; using {FALLBACK_THEME}")
            wanted = FALLBACK_THEME
        self._start_with_theme(wanted)
        self._saved_theme = wanted
        # the version and the engine's address in the title bar from the first frame on (set
        # in on_mount, they reached the header only in a frame after it)
        self.set_reactive(App.sub_title, self._sub_title_text())
        self._engine_status: EngineStatus | None = None
        self._host: HostSnapshot | None = None
        self._engine_down_since: float | None = None
        self._version_at = 0.0
        self._sample_timers: dict[str, Any] = {}  # sampling group -> its one pending timer
        n = max(10, int(config.ui.history_s / config.ui.refresh_s))
        self.history_available: deque[float] = deque(maxlen=n)
        self.history_gpu: deque[float] = deque(maxlen=n)
        self._stopping = False
        self._stop_signal: int | None = None  # SIGHUP/SIGTERM received: stopping and quitting
        self.interrupted = False  # ended by a signal (exit code 130, as the CLI's)
        self.restore_failed = False  # ...and a model it had unloaded could not be put back (4)
        self._undo_signals: Callable[[], None] | None = None
        self._residency_warnings: tuple[str, ...] = ()  # models a dead bench left changed
        self._drift_checked: tuple[str, str] | None = None
        # the runners beside the resident models: read in the engine's sampling thread after
        # the first frame (services/runners.ResidentRunners), again when the resident set changes
        self._painted = False
        self._runner_reader: Any = None
        self._runner_notes: set[str] = set()  # why no runner is shown: said once each
        # model keys side-loaded from the Models screen: "contender" until promoted or unloaded,
        # kept in sparkctl's own state file so the mark outlives a restart
        from sparkctl.core.names import model_key

        self.contenders: set[str] = {model_key(m) for m in getattr(config, "contenders", ())}
        # model key -> the lane it is a contender for (its bench runs at that lane model's context)
        self.contender_lanes: dict[str, str] = {model_key(m): lane for m, lane in
                                                (getattr(config, "contender_lanes", None) or {}).items()}
        # every message a toast showed, newest last: N shows them whole after the toast is gone
        self.messages: deque[tuple[str, str, str]] = deque(maxlen=MESSAGES_KEPT)

    # ---- the run record, opened when first used ------------------------------------------

    def _open_tracking(self) -> None:
        if self._tracking is not None and (self._spool is None or self._store is None):
            spool, store = self._tracking.get()
            self._spool = self._spool if self._spool is not None else spool
            self._store = self._store if self._store is not None else store

    @property
    def spool(self) -> Any:
        if self._spool is None:
            self._open_tracking()
        return self._spool

    @property
    def store(self) -> Any:
        if self._store is None:
            self._open_tracking()
        return self._store

    @store.setter
    def store(self, store: Any) -> None:
        self._store = store

    @property
    def journal(self) -> Any:
        spool = self.spool
        return spool.journal if spool is not None else None

    def _has_spool(self) -> bool:
        """Whether there is a spool, without opening it."""
        return self._spool is not None or self._tracking is not None

    def _has_store(self) -> bool:
        return self._store is not None or self._tracking is not None

    # ---- start-up ------------------------------------------------------------------------

    def _start_with_theme(self, name: str) -> None:
        """Make ``name`` the theme the first styles are computed with. Assigned to
        ``self.theme`` (in on_mount or here), Textual restyled the whole screen twice more
        before the first frame (~25 ms of CPU); so the value is set without its watcher, and
        what the watcher does to an app that has no styles yet is done here (the theme's
        classes, and the ANSI colours matched to a dark or light theme; textual is pinned)."""
        self.set_reactive(App.theme, name)
        # The stylesheet was made (in App.__init__) with Textual's default theme's variables:
        # given this theme's now, before anything is parsed, the first parse is the last
        # (the dashboard's screen is then taken as styled: tui/breakpoints.py).
        self.stylesheet.set_variables(self.get_css_variables())
        dark = self.current_theme.dark
        self.set_class(dark, "-dark-mode", update=False)
        self.set_class(not dark, "-light-mode", update=False)
        self.add_class(f"-theme-{name}", update=False)
        self._refresh_truecolor_filter(self.ansi_theme)

    def get_driver_class(self):
        """A terminal driver that outlives its terminal (an ssh drop: tui/hangup.py); the
        web view (textual-serve names its own driver) and Windows keep Textual's."""
        from textual import constants

        if constants.DRIVER is not None or os.name != "posix":
            return super().get_driver_class()
        from sparkctl.tui.hangup import HangupSafeDriver

        return HangupSafeDriver

    def on_mount(self) -> None:
        if not self.is_headless:  # tests drive a headless app: the test process keeps its own signals
            from sparkctl.tui.hangup import install

            self._undo_signals = install(asyncio.get_running_loop(), self._on_stop_signal)
        self._show_sub_title()
        # a theme picked in the palette ("Change theme") is saved, in sparkctl's own state
        # file (never the user's sparkctl.toml), and restored at the next start
        self.theme_changed_signal.subscribe(self, lambda theme: self._theme_picked(theme.name))
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=8)
        self._event_loop = asyncio.get_running_loop()  # where engines without blocking calls are asked
        self._take_first_samples()
        self.sample_host()
        self.sample_engine()
        if self.config.engines:
            self.sample_named_engines()
        # views only read: what a dead bench left changed is shown on the dashboard, put back
        # when the user asks (P), or by a bench of this TUI before it starts
        self.check_residency()

    def _take_first_samples(self) -> None:
        """The prefetched samples that are in already go into the first frame itself (one
        paint with data instead of an empty one and then another); the loops take the rest."""
        if self._first is None:
            return
        engine, host = self._first.first("engine", wait=False), self._first.first("host", wait=False)
        if engine is not None:
            self._first_engine_due = False
            self._shown_at_mount.add("engine")
            self._version_at = time.monotonic() if engine.reachable else 0.0
            self.on_engine_sampled(EngineSampled(engine))
        if host is not None:
            self._first_host_due = False
            self._shown_at_mount.add("probe")
            self.on_host_sampled(HostSampled(host))

    def _theme_picked(self, name: str) -> None:
        if name != self._saved_theme:
            self._saved_theme = name
            self.save_theme(name)

    @work(thread=True, group="theme", exclusive=False, exit_on_error=False)
    def save_theme(self, name: str) -> None:
        """Write the theme through the owned-file writer (flock + atomic rename): file I/O
        stays off the UI thread."""
        from sparkctl.config import ConfigError, save_ui_theme
        from sparkctl.statefile import StateError

        name = self._saved_theme  # the latest pick: a quicker later save must not be overwritten by this one
        try:
            save_ui_theme(self.config, name)
        except (OSError, StateError, ConfigError) as exc:
            self.call_from_thread(self.notify, f"theme {name!r} not saved: {exc}", severity="warning", timeout=8)

    def set_contender(self, name: str, on: bool, lane: str = "") -> None:
        """Mark `name` contender for `lane` ("" none said), or clear the mark, here and in
        sparkctl's own state file."""
        from sparkctl.core.names import model_key

        key = model_key(name)
        if (key in self.contenders) == on and (not on or self.contender_lanes.get(key, "") == lane):
            return
        (self.contenders.add if on else self.contenders.discard)(key)
        if on and lane:
            self.contender_lanes[key] = lane
        else:
            self.contender_lanes.pop(key, None)
        self.save_contender(name, on, lane)

    @work(thread=True, group="contender", exclusive=False, exit_on_error=False)
    def save_contender(self, name: str, on: bool, lane: str = "") -> None:
        """Through the owned-file writer (flock + atomic rename), off the UI thread."""
        from sparkctl.config import ConfigError, save_contender
        from sparkctl.statefile import StateError

        try:
            save_contender(self.config, name, on, lane=lane)
        except (OSError, StateError, ConfigError) as exc:
            self.call_from_thread(self.notify, f"contender mark of {name} not saved: {exc}", severity="warning",
                                  timeout=8)

    @work(thread=True, group="recover", exit_on_error=False)
    def recover_runs(self) -> None:
        """Close runs whose sparkctl died mid-bench (KILLED, with their finished repetitions).
        MLflow is not touched here: `sparkctl sync` writes them."""
        from sparkctl.services.tracking import recover_interrupted

        try:
            records = recover_interrupted(self.spool)
        except OSError as exc:
            self.call_from_thread(self.notify, f"could not read the spool {self.spool.path}: {exc}",
                                  severity="warning", timeout=10)
            return
        if records:
            models = ", ".join(sorted({r.params.get("model", "?") for r in records}))
            self.call_from_thread(
                self.notify, f"recovered {len(records)} interrupted run(s) of {models} as KILLED "
                "(their process died); `sparkctl sync` writes them to MLflow", severity="warning", timeout=15)

    def action_put_back(self) -> None:
        """P: put back what a dead bench (or a restore that failed) left changed, as
        `sparkctl lanes --restore` does."""
        self.put_back_residency()

    @work(group="recover-residency", exclusive=True, exit_on_error=False)
    async def put_back_residency(self) -> None:
        """Put back what a bench that died changed (services/bench/recovery.py), once it
        holds the engine's bench lock, retrying restores that failed; say what it did; warn
        on the dashboard if it could not. Started by the user, never by a view."""
        from sparkctl import paths

        if not await asyncio.to_thread(paths.residency_journals):
            self.notify("nothing to put back: no bench left models changed", timeout=5)
            return
        from sparkctl.services.bench.recovery import recover_residency

        report = await recover_residency(self.config, engines=[self.engine, *self.named_engines.values()],
                                         retry_failed=True)
        if not report.lines:
            self.notify("nothing to put back: the bench that changed them is still running", timeout=8)
        for line in report.done + report.notes:
            self.notify(line, severity="warning", timeout=20)
        for line in report.warnings:
            self.notify(line, severity="error", timeout=30)
        self.check_residency()

    @work(thread=True, group="residency", exclusive=True, exit_on_error=False)
    def check_residency(self) -> None:
        """Restores that failed and dead benches not yet repaired: loud on the dashboard."""
        from sparkctl import paths

        warnings: tuple[str, ...] = ()
        if paths.residency_journals():
            from sparkctl.services.tracking import residency_warnings

            warnings = tuple(residency_warnings())
        self.call_from_thread(self._set_residency_warnings, warnings)

    def _set_residency_warnings(self, warnings: tuple[str, ...]) -> None:
        if warnings != self._residency_warnings:
            self._residency_warnings = warnings
            self._rebuild()

    def on_ready(self) -> None:
        # should no dashboard frame ever say so (a screen that never draws), the collector
        # still comes back
        self.set_timer(FIRST_FRAME_LATEST_S, self.first_frame_written)

    def first_frame_written(self) -> None:
        """The dashboard's first frame is on the terminal (DashboardScreen says so, once the
        frame is written: Textual's Ready can come before it). What that frame did not need
        starts now."""
        if self._painted:
            return
        self._painted = True  # the runners are read from the next engine sample on, never for the first frame
        # Everything imported and built so far lives as long as the app. Moving it out of
        # the collector's view turns 100-140 ms full collections during a 2,000 tok/s
        # stream into a few ms (measured by benchmarks/stream.py). The CLI paused the
        # collector until this first frame (cli/__init__.py pause_gc_until_first_frame).
        gc.freeze()
        gc.enable()
        # the spool's modules and its read are nothing that frame shows
        if self._has_spool():
            self.recover_runs()

    # ---- workers -------------------------------------------------------------------------

    # The host and the engine are each sampled by one thread of their own for the app's
    # life, a sample every refresh (r wakes them at once). A Textual worker and a timer per
    # sample cost the event loop ~0.5 ms each time, and the engine's answer through httpx's
    # async client ~1.3 ms: at a 1 s refresh, most of an idle dashboard's CPU. Only the first
    # sample of each is a worker (whoever waits for the app's workers waits for it); the
    # thread then stops with the app. The first samples may come from the CLI's prefetch
    # (services/prefetch.py), taken while Textual was importing.

    @work(thread=True, group="probe", exit_on_error=False)
    def sample_host(self) -> None:
        self._first_then_loop("probe", self._read_host, HostSampled)

    @work(thread=True, group="engine", exit_on_error=False)
    def sample_engine(self) -> None:
        self._first_then_loop("engine", self._read_engine, EngineSampled)

    def _first_then_loop(self, group: str, read: Callable[[], Any], message: type) -> None:
        if group not in self._shown_at_mount:
            self._sample_once(group, read, message)
        if not self._stopping:
            threading.Thread(target=self._sample_loop, args=(group, read, message), name=f"sparkctl-{group}",
                             daemon=True).start()

    def _sample_once(self, group: str, read: Callable[[], Any], message: type) -> None:
        try:
            sample = read()
        except Exception as exc:  # a failed probe is logged and tried again next refresh
            self.log.error(f"{group} sample failed: {exc!r}")
            return
        if group == "engine" and sample is not None:
            self._sample_runners(sample)
        # an engine that says what it said last time changes nothing: no message to handle
        if sample is None or self._stopping or (group == "engine" and sample == self._engine_status):
            return
        self.post_message(message(sample))

    def _sample_loop(self, group: str, read: Callable[[], Any], message: type) -> None:
        wake = self._wake[group]
        while not self._stopping:
            wake.wait(self.config.ui.refresh_s)
            wake.clear()
            if not self._stopping:
                self._sample_once(group, read, message)

    def _sample_runners(self, status: EngineStatus) -> None:
        """In the engine's sampling thread: the runners beside the resident models, read only
        when the resident set changed (a tuple comparison otherwise) and never before the
        first frame. Their endpoints answer on loopback with short timeouts."""
        if not self._painted or self._stopping or not status.reachable or status.error is not None:
            return
        if self._runner_reader is None:
            from sparkctl.services.runners import ResidentRunners

            self._runner_reader = ResidentRunners(self.engine)
        try:
            changed = self._runner_reader.refresh(status.resident)
        except Exception as exc:  # extra facts: a failure is logged, the dashboard goes on without them
            self.log.error(f"runner read failed: {exc!r}")
            return
        if changed and not self._stopping:
            r = self._runner_reader
            self.post_message(RunnersSampled(dict(r.facts), r.note, r.local))

    def on_runners_sampled(self, message: RunnersSampled) -> None:
        self.runners = message.runners
        if message.note and message.local and message.note not in self._runner_notes:
            self._runner_notes.add(message.note)
            self.notify(f"runner facts not shown: {message.note}", timeout=8)

    def _stop_sampling(self) -> None:
        self._stopping = True
        for wake in self._wake.values():
            wake.set()

    def _read_host(self) -> HostSnapshot | None:
        if self._first is not None and self._first_host_due:
            self._first_host_due = False
            first = self._first.first("host")
            if first is not None:
                return first
        return self.probes.read()

    def _read_engine(self) -> EngineStatus | None:
        if self._first is not None and self._first_engine_due:
            self._first_engine_due = False
            first = self._first.first("engine")
            if first is not None:
                self._version_at = time.monotonic() if first.reachable else 0.0
                return first
        last = self._engine_status
        fresh = last is not None and last.reachable and time.monotonic() - self._version_at < VERSION_EVERY_S
        status = poll_engine_status(self.engine, last.version if fresh else None, self._event_loop)
        if status is not None and not fresh and status.reachable:
            self._version_at = time.monotonic()
        return status

    @work(group="engines", exclusive=True, exit_on_error=False)
    async def sample_named_engines(self) -> None:
        statuses = await openai_engines_status(self.config, self.named_engines)
        self.post_message(NamedEnginesSampled(statuses))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Schedule the next sample once this one has finished. One timer per group: a
        sample cancelled by a manual refresh schedules nothing, so the chains never fork."""
        w = event.worker
        if w.group == "recover" and w.is_finished and not self._stopping:
            self.count_pending()  # runs closed at start wait in the spool (the screens recount after theirs)
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR) or self._stopping:
            return
        if event.state is WorkerState.ERROR:
            self.log.error(f"{w.group} sample failed: {w.error!r}")
        if w.group == "engines":
            self._schedule("engines", max(ENGINES_REFRESH_S, self.config.ui.refresh_s), self.sample_named_engines)

    def _schedule(self, group: str, delay: float, sample) -> None:
        old = self._sample_timers.pop(group, None)
        if old is not None:
            old.stop()
        self._sample_timers[group] = self.set_timer(delay, sample)

    # ---- handlers own the state ----------------------------------------------------------

    def on_host_sampled(self, message: HostSampled) -> None:
        self._host = message.snapshot
        snap = message.snapshot
        if isinstance(snap.meminfo, MemInfo):
            # 0.1 GiB steps: finer wiggles of the page cache would repaint the sparkline every
            # second without telling the user anything
            self.history_available.append(round(snap.meminfo.available / GIB, 1))
        utils = [g.utilization_pct for g in snap.gpu.gpus if not isinstance(g.utilization_pct, Unavailable)]
        if utils:
            self.history_gpu.append(float(max(utils)))
        self._rebuild()

    def on_engine_sampled(self, message: EngineSampled) -> None:
        status = message.status
        if status.reachable:
            if self._engine_down_since is not None:
                self.notify(f"engine is back: {status.kind} {status.version}", timeout=4)
            self._engine_down_since = None
        elif self._engine_down_since is None:
            self._engine_down_since = time.monotonic()
            if self._engine_status is not None and self._engine_status.reachable:
                self.notify(f"engine unreachable: {status.error}", severity="error", timeout=6)
        changed = status != self._engine_status
        self._engine_status = status
        if status.reachable and status.version and (status.kind, status.version) != self._drift_checked:
            self._drift_checked = (status.kind, status.version)
            # SQLite or HTTP, never MLflow in this process: after the first frames all the same
            self.set_timer(DRIFT_DELAY_S, lambda: self.check_drift(status.kind, status.version))
        if changed:  # the host sample rebuilds every refresh anyway; don't paint twice
            self._rebuild()

    def on_named_engines_sampled(self, message: NamedEnginesSampled) -> None:
        self.engines_status = message.statuses

    def _sub_title_text(self) -> str:
        from sparkctl.core.redact import redact_uri

        text = f"v{__version__} · {redact_uri(self.config.engine.host)}"
        if self.pending_runs:
            text += f" · {self.pending_runs} run(s) to sync (y)"
        return text

    def _show_sub_title(self) -> None:
        self.sub_title = self._sub_title_text()

    def watch_pending_runs(self, _count: int) -> None:
        self._show_sub_title()

    @work(thread=True, group="spool-count", exclusive=True, exit_on_error=False)
    def count_pending(self) -> None:
        from sparkctl.services.tracking import pending_count

        try:
            n = pending_count(self.spool)
        except OSError:
            return
        self.call_from_thread(setattr, self, "pending_runs", n)

    def action_sync(self) -> None:
        if not (self._has_spool() and self._has_store()):
            self.notify("no spool or store to sync", severity="warning")
            return
        self.notify("syncing the spooled runs to MLflow…", timeout=4)
        self.sync_runs()

    @work(thread=True, group="sync", exclusive=True, exit_on_error=False)
    def sync_runs(self) -> None:
        """`sparkctl sync` from the TUI: every spooled run into MLflow, then a recount."""
        from sparkctl.core.redact import redact_text
        from sparkctl.services.tracking import sync_spooled

        try:
            synced, failed = sync_spooled(self.spool, self.store)
        except Exception as exc:
            self.call_from_thread(self.notify, f"sync failed: {redact_text(str(exc))}", severity="error", timeout=10)
            return
        if failed:
            message = f"{synced} run(s) written to MLflow; {len(failed)} not: {redact_text(failed[0][1])}"
            self.call_from_thread(self.notify, message, severity="error", timeout=10)
        else:
            self.call_from_thread(self.notify, f"{synced} run(s) written to MLflow ({self.store.display_uri})",
                                  timeout=6)
        self.count_pending()

    def action_pull_suites(self) -> None:
        self.notify("checking the quality suites' source for a newer file (sha256 compared)…", timeout=4)
        self.pull_suites()

    @work(thread=True, group="suites", exclusive=True, exit_on_error=False)
    def pull_suites(self) -> None:
        """`sparkctl suites pull` from the TUI: the source checked, a new file kept where evals read."""
        from sparkctl.services.evals import pull_all

        _dest, _how, reports = pull_all(self.config)
        said = [f"{r.name}: {r.pulled.describe() if r.pulled else r.error}" for r in reports]
        failed = any(r.pulled is None for r in reports)
        self.call_from_thread(self.notify, "; ".join(said), severity="error" if failed else "information",
                              timeout=15)

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A toast that is also kept (N lists them): nothing said only for a few seconds. Never
        markup: sparkctl's messages quote config keys such as `[bench] timeout_s`."""
        self.remember(message, severity)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def remember(self, message: str, severity: str = "information") -> None:
        """Keep a message for N without a toast: what a screen already shows whole (its notes
        panel) needs no toast over it."""
        self.messages.append((self.clock().astimezone().strftime("%H:%M:%S"), str(severity), str(message)))

    def action_messages(self) -> None:
        from sparkctl.tui.widgets.notes import Note, NotesScreen

        level = {"error": "error", "warning": "warning"}
        notes = [Note(text, level.get(sev, "info"), at) for at, sev, text in reversed(self.messages)]
        if not isinstance(self.screen, NotesScreen):
            self.push_screen(NotesScreen("Messages (newest first)", notes))

    def action_show_config(self) -> None:
        from sparkctl.tui.screens.config_view import ConfigScreen

        if not isinstance(self.screen, ConfigScreen):
            self.push_screen(ConfigScreen(self.config))

    def action_help(self) -> None:
        from sparkctl.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def recheck_drift(self) -> None:
        """After a bench, an eval or a lane change: the dashboard's warnings ("no valid bench
        yet", "engine X since last bench: re-bench") are computed again, so one that the run
        just answered goes away. Safe to call from any thread."""
        status = self._engine_status
        if status is None or not status.reachable or not status.version:
            return
        if threading.get_ident() == self._thread_id:
            self.check_drift(status.kind, status.version)
        else:
            self.call_from_thread(self.check_drift, status.kind, status.version)

    @work(thread=True, group="drift", exclusive=True, exit_on_error=False)
    def check_drift(self, kind: str, version: str) -> None:
        """Which lane models were last benched on another engine version (the dashboard
        says so; the Runs screen's B re-benches them). Never imports MLflow here."""
        if not self.config.lanes or not self._has_store():
            return
        from sparkctl.services.benched import notes_from_file

        lanes = self.config.lanes
        # what this machine's sparkctl last benched (a small file) answers first; only the
        # lanes it has nothing on are searched for in the store
        notes, rest = notes_from_file(self.store, lanes, kind, version)
        if rest:
            from sparkctl.services.runs.drift import engine_change_notes

            try:
                notes += engine_change_notes(self.store, rest, kind, version)
            except Exception:  # no store yet, a server away: the note is a nicety, not a failure
                return
        # in the lanes' order; an entry with no lane (why the store was slow) stays last
        order = {lane: i for i, lane in enumerate(lanes)}
        notes.sort(key=lambda n: order.get(n[0], len(order)))
        self.call_from_thread(setattr, self, "stale_lanes", tuple(notes))

    def _rebuild(self) -> None:
        if self._host is None:
            return
        engine = self._engine_status or EngineStatus(
            self.config.engine.kind, self.config.engine.host, False, error="connecting…"
        )
        self.report = build_report(self.config, engine, self._host, self.clock(),
                                   residency_warnings=self._residency_warnings)

    # ---- helpers screens use -------------------------------------------------------------

    def engine_down_for(self) -> float | None:
        if self._engine_down_since is None:
            return None
        return time.monotonic() - self._engine_down_since

    def action_refresh_now(self) -> None:
        for wake in self._wake.values():
            wake.set()
        timer = self._sample_timers.pop("engines", None)
        if timer is not None:
            timer.stop()
        if self.config.engines:
            self.sample_named_engines()

    async def action_quit(self) -> None:
        """q / ctrl+q: during a bench, an eval or a pull, ask first (quitting stops it)."""
        busy = sorted({w.group for w in self.workers if w.group in BUSY_GROUPS and not w.is_finished})
        if busy:
            from sparkctl.tui.widgets.model_dialogs import ConfirmDialog

            what = " and ".join(BUSY_GROUPS[g] for g in busy)
            question = (f"{what[0].upper()}{what[1:]} is running. Quit anyway? A bench or eval is stopped and "
                        "recorded KILLED, its lane models put back first; a pull can be resumed later.")

            def answered(yes: bool | None) -> None:
                if yes:
                    self.call_later(self.stop_and_quit)

            self.push_screen(ConfirmDialog(question, yes_label="Stop and quit"), answered)
            return
        await self.stop_and_quit()

    def _on_stop_signal(self, sig: int) -> None:
        """SIGHUP (the ssh session dropped) or SIGTERM: stop and quit, as the CLI does. A
        second signal (a dropped session sends two) changes nothing: the wrap-up goes on."""
        import signal

        if self._stop_signal is not None:
            return
        self._stop_signal = sig
        from sparkctl.services.tracking import hurry_tracking

        hurry_tracking()  # a tracking server that drips its answers must not hold the exit
        if sig == signal.SIGHUP:
            from sparkctl.tui.hangup import silence_terminal

            hung_up = getattr(self._driver, "hung_up", None)
            if callable(hung_up):
                hung_up()
            silence_terminal()
        self.call_later(self.stop_and_quit, True)

    async def stop_and_quit(self, interrupted: bool = False) -> None:
        """Stop what runs (lane models put back, runs recorded KILLED), then exit. After a
        signal (`interrupted`) the CLI exits 130, or 4 when a model could not be put back."""
        self._stop_sampling()
        benches = [w for w in self.workers if w.group in ("bench", "eval") and not w.is_finished]
        if benches:
            # A bench stopped by quitting still puts lane models back and records its runs:
            # leaving now would cancel that wrap-up with the event loop.
            self.notify("stopping the bench: putting lane models back and recording the runs, then quitting",
                        severity="warning", timeout=30)
            for worker in benches:
                worker.cancel()
            for worker in benches:
                try:
                    await worker.wait()
                except Exception:  # WorkerCancelled / WorkerFailed: it has ended, which is all we need
                    pass
        self.workers.cancel_all()
        if interrupted:  # the CLI turns these into its exit code (cli/__init__.py cmd_tui)
            self.interrupted = True
            self.restore_failed = await asyncio.to_thread(_my_restore_failed)
        self.exit()

    async def on_unmount(self) -> None:
        self._stop_sampling()
        if self._undo_signals is not None:
            self._undo_signals()
        for engine in (self.engine, *self.named_engines.values()):
            close = getattr(engine, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing a dead connection must not turn quit into a crash
                    pass


def _my_restore_failed() -> bool:
    """Whether a bench of this process left models it could not put back (its residency
    journal stays, marked failed: tracking/residency_journal.py)."""
    from sparkctl.services.tracking import restore_failed_in

    return restore_failed_in(os.getpid())


def _sparkctl_commands():
    from sparkctl.tui.commands import SparkctlCommands

    return SparkctlCommands


def _models_screen():
    from sparkctl.tui.screens.models import ModelsScreen

    return ModelsScreen()


def _bench_screen():
    from sparkctl.tui.screens.bench import BenchScreen

    return BenchScreen()


def _runs_screen():
    from sparkctl.tui.screens.runs import RunsScreen

    return RunsScreen()


def _eval_screen():
    from sparkctl.tui.screens.eval import EvalScreen

    return EvalScreen()


def _fleet_screen():
    from sparkctl.tui.screens.fleet import FleetScreen

    return FleetScreen()


def make_app(
    config: Config,
    engine: Any = None,
    probes: Any = None,
    clock: Callable[[], datetime] | None = None,
    user_theme_dir: Path | None = None,
    recorder: Callable[[Any], Any] | None = None,
    named_engines: dict[str, Any] | None = None,
    spool: Any = None,
    store: Any = None,
    first: Any = None,
) -> SparkApp:
    """Build the app; tests pass doubles, the CLI passes nothing and gets the real parts
    (and `first`, its StatusPrefetch, with the engine and probes it built)."""
    if engine is None or probes is None:
        from sparkctl.services.factory import make_engine, make_probes

        engine = engine or make_engine(config)
        probes = probes or make_probes()
    if user_theme_dir is None:
        from sparkctl.paths import user_theme_dir as default_dir

        user_theme_dir = default_dir()
    tracking = None
    if recorder is None:
        from sparkctl.services.tracking import TrackingLater, recorder_later

        # the spool and store are opened when first used (MLflow itself on the first write)
        tracking = TrackingLater(config)
        recorder = recorder_later(tracking, store)
    if named_engines is None and config.engines:
        from sparkctl.services.factory import make_named_engines

        named_engines = make_named_engines(config)  # plain httpx clients: nothing is contacted yet
    return SparkApp(config, engine, probes, clock=clock, user_theme_dir=user_theme_dir, recorder=recorder,
                    named_engines=named_engines, spool=spool, store=store, first=first, tracking=tracking)
