"""Promote from the Runs screen: a dialog that checks the preconditions of putting a run's
model on a lane and shows their evidence, then answers with the plan (and whether to
force it). The switch itself runs in the Runs screen's worker through the same service as
`sparkctl promote` (services/lanes)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, Select, Static


class PromoteDialog(ModalScreen["tuple[object, bool] | None"]):
    """Answers (PromotionPlan, force) or None (cancelled)."""

    DEFAULT_CSS = """
    PromoteDialog { align: center middle; }
    PromoteDialog > Vertical {
        width: 110; height: auto; max-height: 90%; padding: 1 2;
        border: round $warning; background: $panel;
    }
    PromoteDialog #promote-title { text-style: bold; margin-bottom: 1; }
    PromoteDialog #promote-evidence { height: auto; margin: 1 0; }
    PromoteDialog Horizontal { height: auto; align-horizontal: right; }
    PromoteDialog Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("e", "rerun", "Re-run an eval at the matching context", show=False)]

    def __init__(self, model: str, lanes: list[str], lane: str, store) -> None:
        super().__init__()
        self.model, self.lanes, self.lane, self.store = model, lanes, lane, store
        self.plan = None
        self.reruns: list = []  # services.runs.rerun.EvalRerun: evals that would make a refused pair compare

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Promote {self.model} to a lane", id="promote-title")
            yield Select([(lane, lane) for lane in self.lanes], value=self.lane, allow_blank=False, id="promote-lane")
            yield Checkbox("swap: unload the lane's current model once the new one is verified", id="promote-swap")
            yield Static("checking the preconditions…", id="promote-evidence")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Re-run eval (e)", id="rerun", disabled=True)
                yield Button("Force", id="force", variant="error", disabled=True)
                yield Button("Promote", id="promote", variant="warning", disabled=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()
        self.check()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.lane = str(event.value)
        self.check()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self.check()

    @work(group="promote-plan", exclusive=True, exit_on_error=False)
    async def check(self) -> None:
        from sparkctl.engines.base import EngineError
        from sparkctl.services.lanes import LaneError, plan_promotion

        self.plan = None
        self.reruns = []
        self.query_one("#promote", Button).disabled = True
        self.query_one("#force", Button).disabled = True
        self.query_one("#rerun", Button).disabled = True
        evidence = self.query_one("#promote-evidence", Static)
        evidence.update("checking the preconditions…")
        app = self.app
        try:
            plan = await plan_promotion(app.config, app.engine, app.probes, self.store, self.lane, self.model,
                                        swap=self.query_one("#promote-swap", Checkbox).value)
        except (LaneError, EngineError, ValueError) as exc:
            evidence.update(f"cannot promote: {getattr(exc, 'message', None) or exc}")
            return
        self.plan = plan
        lines = plan.lines()
        if any(c.name == "quality" for c in plan.unmet):
            # a quality pair refused for a setting the contender's eval can repeat: offer it
            import asyncio

            from sparkctl.services.runs.rerun import promotion_reruns

            try:
                self.reruns = await asyncio.to_thread(promotion_reruns, self.store, plan.incumbent, plan.model,
                                                      plan.engine_kind, plan.engine_version,
                                                      app.config.promote.quality_margin_pp)
            except Exception:  # the store away: the plan says so already
                self.reruns = []
            for r in self.reruns:
                lines.append(f"  e: {r.label()} ({r.differs})")
        evidence.update("\n".join(lines))
        self.query_one("#promote", Button).disabled = bool(plan.unmet)
        self.query_one("#force", Button).disabled = not plan.unmet
        self.query_one("#rerun", Button).disabled = not self.reruns

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "rerun":
            self.action_rerun()
        elif event.button.id == "cancel" or self.plan is None:
            self.dismiss(None)
        else:
            self.dismiss((self.plan, event.button.id == "force"))

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_rerun(self) -> None:
        """e: evaluate the contender again at the incumbent's context and sample, on the Eval
        screen (nothing is promoted); P again once it has run."""
        if not self.reruns:
            return
        from sparkctl.tui.screens.run_charts import start_eval_rerun

        rerun = self.reruns[0]
        self.dismiss(None)
        self.app.call_later(start_eval_rerun, self.app, rerun)


async def apply_switch(app, plan, force: bool) -> tuple[str, bool]:
    """Run a promotion or rollback plan through the same service as the CLI, then show the
    new lane in the app's config. Returns (what to tell the user, whether it failed)."""
    from dataclasses import replace

    from sparkctl.engines.base import EngineError
    from sparkctl.services.bench import BenchBusy
    from sparkctl.services.bench.lock import LockUnavailable
    from sparkctl.services.lanes import execute

    what = "promotion" if plan.action == "promote" else plan.action
    try:
        # never waits: a bench or another lane change running now is named, and the user retries
        out = await execute(app.config, app.engine, app.probes, plan, force=force, recorder=app.recorder)
    except EngineError as exc:
        return f"{what} failed: {exc.message}; lane {plan.lane} unchanged", True
    except (BenchBusy, LockUnavailable) as exc:
        return f"{what} refused: {exc}; lane {plan.lane} unchanged", True
    if out.changed:
        import asyncio
        from pathlib import Path

        from sparkctl.statefile import read_state

        cfg = app.config
        # where the lane comes from now, as the next `sparkctl lanes` will read it: a rollback
        # to the user's own value leaves nothing in sparkctl's own state file
        owned = await asyncio.to_thread(read_state, Path(out.state_file)) if out.state_file else None
        source = out.state_file if owned is not None and plan.lane in owned.lanes else cfg.source
        app.config = replace(cfg, lanes={**cfg.lanes, plan.lane: plan.model},
                             sources={**cfg.sources, f"lanes.{plan.lane}": source})
        recheck = getattr(app, "recheck_drift", None)
        if callable(recheck):
            recheck()  # the lane's new model may never have been benched here: the dashboard says so
    lines = [line for line in out.lines() if not line.startswith("  -  ")]
    failed = bool(out.error) or (out.hook is not None and not out.hook.ok)
    return "\n".join(lines[-8:]), failed
