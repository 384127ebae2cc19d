"""`sparkctl promote|lanes|rollback`: put a contender into a lane with its evidence, list
the lanes, go back to a lane's previous model.

Exit codes: 0 done; 2 bad input (unknown lane, a model that already serves it, a bad
name); 3 engine unreachable; 4 refused (an unmet precondition without --force, nothing to
roll back, a switch that failed verification or lost a race: the lane is unchanged);
5 engine error (the load failed; the lane is unchanged); 6 the lane changed but the
[lanes] on_change hook failed; 7 the lane changed, but its MLflow record was NOT saved
(neither the spool nor MLflow took it). Heavy imports live in the handlers.
"""

from __future__ import annotations

import sys
from typing import Any

from sparkctl.cli.argtypes import duration, positive_int
from sparkctl.cli.exitcodes import (
    EXIT_BAD_INPUT,
    EXIT_ENGINE_ERROR,
    EXIT_HOOK_FAILED,
    EXIT_NOT_SAVED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    CliError,
)




def _switch_args(p) -> None:
    p.add_argument("--swap", action="store_true",
                   help="unload the lane's current model once the new one is verified (first, when both do not fit)")
    p.add_argument("--ctx", type=positive_int, metavar="N", help="num_ctx (default: the current lane model's context)")
    p.add_argument("--keep-alive", type=duration, metavar="D",
                   help="keep-alive (default: forever when the current lane model is kept forever, else [models] keep_alive)")
    p.add_argument("--force", action="store_true", help="go ahead past unmet preconditions (the override is recorded)")
    p.add_argument("--no-wait", action="store_true",
                   help="if a bench or another lane change is running on the engine, refuse (exit 4) instead of waiting")
    p.add_argument("--json", action="store_true", help="one JSON object")


def register(sub) -> None:
    p = sub.add_parser("promote", help="make MODEL the model of a lane, after checking the evidence; verify, record")
    p.add_argument("model", help="the contender, e.g. qwen3:30b-a3b")
    p.add_argument("--lane", required=True, help="the lane to serve, e.g. production")
    p.add_argument("--dry-run", action="store_true", help="show the preconditions and their evidence; change nothing")
    p.add_argument("--quality-from-version", metavar="V",
                   help="also accept eval runs made on engine version V (default: only the version serving now); "
                        "recorded on the promotion")
    _switch_args(p)
    p.set_defaults(handler=cmd_promote)

    p = sub.add_parser("lanes", help="each lane: its model, since when, the evidence, resident or not")
    p.add_argument("--json", action="store_true", help="a JSON list")
    p.add_argument("--restore", action="store_true",
                   help="put back the models a bench changed and could not put back itself (it died, or its "
                        "restore failed): contexts and keep-alive as the bench found them; verified")
    p.set_defaults(handler=cmd_lanes)

    p = sub.add_parser("rollback", help="put a lane back on the model its last promotion replaced; verify, record")
    p.add_argument("lane")
    _switch_args(p)
    p.set_defaults(handler=cmd_rollback)


def _json(obj: Any) -> None:
    import json

    print(json.dumps(obj, indent=2, default=str))


def _err(line: str) -> None:
    print(f"sparkctl: {line}", file=sys.stderr)


def _run(cfg, go) -> Any:
    import asyncio

    from sparkctl.services.factory import make_engine

    async def main():
        engine = make_engine(cfg)
        try:
            return await go(engine)
        finally:
            await engine.close()

    return asyncio.run(main())


def _switch(args, cfg, plan_fn, action: str, lane: str, model: str = "") -> int:
    from sparkctl.core.names import InvalidModelName
    from sparkctl.services.bench import BenchBusy
    from sparkctl.services.bench.lock import LockUnavailable
    from sparkctl.services.factory import make_probes, make_spool_and_store
    from sparkctl.services.lanes import LaneError, PromotionRefused, execute, switch_lock
    from sparkctl.tracking.sync import record_run

    spool, store = make_spool_and_store(cfg)
    probes = make_probes()
    dry = getattr(args, "dry_run", False)

    async def go(engine):
        # the engine's lock before the plan reads the lane and what is resident: a bench or
        # another switch running now would change both (a dry run changes nothing: no lock)
        lock = None
        if not dry:
            lock = switch_lock(engine, action, lane, model)
            await lock.acquire(not args.no_wait, _err)
        try:
            plan = await plan_fn(engine, probes, store)
            if dry or (plan.unmet and not args.force):
                return plan, None
            return plan, await execute(cfg, engine, probes, plan, force=args.force, lock=lock,
                                       recorder=lambda rec: record_run(rec, spool, store))
        finally:
            if lock is not None:
                lock.release()

    try:
        plan, outcome = _run(cfg, go)
    except BenchBusy as exc:
        raise CliError(f"refused: {exc} (without --no-wait the {action} waits for it)", EXIT_REFUSED) from None
    except LockUnavailable as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    except LaneError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT if exc.bad_input else EXIT_REFUSED) from None
    except InvalidModelName as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    except PromotionRefused as exc:  # a plan's preconditions checked again in execute
        plan, outcome = exc.plan, None
    if outcome is None:
        if args.json:
            _json({**plan.to_dict(), "ok": False, "changed": False, "dry_run": dry})
        else:
            print("\n".join(plan.lines()))
        if dry:
            return EXIT_OK if not plan.unmet else EXIT_REFUSED
        _err(f"refused: {plan.action} {plan.model} to lane {plan.lane}: "
             + "; ".join(f"{c.name}: {c.summary}" for c in plan.unmet) + " (--force to go ahead anyway)")
        return EXIT_REFUSED
    if args.json:
        _json(outcome.to_dict())
    else:
        print("\n".join(plan.lines()))
        print("\n".join(outcome.lines()))
    if outcome.error:
        _err(outcome.error)
        if outcome.unreachable:
            return EXIT_UNREACHABLE
        return EXIT_ENGINE_ERROR if outcome.engine_error else EXIT_REFUSED
    if outcome.hook is not None and not outcome.hook.ok:
        _err(f"lane {plan.lane} now serves {plan.model}, but the on_change hook failed: {outcome.hook.line()}")
        return EXIT_HOOK_FAILED
    if outcome.record is not None and outcome.record.lost:
        _err(f"{plan.action} of lane {plan.lane}: {outcome.record.message}")
        return EXIT_NOT_SAVED
    return EXIT_OK


def cmd_promote(args, cfg) -> int:
    from sparkctl.core.names import InvalidModelName, validate_model_name
    from sparkctl.services.lanes import plan_promotion

    try:
        model = validate_model_name(args.model)
    except InvalidModelName as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    return _switch(args, cfg, lambda engine, probes, store: plan_promotion(
        cfg, engine, probes, store, args.lane, model, swap=args.swap, num_ctx=args.ctx, keep_alive=args.keep_alive,
        quality_from_version=(args.quality_from_version or "").strip()), "promote", args.lane, model)


def cmd_rollback(args, cfg) -> int:
    from sparkctl.services.lanes import plan_rollback

    return _switch(args, cfg, lambda engine, probes, store: plan_rollback(
        cfg, engine, probes, args.lane, swap=args.swap, num_ctx=args.ctx, keep_alive=args.keep_alive),
        "rollback", args.lane)


def _restore(cfg) -> tuple[list[str], bool]:
    """`lanes --restore`: every journal a dead bench left, or whose restore failed."""
    import asyncio

    from sparkctl.services.bench.recovery import recover_residency

    report = asyncio.run(recover_residency(cfg, retry_failed=True))
    lines = report.lines or ["nothing to put back: no bench left models changed"]
    return lines, not report.warnings


def cmd_lanes(args, cfg) -> int:
    from sparkctl.engines.base import EngineError
    from sparkctl.services.lanes import lane_rows

    restored: list[str] | None = None
    restore_ok = True
    if getattr(args, "restore", False):
        restored, restore_ok = _restore(cfg)
        if not args.json:
            print("\n".join(restored))

    async def go(engine):
        try:
            return await engine.ps()
        except EngineError:  # unreachable included: residency shows as unknown
            return None

    resident = _run(cfg, go)
    rows = lane_rows(cfg, resident)
    if args.json:
        if restored is not None:
            _json({"restore": {"ok": restore_ok, "lines": restored}, "lanes": [r.to_dict() for r in rows]})
        else:
            _json([r.to_dict() for r in rows])
        return EXIT_OK if restore_ok else EXIT_REFUSED
    if not rows:
        print(f"no lanes: add them to [lanes] in {cfg.source}")
        return EXIT_OK
    head = ("LANE", "MODEL", "RESIDENT", "SINCE", "EVIDENCE", "SET BY")
    cells = []
    for r in rows:
        since = r.since.replace("T", " ").replace("+00:00", " UTC") if r.since else "-"
        cells.append((r.lane, r.model, r.residency, since, ",".join(e[:8] for e in r.evidence) or "-", r.set_by))
    widths = [max(len(str(c[i])) for c in (head, *cells)) for i in range(len(head))]
    for row in (head, *cells):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    missing = [r.lane for r in rows if r.engine_known and r.resident is None]
    if missing:
        print(f"not resident: {', '.join(missing)} (the router's first request will load it cold)")
    for r in rows:
        if r.warning:
            print(f"WARNING: {r.warning}")
    if resident is None:
        _err("engine unreachable: residency unknown")
        return EXIT_UNREACHABLE
    return EXIT_OK if restore_ok else EXIT_REFUSED
