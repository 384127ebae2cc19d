"""The command palette's sparkctl commands: every screen switch and every action, each
with a one-line description, offered according to the state of the app.

State-aware: the screen you are on is not offered as a switch; on the Models screen the
model actions name the selected model (Unload only for a loaded one, Delete not for a lane
model, Force load only where the override could work); Stop bench/eval only while one
runs, Run only while none does. Off their screen, actions switch to it first. `search`
and `discover` read only state already in memory: no I/O (TEXTUAL.md, idiom 9).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

# mode -> what switching to it is for (modes added later still get a line)
SCREENS = {
    "dashboard": ("Dashboard", "memory budget, resident models, engine, GPU and pressure (d)"),
    "models": ("Models", "local models: pull, fit, load, unload, delete (m)"),
    "bench": ("Bench", "benchmark a model live, every run recorded in MLflow (b)"),
    "runs": ("Runs", "past bench and eval runs: filter, compare, chart, promote (h)"),
    "eval": ("Eval", "quality suites (GSM8K, IFEval) on one or more models (e)"),
    "fleet": ("Fleet", "every [hosts.NAME] over ssh: memory, models, engine, GPU, warnings (F)"),
    "config": ("Config", "each config value and the file it came from"),
}


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable[[], Any]


def _running(app, group: str) -> bool:
    return any(w.group == group and not w.is_finished for w in app.workers)


async def _on(app, mode: str | None, action: str | None, screen=None) -> None:
    """Switch to `mode` (when not there already), then run `action` on that screen (or on
    `screen`, the one under the palette, for an action of the screen the user is on)."""
    if mode is not None and getattr(app, "current_mode", None) != mode:
        await app.switch_mode(mode)
    if action is not None:
        await app.run_action(action, screen if mode is None and screen is not None else app.screen)


def _do(app, mode: str | None, action: str | None, screen=None) -> Callable[[], Any]:
    async def go() -> None:
        await _on(app, mode, action, screen)

    return go


def _hint(app, mode: str, text: str) -> Callable[[], Any]:
    async def go() -> None:
        await _on(app, mode, None)
        app.notify(text, timeout=6)

    return go


def _model_commands(app, screen) -> Iterator[Command]:
    from sparkctl.tui.screens.models import ModelsScreen

    yield Command("Pull a model", "download a model from the registry with live progress; "
                  "names of local and lane models complete as you type (p on Models)",
                  _do(app, "models", "pull"))
    if not isinstance(screen, ModelsScreen):
        for verb, key, what in (("Fit check a model", "f", "estimate memory at a chosen context"),
                                ("Load a model", "l", "load beside production with a chosen context "
                                 "and keep-alive, then verify placement"),
                                ("Unload a model", "u", "unload and wait until the engine frees it"),
                                ("Delete a model", "x", "delete from the engine's store (asks first)")):
            yield Command(verb, f"{what}: opens Models, select the model and press {key}",
                          _hint(app, "models", f"select a model, then press {key}"))
        yield Command("Refresh the model list", "ask the engine again for its models (r on Models)",
                      _do(app, "models", "refresh_list"))
        return
    row = screen.selected()
    if row is not None:
        name = row.name
        yield Command(f"Fit check {name}", "estimate its memory at a context you choose and judge it "
                      "against the budget (f)", _do(app, None, "fit", screen))
        yield Command(f"Load {name}", "load it beside what is resident with a chosen context and "
                      "keep-alive, then verify placement and lanes (l)", _do(app, None, "load", screen))
        fit = screen.override_fit
        if fit is not None and fit.model == name:
            from sparkctl.services.models import override_offered

            if override_offered(fit):
                yield Command(f"Force load {name}", "load past the guard's refusal, after a confirmation (L)",
                              _do(app, None, "force_load", screen))
        if row.loaded:
            yield Command(f"Unload {name}", "unload it and wait until the engine frees its memory (u)",
                          _do(app, None, "unload", screen))
        if not app.config.lane_of(name):
            yield Command(f"Delete {name}", "delete it from the engine's store, after a confirmation (x)",
                          _do(app, None, "delete", screen))
    from sparkctl.tui.widgets.pull_view import PullProgressView

    pull = screen.query_one(PullProgressView)
    if pull.running:
        yield Command("Cancel the pull", f"stop pulling {pull.model}; pulling again resumes (c)",
                      _do(app, None, "cancel_pull", screen))
    if screen.check_action("close_panel", ()):
        yield Command("Close the panel", "close the result or the finished pull's panel (escape)",
                      _do(app, None, "close_panel", screen))
    yield Command("Refresh the model list", "ask the engine again for its models (r)",
                  _do(app, None, "refresh_list", screen))


def _bench_commands(app) -> Iterator[Command]:
    if _running(app, "bench"):
        yield Command("Stop the bench", "stop the running bench; its finished repetitions are recorded "
                      "as KILLED (escape on Bench)", _do(app, "bench", "stop"))
    else:
        yield Command("Run bench", "start the bench with the Bench screen's model and settings (ctrl+r)",
                      _do(app, "bench", "start"))
    yield Command("Bench settings", "show or hide warm-up, num_ctx, num_predict, ceiling, cache, think, "
                  "CPU and prompt (ctrl+s on Bench)", _do(app, "bench", "toggle_settings"))
    yield Command("Bench: sweep mode on or off", "a workload sweep (profiles, depths, concurrency, SLO) "
                  "instead of a bench; Run says which (w on Bench)", _do(app, "bench", "toggle_sweep"))


def _eval_commands(app) -> Iterator[Command]:
    if _running(app, "eval"):
        yield Command("Stop the eval", "stop the running eval; its runs are recorded as KILLED (escape on Eval)",
                      _do(app, "eval", "stop"))
    else:
        yield Command("Run eval", "score models on a quality suite (GSM8K, IFEval) with the Eval screen's "
                      "settings (ctrl+r)", _do(app, "eval", "start"))
        yield Command("Score saved responses", "score a JSONL file of {prompt, response} lines against a suite, "
                      "no model (sparkctl eval score; s on Eval)", _do(app, "eval", "score_file"))


def _runs_commands(app) -> Iterator[Command]:
    for name, action, what in (
        ("Runs: reload", "reload", "read the runs again from MLflow (r)"),
        ("Runs: filter", "focus_filter", "filter runs by model, engine, status... (/)"),
        ("Runs: sort", "next_sort", "sort by the next column (s)"),
        ("Runs: group by host", "group_hosts", "one block of rows per host; again to ungroup (g)"),
        ("Runs: compare marked", "compare", "head-to-head of the models marked with space (v)"),
        ("Runs: chart a model", "chart", "decode runs of the selected model across engine versions (c)"),
        ("Runs: promote", "promote", "promote the selected run's model to a lane, after its evidence (P)"),
        ("Runs: re-bench stale lanes", "rebench", "bench lane models again whose last bench ran on "
         "another engine version (B)"),
        ("Runs: regressions", "regressions", "each model's latest bench against the previous engine version (R)"),
    ):
        yield Command(name, what, _do(app, "runs", action))


def _app_commands(app, screen) -> Iterator[Command]:
    yield Command("Refresh now", "sample the host and the engine now instead of at the next tick (r on Dashboard)",
                  _do(app, None, "app.refresh_now"))
    yield Command("Help for this screen", "its keys, what each column means and where the data comes from (?)",
                  _do(app, None, "app.help", screen))
    if hasattr(app, "action_sync"):
        yield Command("Sync spooled runs", "write runs that could not reach MLflow from the local spool",
                      _do(app, None, "app.sync"))
    if hasattr(app, "action_show_config"):
        yield Command("Show the config", "each config value and the file it came from (read-only)",
                      _do(app, None, "app.show_config"))
    if hasattr(app, "action_pull_suites"):
        yield Command("Pull the quality suites", "check GSM8K's and IFEval's source for a file newer than the "
                      "shipped one (sparkctl suites pull)", _do(app, None, "app.pull_suites"))
    yield Command("Lanes", "each lane's model, since when and by what; roll one back (l on Dashboard)",
                  _do(app, "dashboard", "lanes"))
    if hasattr(app, "action_put_back"):
        yield Command("Put back what a dead bench changed", "load back the lane models a killed bench or a "
                      "failed restore left changed, unload what it loaded (P on Dashboard; sparkctl lanes "
                      "--restore)", _do(app, None, "app.put_back"))
    if hasattr(app, "action_messages"):
        yield Command("Messages", "every message this session showed, newest first, whole (N)",
                      _do(app, None, "app.messages"))
    yield Command("Quit", "leave sparkctl (a running bench is stopped and recorded first) (q)",
                  _do(app, None, "app.quit"))


def app_commands(app, screen) -> list[Command]:
    """Every command that makes sense now on `screen` (the one under the palette), in the
    order the palette lists them."""
    current = getattr(app, "current_mode", None)
    out: list[Command] = []
    for mode in getattr(app, "MODES", {}):
        if mode == current:
            continue
        title, what = SCREENS.get(mode, (mode.capitalize(), f"the {mode} screen"))
        out.append(Command(f"Go to {title}", what, _do(app, mode, None)))
    out += list(_model_commands(app, screen))
    out += list(_bench_commands(app))
    out += list(_eval_commands(app))
    out += list(_runs_commands(app))
    out += list(_app_commands(app, screen))
    return out


class SparkctlCommands(Provider):
    """sparkctl's actions in the command palette (ctrl+p)."""

    def _commands(self) -> list[Command]:
        try:
            return app_commands(self.app, self.screen)
        except Exception:  # the palette must open whatever state a screen is in
            self.app.log.error("sparkctl commands could not be listed")
            return []

    async def discover(self) -> Hits:
        for c in self._commands():
            yield DiscoveryHit(c.name, c.run, help=c.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for c in self._commands():
            score = matcher.match(c.name)
            if score > 0:
                yield Hit(score, matcher.highlight(c.name), c.run, text=c.name, help=c.help)
            elif query.lower() in c.help.lower():  # "memory", "keep-alive": words of the description
                yield Hit(0.1, c.name, c.run, text=c.name, help=c.help)
