"""Promotion and rollback: check the evidence, switch the lane's model, verify what loaded,
write the lane change to sparkctl's own state file, run the on_change hook, record it all
in MLflow as a run of kind ``promotion``.

A switch holds the engine's bench lock (services/bench/lock.py) from before it reads the
lane until it is recorded: a bench running meanwhile would measure the switch's loads and,
at its end, put back the model the switch demoted; two switches of one lane would each put
back what the other changed. Under the lock the lane is read again from sparkctl's own
state file, so a switch that waited for another one finds the lane it left.

The switch never leaves a lane worse than it found it: the contender is loaded beside the
incumbent (with the lane's context and keep-alive) and verified from /api/ps and NVML;
only then is the lane changed, and only with ``swap`` is the incumbent unloaded (and
checked gone). When the contender does not fit beside the incumbent, ``swap`` unloads the
incumbent first; if the load then fails or spills, the contender is unloaded and the
incumbent loaded back as it was. A failed switch changes nothing in the state file.

Used by the CLI (``sparkctl promote|rollback``) and the TUI's Runs screen alike. MLflow
reads and writes block: they go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sparkctl.config import Config, user_file_value
from sparkctl.core import promotion as rules
from sparkctl.core.keepalive import parse_keep_alive
from sparkctl.core.residency import is_forever
from sparkctl.core.names import same_model, validate_model_name
from sparkctl.core.snapshots import ResidentModel
from sparkctl.core.workload import WorkloadIdentity
from sparkctl.core.names import model_key
from sparkctl.engines.base import EngineError, EngineUnreachable
from sparkctl.services.bench.lock import BenchLock
from sparkctl.services.bench.residency_guard import ResidencyGuard
from sparkctl.services.bench.wrapup import finish_shielded
from sparkctl.services.lanes.evidence import evidence_checks
from sparkctl.services.lanes.history import NothingToRollBack, rollback_target
from sparkctl.services.lanes.hook import HookResult, hook_env, run_hook
from sparkctl.services.models import (
    FitReport,
    LoadFailed,
    LoadReport,
    fit_check,
    refusal_reason,
    side_load,
    unload_model,
)
from sparkctl.statefile import (HistoryEntry, OwnedState, StateConflict, StateError, read_state, set_owned,
                                update_state)
from sparkctl.tracking.record import RunRecord, new_record_id

KIND_PROMOTION = "promotion"
# verify_load problems that do not make a switch fail: the model is resident and on the
# GPU, only sparkctl's estimate was optimistic (shown as a warning)
_SOFT_PROBLEMS = ("ESTIMATE LOW",)


class LaneError(Exception):
    """A promotion or rollback that cannot start: `bad_input` (unknown lane, same model)
    or refused (nothing to roll back)."""

    def __init__(self, message: str, *, bad_input: bool = True) -> None:
        super().__init__(message)
        self.bad_input = bad_input


@dataclass(frozen=True)
class LaneSettings:
    """What the lane's model is loaded with: the incumbent's context and keep-alive."""

    keep_alive: str  # as parse_keep_alive reads it: "-1", "30m", ...
    num_ctx: int | None  # None: the engine decides
    why: str

    def label(self) -> str:
        ka = parse_keep_alive(self.keep_alive).label
        return f"keep_alive {ka}, num_ctx {self.num_ctx or 'engine default'} ({self.why})"


@dataclass(frozen=True)
class PromotionPlan:
    action: str  # "promote" | "rollback"
    lane: str
    model: str
    incumbent: str  # "" when the lane had no model
    engine_kind: str
    engine_version: str
    engine_host: str
    checks: tuple[rules.Precondition, ...]
    fit: FitReport | None
    swap: bool
    swap_first: bool
    settings: LaneSettings
    resident_before: tuple[ResidentModel, ...]
    digests: dict[str, str] = field(default_factory=dict)  # model -> manifest digest
    undoes: int = 0  # rollback: seq of the promotion undone
    quality_from_version: str = ""  # evals on this older engine version were accepted (--quality-from-version)
    unloads: tuple[str, ...] = ()  # "MODEL (why)" for each model the switch unloads (said before it runs)

    @property
    def unmet(self) -> list[rules.Precondition]:
        return rules.unmet(self.checks)

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for c in self.checks if c.state == rules.MET for r in c.runs))

    def lines(self) -> list[str]:
        now = f"now {self.incumbent}" if self.incumbent else "no model yet"
        out = [f"{self.action} {self.model} to lane {self.lane} ({now}) on {self.engine_kind} {self.engine_version}"]
        for c in self.checks:
            out.append(f"  {c.name:<8} {c.state:<6} {c.summary}")
            out.extend(f"           {d}" for d in c.details)
        out.append(f"  loads    with {self.settings.label()}")
        for line in self.unloads:
            out.append(f"  unloads  {line}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "lane": self.lane, "model": self.model, "incumbent": self.incumbent or None,
                "engine": {"kind": self.engine_kind, "version": self.engine_version},
                "preconditions": [c.to_dict() for c in self.checks], "unmet": [c.name for c in self.unmet],
                "swap": self.swap, "swap_first": self.swap_first, "unloads": list(self.unloads),
                "keep_alive": self.settings.keep_alive, "num_ctx": self.settings.num_ctx,
                "settings_why": self.settings.why, "digests": dict(self.digests), "evidence": list(self.evidence),
                "quality_from_version": self.quality_from_version or None}


@dataclass
class PromotionOutcome:
    plan: PromotionPlan
    forced: bool
    changed: bool = False  # the lane now serves plan.model (state file written)
    load: LoadReport | None = None
    error: str = ""  # why the switch failed (engine error, failed verification, conflict)
    engine_error: bool = False  # the engine refused or failed the load
    unreachable: bool = False  # ...or stopped answering
    problems: tuple[str, ...] = ()
    restored: list[str] = field(default_factory=list)  # what was put back after a failure
    repaired: list[str] = field(default_factory=list)  # what a dead bench left, put back before the switch
    unloaded: str = ""  # --swap: the incumbent's unload, in words
    state_file: str = ""
    entry: HistoryEntry | None = None
    hook: HookResult | None = None
    record: Any = None  # tracking.sync.SyncResult
    record_id: str = ""

    @property
    def ok(self) -> bool:
        return self.changed and not self.error

    def lines(self) -> list[str]:
        p = self.plan
        out: list[str] = [f"  repaired: {r}" for r in self.repaired]
        if self.forced and p.unmet:
            out.append("  forced past: " + "; ".join(f"{c.name}: {c.summary}" for c in p.unmet))
        if self.load is not None:
            out.extend(self.load.lines())
        if self.error:
            out.append(f"  !! {self.error}")
        out.extend(f"  restored: {r}" for r in self.restored)
        if self.unloaded:
            out.append(f"  -  {self.unloaded}")
        if self.changed:
            out.append(f"lane {p.lane}: {p.incumbent or '(none)'} -> {p.model} (written to sparkctl's own state file, {self.state_file})")
        elif not self.error:
            out.append(f"lane {p.lane} unchanged")
        if self.hook is not None:
            out.append(self.hook.line())
            out.extend(f"  | {line}" for line in self.hook.output.rstrip().splitlines()[-20:])
        if self.record is not None:
            out.append(f"{p.action} {self.record.message}")
        return out

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {**self.plan.to_dict(), "forced": self.forced, "ok": self.ok, "changed": self.changed,
                "error": self.error or None, "problems": list(self.problems), "restored": list(self.restored),
                "repaired": list(self.repaired),
                "unloaded": self.unloaded or None, "state_file": self.state_file or None,
                "load": self.load.to_dict() if self.load else None,
                "hook": self.hook.to_dict() if self.hook else None,
                "record": None if r is None else {"record_id": r.record_id, "synced": r.synced, "run_id": r.run_id,
                                                  "spooled": r.spooled, "error": r.error}}


# ---------------------------------------------------------------------------- planning


def _lane_model(cfg: Config, lane: str) -> str:
    if lane not in cfg.lanes:
        known = ", ".join(sorted(cfg.lanes)) or "none"
        raise LaneError(f"no lane {lane!r} in [lanes] of {cfg.source} ({known}); add it there first")
    return cfg.lanes[lane]


def lane_settings(cfg: Config, incumbent: ResidentModel | None, now: datetime, *,
                  num_ctx: int | None = None, keep_alive: str | None = None) -> LaneSettings:
    """The incumbent's context and keep-alive as /api/ps shows them (the lane's settings),
    else [models] num_ctx / keep_alive; --ctx / --keep-alive override."""
    why = []
    if num_ctx:
        ctx, cwhy = num_ctx, "--ctx"
    elif incumbent is not None and incumbent.context_length:
        ctx, cwhy = incumbent.context_length, "the incumbent's context"
    elif cfg.models.num_ctx:
        ctx, cwhy = cfg.models.num_ctx, "[models] num_ctx"
    else:
        ctx, cwhy = None, ""
    if keep_alive is not None:
        ka, kwhy = keep_alive, "--keep-alive"
    elif incumbent is not None and is_forever(incumbent.expires_at, now):
        ka, kwhy = "-1", "forever like the incumbent"
    else:
        ka, kwhy = str(cfg.models.keep_alive), "[models] keep_alive"
    why = [w for w in (cwhy, kwhy) if w]
    return LaneSettings(ka, ctx, ", ".join(why))


async def _engine_facts(engine) -> tuple[str, tuple[ResidentModel, ...], dict[str, str]]:
    version, resident, local = await asyncio.gather(engine.version(), engine.ps(), engine.tags())
    return version, tuple(resident), {m.name: m.digest for m in local}


def _digest(digests: dict[str, str], name: str) -> str:
    return next((d for n, d in digests.items() if same_model(n, name)), "")


def _find(models, name: str):
    return next((m for m in models if same_model(m.name, name)), None)


async def _fit_check(cfg, engine, probes, model, incumbent, settings, swap):
    fit = await fit_check(cfg, engine, probes, model, settings.num_ctx)
    if settings.num_ctx and fit.estimate.num_ctx < settings.num_ctx:
        # the engine caps a context at the model's trained one: say what it will run at
        settings = replace(settings, num_ctx=fit.estimate.num_ctx,
                           why=f"{settings.why}; capped at {model}'s trained context")
        fit = await fit_check(cfg, engine, probes, model, settings.num_ctx)  # the load sends what it plans for
    v = fit.verdict
    check, swap_first = rules.judge_fit(
        model, incumbent, fit.summary(), refusal_reason(fit),
        v.evicts_lanes if v else (), bool(v and v.fits), swap, same_model)
    return fit, check, swap_first, settings


async def plan_promotion(cfg: Config, engine, probes, store, lane: str, model: str, *, swap: bool = False,
                         num_ctx: int | None = None, keep_alive: str | None = None,
                         now: datetime | None = None, quality_from_version: str = "") -> PromotionPlan:
    """Check every precondition of putting `model` on `lane`; nothing is changed."""
    model = validate_model_name(model)
    incumbent = _lane_model(cfg, lane)
    if same_model(incumbent, model):
        raise LaneError(f"{model} already serves lane {lane}")
    now = now or datetime.now(timezone.utc)
    version, resident, digests = await _engine_facts(engine)
    if _digest(digests, model) == "" and _find(resident, model) is None:
        raise LaneError(f"model '{model}' not found in the engine (sparkctl pull {model})")
    settings = lane_settings(cfg, _find(resident, incumbent), now, num_ctx=num_ctx, keep_alive=keep_alive)
    kind = getattr(engine, "kind", "ollama")
    evidence = asyncio.to_thread(evidence_checks, store, model, incumbent, kind, version,
                                 cfg.promote.quality_margin_pp, quality_from_version, cfg.promote.limits())
    (fit, fit_check_, swap_first, settings), (bench, quality, *limits) = await asyncio.gather(
        _fit_check(cfg, engine, probes, model, incumbent, settings, swap), evidence)
    return PromotionPlan("promote", lane, model, incumbent, kind, version, engine.host,
                         (bench, quality, fit_check_, *limits), fit, swap, swap_first, settings, resident,
                         {model: _digest(digests, model), incumbent: _digest(digests, incumbent)},
                         quality_from_version=quality_from_version,
                         unloads=unload_plan(cfg, "promote", lane, incumbent, swap, swap_first))


async def plan_rollback(cfg: Config, engine, probes, lane: str, *, swap: bool = False,
                        num_ctx: int | None = None, keep_alive: str | None = None,
                        state: OwnedState | None = None, now: datetime | None = None) -> PromotionPlan:
    """Back to the model the lane's last promotion replaced. Its evidence is the promotion
    it undoes (that model served the lane before); only the fit is checked again."""
    current = _lane_model(cfg, lane)
    state = state if state is not None else read_state(Path(cfg.state_file) if cfg.state_file else None)
    try:
        entry = rollback_target(state, lane, current)
    except NothingToRollBack as exc:
        raise LaneError(str(exc), bad_input=False) from None
    now = now or datetime.now(timezone.utc)
    version, resident, digests = await _engine_facts(engine)
    target = entry.previous
    settings = lane_settings(cfg, _find(resident, current), now, num_ctx=num_ctx, keep_alive=keep_alive)
    if not num_ctx and entry.previous_ctx:
        settings = replace(settings, num_ctx=entry.previous_ctx,
                           why=settings.why.replace("the incumbent's context", f"{target}'s context before"))
    kind = getattr(engine, "kind", "ollama")
    fit, fit_check_, swap_first, settings = await _fit_check(cfg, engine, probes, target, current, settings, swap)
    undo = rules.Precondition(
        "undo", rules.MET, f"undoes the promotion of {entry.model} on {entry.at} "
        f"({entry.previous} served the lane before it)", runs=entry.evidence)
    return PromotionPlan("rollback", lane, target, current, kind, version, engine.host, (undo, fit_check_),
                         fit, swap, swap_first, settings, resident,
                         {target: _digest(digests, target), current: _digest(digests, current)}, undoes=entry.seq,
                         unloads=unload_plan(cfg, "rollback", lane, current, swap, swap_first))


# ---------------------------------------------------------------------------- the switch


def _hard_problems(load: LoadReport) -> tuple[str, ...]:
    return tuple(p for p in load.verification.problems if not p.startswith(_SOFT_PROBLEMS))


PUT_BACK_ATTEMPTS = 3  # the engine may be restarting: try again before giving the repair to the next start
PUT_BACK_PAUSE_S = 2.0


def unload_plan(cfg: Config, action: str, lane: str, incumbent: str, swap: bool, swap_first: bool
                ) -> tuple[str, ...]:
    """What a switch will unload, with why, as `_switch` and `_after_change` do it: the
    incumbent with --swap (before loading when both do not fit, else once the new one is
    verified), and after a rollback the model it rolls back from when it serves no other
    lane (kept forever as a lane model, it would otherwise stay resident for nobody)."""
    if not incumbent:
        return ()
    if swap_first:
        return (f"{incumbent} (--swap: before loading, both do not fit; put back if the switch fails)",)
    serves_other = any(same_model(m, incumbent) for ln, m in cfg.lanes.items() if ln != lane)
    if serves_other:
        return ()
    if swap:
        return (f"{incumbent} (--swap, once the new model is verified)",)
    if action == "rollback":
        return (f"{incumbent} (it serves no lane after the rollback)",)
    return ()


def _lanes_during(cfg: Config, plan: PromotionPlan) -> Callable[[str], str | None]:
    """lane_of as it stands while the switch runs: the lane still names the incumbent."""
    lanes = {**cfg.lanes, plan.lane: plan.incumbent} if plan.incumbent else dict(cfg.lanes)
    return lambda name: next((ln for ln, m in lanes.items() if same_model(m, name)), None)


async def _put_back(guard, say: Callable[[str], None] = lambda _t: None) -> list[str]:
    """After a failed switch: unload the contender if this switch loaded it, load back every
    model that was resident before and is gone or changed now (the incumbent --swap
    unloaded first, a model the load evicted) with its context and keep-alive, and verify
    each from /api/ps. An engine that went away is tried again for a few seconds; after
    that the journal stays, and the next sparkctl start (or `lanes --restore`) finishes it."""
    for attempt in range(PUT_BACK_ATTEMPTS):
        out = await guard.end(say)
        unreachable = out.failed and all("cannot read the engine" in f for f in out.failed)
        if not unreachable or attempt == PUT_BACK_ATTEMPTS - 1:
            break
        await asyncio.sleep(PUT_BACK_PAUSE_S)
        guard.journal.state = "running"  # end() marked it failed: try the same journal again
    lines = [f"unloaded {m} again" for m in out.unloaded]
    lines += [f"{r} loaded back, verified from /api/ps" for r in out.restored]
    lines += [f"!! not put back: {f}" for f in out.failed + out.leftover]
    if out.failed or out.leftover:
        lines.append("!! it stays on record: the next sparkctl command, or `sparkctl lanes --restore`, tries again")
    return lines + list(out.notes)


def _who() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in a container: the record says so
        user = "unknown"
    return user, socket.gethostname()


def switch_lock(engine, action: str, lane: str, model: str = "") -> BenchLock:
    """The engine's bench lock, held by a promotion or rollback of `lane` (not yet taken)."""
    what = f"{model} to lane {lane}" if model else f"lane {lane}"
    return BenchLock(engine.host, [what], doing="promoting" if action == "promote" else "rolling back")


async def execute(cfg: Config, engine, probes, plan: PromotionPlan, *, force: bool = False,
                  recorder: Callable[[RunRecord], Any] | None = None, state_path: Path | None = None,
                  run_hooks: bool = True, clock: Callable[[], float] = time.monotonic,
                  lock: BenchLock | None = None, wait: bool = False,
                  say: Callable[[str], None] = lambda _t: None) -> PromotionOutcome:
    """Switch the lane to `plan.model` (refuses unmet preconditions unless `force`).

    `lock`: the engine's lock, taken by the caller before it planned (the CLI). Without one,
    it is taken here (`wait`: wait for a bench or another switch, saying so through `say`;
    else BenchBusy naming the holder), and a plan made before it is checked against what
    the engine holds now."""
    out = PromotionOutcome(plan, forced=force and bool(plan.unmet))
    if plan.unmet and not force:
        raise PromotionRefused(plan)
    state_path = state_path or (Path(cfg.state_file) if cfg.state_file else None)
    own = lock is None
    if lock is None:
        lock = switch_lock(engine, plan.action, plan.lane, plan.model)
        await lock.acquire(wait, say)
    try:
        out.error = await _repair_first(cfg, engine, plan, out)
        if not out.error:
            out.error = await _changed_since_plan(cfg, engine, plan, state_path, residency=own)
        if out.error:
            return out
        return await _execute_locked(cfg, engine, probes, plan, out, recorder, state_path, run_hooks, clock)
    finally:
        if own:
            lock.release()


async def _repair_first(cfg: Config, engine, plan: PromotionPlan, out: PromotionOutcome) -> str:
    """Under the lock, before anything is read or changed: put back what a dead bench left on
    this engine (the TUI only shows it). Otherwise the next command's repair would undo this
    switch: load back the model it retires, unload the one it puts on the lane. A repair that
    changed the resident models makes the plan stale (its fit and the incumbent's context
    were read without them): nothing is switched, and the plan is to be made again."""
    from sparkctl.services.bench.recovery import repair_before

    report = await repair_before(cfg, engine, lambda _t: None, lock_held=True)
    out.repaired = list(report.lines)
    if not report.done:
        return ""
    return (f"what a dead bench changed was put back first; the engine's resident models are not those this "
            f"{plan.action} was planned with, so nothing was loaded or written: check it again")


async def _changed_since_plan(cfg: Config, engine, plan: PromotionPlan, state_path: Path | None,
                              residency: bool) -> str:
    """Why the plan no longer holds, read under the lock ("" when it does): the lane names
    another model now (a switch that ran first), or, for a plan made before the lock was
    taken, the engine holds other models than the plan saw."""
    if state_path is not None:
        try:
            state = await asyncio.to_thread(read_state, state_path)
            current = effective_lane(state, plan.lane, user_file_value(cfg, f"lanes.{plan.lane}"))
        except (StateError, OSError):
            current = plan.incumbent  # unreadable: the write's own check says so later
        if not same_model(current or "", plan.incumbent or ""):
            return (f"lane {plan.lane} changed to {current or '(none)'} while this {plan.action} ran "
                    f"(another sparkctl?); nothing was loaded or written: check the lane again")
    if residency:
        try:
            now = {model_key(m.name) for m in await engine.ps()}
        except EngineError:
            return ""  # the switch itself says what the engine does
        before = {model_key(m.name) for m in plan.resident_before}
        if now != before:
            gone, new = sorted(before - now), sorted(now - before)
            what = "; ".join(p for p in (f"unloaded: {', '.join(gone)}" if gone else "",
                                         f"loaded: {', '.join(new)}" if new else "") if p)
            return (f"the engine's resident models changed since this {plan.action} was planned ({what}); "
                    "nothing was loaded or written: check it again")
    return ""


async def _execute_locked(cfg: Config, engine, probes, plan: PromotionPlan, out: PromotionOutcome,
                          recorder, state_path: Path | None, run_hooks: bool, clock) -> PromotionOutcome:
    out.record_id = new_record_id()
    started_ms = int(time.time() * 1000)
    # What is resident now is journaled before anything changes: if the switch fails, or this
    # process dies, after --swap unloaded the incumbent, the incumbent is put back (verified).
    guard = ResidencyGuard(cfg, engine, [plan.model], kind=plan.action, lane_of=_lanes_during(cfg, plan),
                           lane=plan.lane, disturbs=[plan.incumbent] if plan.swap_first and plan.incumbent else ())
    await guard.begin(lambda _m: plan.settings.num_ctx or 0, lambda text: out.restored.append(f"!! {text}"))
    try:
        await _switch(cfg, engine, probes, plan, out, state_path, clock)
    except BaseException as exc:
        # anything else after the incumbent went (the engine gone, Ctrl-C): put it back first
        if not isinstance(exc, Exception):
            await finish_shielded(_put_back(guard), lambda _t: None, what="the promotion")
        else:
            out.restored = await _put_back(guard)
        raise
    if out.changed:
        await guard.discard()
    else:
        out.restored = await _put_back(guard)
        out.error += f"; lane {plan.lane} keeps {plan.incumbent or 'no model'}"
    if out.changed:
        await _after_change(cfg, engine, plan, out, run_hooks)
    if recorder is not None and (out.changed or out.load is not None):
        record = promotion_record(cfg, out, started_ms, int(time.time() * 1000))
        out.record = await asyncio.to_thread(recorder, record)
    return out


async def _switch(cfg, engine, probes, plan: PromotionPlan, out: PromotionOutcome, state_path, clock) -> None:
    """Load and verify the contender (after unloading the incumbent with --swap when both do
    not fit), then write the lane change. Sets out.error on any failure; an engine that
    stops answering sets it too (the caller puts things back either way)."""
    try:
        if plan.swap_first and plan.incumbent:
            gone = await unload_model(engine, plan.incumbent)
            out.unloaded = f"--swap: {gone.line()} before loading {plan.model}"
        out.load = await side_load(cfg, engine, probes, plan.model, keep_alive=plan.settings.keep_alive,
                                   num_ctx=plan.settings.num_ctx, force=True,
                                   fit=None if plan.swap_first else plan.fit, clock=clock, remember_session=False)
        out.problems = _hard_problems(out.load)
        if out.problems:
            out.error = f"{plan.model} loaded but failed verification: " + "; ".join(out.problems)
    except EngineUnreachable as exc:  # the engine went away mid-switch
        out.error, out.engine_error, out.unreachable = f"engine unreachable: {exc.message}", True, True
    except (LoadFailed, EngineError) as exc:
        out.error, out.engine_error = f"engine error: {exc.message}", True
    if out.error:
        return
    user_value = user_file_value(cfg, f"lanes.{plan.lane}")
    user, host = _who()
    try:
        written = await asyncio.to_thread(update_state, lambda s: _change_lane(s, plan, user_value, user, host,
                                                                               out), state_path)
        out.changed, out.state_file = True, str(written.path)
    except (StateConflict, StateError) as exc:
        out.error = str(exc)
    except OSError as exc:  # a read-only ~/.config, a full disk: the lane is put back below
        where = getattr(exc, "filename", None) or state_path or "sparkctl's own state file"
        out.error = f"cannot write sparkctl's own state file {where}: {exc.strerror or exc}"


async def _after_change(cfg, engine, plan: PromotionPlan, out: PromotionOutcome, run_hooks: bool) -> None:
    """The lane now serves plan.model: unload what no lane needs any more, run the hook."""
    old = plan.incumbent
    # the same rule the plan said before the switch (unload_plan)
    if old and not plan.swap_first and unload_plan(cfg, plan.action, plan.lane, old, plan.swap, False):
        # --swap; and a rollback always: the model it rolls back from serves no lane now and
        # would otherwise stay resident (kept forever as a lane model) for nobody
        why = "--swap" if plan.swap else "rollback: it serves no lane now"
        try:
            gone = await unload_model(engine, old, cfg=cfg)  # its session is over
            out.unloaded = f"{why}: {gone.line()}"
        except EngineError as exc:
            out.unloaded = f"!! {why}: {old} is still resident: {exc.message}"
    if run_hooks and cfg.lanes_on_change:
        env = hook_env(plan.action, plan.lane, plan.model, plan.incumbent, plan.engine_host)
        out.hook = await asyncio.to_thread(run_hook, cfg.lanes_on_change, env)


class PromotionRefused(Exception):
    def __init__(self, plan: PromotionPlan) -> None:
        super().__init__("; ".join(f"{c.name}: {c.summary}" for c in plan.unmet))
        self.plan = plan


def effective_lane(state: OwnedState, lane: str, user_value: str) -> str:
    """What the lane serves given the owned state and the user's own value."""
    if lane in state.lanes and state.base.get(f"lanes.{lane}", "") == user_value:
        return state.lanes[lane]
    return user_value


def _change_lane(state: OwnedState, plan: PromotionPlan, user_value: str, user: str, host: str,
                 out: PromotionOutcome) -> OwnedState:
    current = effective_lane(state, plan.lane, user_value)
    if not same_model(current or "", plan.incumbent or ""):
        raise StateConflict(f"lane {plan.lane} changed to {current or '(none)'} while this {plan.action} ran "
                            f"(another sparkctl?); not written: {plan.model} stays loaded, the lane keeps {current}")
    entry = HistoryEntry(
        seq=state.next_seq, action=plan.action, lane=plan.lane, model=plan.model, previous=plan.incumbent,
        at=datetime.now(timezone.utc).isoformat(timespec="seconds"), user=user, host=host,
        engine=f"{plan.engine_kind} {plan.engine_version}", forced=out.forced,
        overridden=tuple(f"{c.name}: {c.summary}" for c in plan.unmet) if out.forced else (),
        evidence=plan.evidence, record_id=out.record_id, digest=plan.digests.get(plan.model, ""),
        previous_digest=plan.digests.get(plan.incumbent, ""), undoes=plan.undoes,
        previous_ctx=next((m.context_length or 0 for m in plan.resident_before
                           if plan.incumbent and same_model(m.name, plan.incumbent)), 0))
    out.entry = entry
    new = set_owned(state, f"lanes.{plan.lane}", plan.model, user_value)
    return replace(new, history=(*new.history, entry))


# ---------------------------------------------------------------------------- MLflow


def promotion_record(cfg: Config, out: PromotionOutcome, start_ms: int, end_ms: int) -> RunRecord:
    """The MLflow run of a promotion or rollback: kind `promotion`, FINISHED when the lane
    changed, FAILED when the switch did not happen (the attempt is on record too)."""
    p = out.plan
    user, host = _who()
    tags = {
        "sparkctl.kind": KIND_PROMOTION, "model.name": p.model, "engine.kind": p.engine_kind,
        "engine.version": p.engine_version, "host.name": host, "lane.name": p.lane,
        "lane.old_model": p.incumbent, "lane.new_model": p.model,
        "model.digest": p.digests.get(p.model, ""), "lane.old_digest": p.digests.get(p.incumbent, ""),
        "promotion.action": p.action, "promotion.forced": str(out.forced).lower(),
        "promotion.user": user, "promotion.evidence_runs": ",".join(p.evidence),
        "promotion.changed": str(out.changed).lower(),
        **WorkloadIdentity.lane_change(p.action).to_tags(),  # a promotion or a rollback, as what it is
    }
    if out.forced:
        tags["promotion.overridden"] = "; ".join(f"{c.name}: {c.summary}" for c in p.unmet)[:4000]
    if out.error:
        tags["promotion.error"] = out.error[:4000]
    if p.quality_from_version:
        tags["promotion.quality_from_version"] = p.quality_from_version
    if out.hook is not None:
        tags["hook.exit_code"] = "none" if out.hook.exit_code is None else str(out.hook.exit_code)
        tags["hook.ok"] = str(out.hook.ok).lower()
    params = {"lane": p.lane, "old_model": p.incumbent, "new_model": p.model, "swap": p.swap,
              "keep_alive": p.settings.keep_alive, "num_ctx": p.settings.num_ctx or "engine default"}
    metrics: dict[str, float] = {"forced": float(out.forced), "changed": float(out.changed)}
    if out.load is not None:
        metrics["load_s"] = round(out.load.load_s, 3)
        r = out.load.verification.resident
        if r is not None:
            metrics["resident_gib"] = round(r.size / 2**30, 3)
            metrics["gpu_fraction"] = round(r.size_vram / r.size, 4) if r.size else 0.0
    return RunRecord(
        experiment=cfg.tracking.experiment,
        run_name=f"{p.action} {p.lane}: {p.incumbent or '(none)'} -> {p.model}",
        status="FINISHED" if out.changed else "FAILED", start_ms=start_ms, end_ms=end_ms,
        params=params, tags=tags, summary_metrics=metrics,
        artifacts={"promotion.json": json.loads(json.dumps(out.to_dict(), default=str))}, record_id=out.record_id)
