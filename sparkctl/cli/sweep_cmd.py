"""`sparkctl bench` as a workload sweep: --profile, --depth, --concurrency, --slo, and the
exports (--json cells, --csv, --markdown). Without any of those flags `bench` is the single
fixed-prompt bench, unchanged (cli/bench_cmd.py)."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import (CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_NOT_SAVED, EXIT_OK,
                                    EXIT_REFUSED)
from sparkctl.cli.running import emit, not_saved, recover, run_tracked

SWEEP_FLAGS = ("profile", "depth", "concurrency", "slo", "csv", "markdown")


def add_sweep_args(b) -> None:
    g = b.add_argument_group("workload sweep (any of these runs model x profile x depth x concurrency, "
                             "one MLflow run per cell)")
    g.add_argument("--profile", metavar="NAMES",
                   help="prose|json|code|tool-call|all or [bench.profiles.NAME], comma-separated (default prose); "
                        "or arena-v2 / arena-v1: Spark Arena's published grid (depths, pp, tg, concurrency, runs, "
                        "prefix caching and, for v2, its fixed cell order)")
    g.add_argument("--depth", metavar="TOKENS",
                   help="context depth(s) before the measured prompt, e.g. 0,4k,16k,32k (default 0)")
    g.add_argument("--concurrency", metavar="K",
                   help="requests at once, e.g. 1,2,4,8 (default 1); each of --reps rounds sends K at once")
    g.add_argument("--slo", metavar="TARGETS",
                   help="latency targets for goodput, e.g. ttft=2s,itl=100ms[,e2e=30s][,pct=90]")
    g.add_argument("--csv", action="store_true", help="print the cells as CSV (the --json cell keys)")
    g.add_argument("--markdown", action="store_true",
                   help="print llama.cpp's Spark-table form: pp/tg per depth, median ± std")


def sweep_requested(args) -> bool:
    return bool(getattr(args, "sweep", False)) or any(getattr(args, f, None) not in (None, False) for f in SWEEP_FLAGS)


def _arena(args):
    """The Spark Arena profile --profile names, or None; refuses what would change its grid."""
    from sparkctl.core.arena import by_name

    names = [n.strip() for n in (args.profile or "").split(",") if n.strip()]
    found = [by_name(n) for n in names]
    if not any(found):
        return None
    if len(names) > 1:
        raise CliError(f"--profile {found[0].name if found[0] else names[0]} is a whole grid: name it alone",
                       EXIT_BAD_INPUT)
    p = found[0]
    fixed = [f for f, v in (("--depth", args.depth), ("--concurrency", args.concurrency), ("--reps", args.reps),
                            ("--num-predict", args.num_predict), ("--prompt", args.prompt)) if v is not None]
    if args.cache == "cold" and p.prefix_caching:
        fixed.append("--cache cold")
    if fixed:
        raise CliError(f"--profile {p.name} fixes depth, concurrency, pp, tg, runs and prefix caching "
                       f"({p.pinned}); drop {', '.join(fixed)}", EXIT_BAD_INPUT)
    return p


def _plan_args(args, cfg):
    from sparkctl.core.latency import parse_slo
    from sparkctl.core.limits import MAX_CONCURRENCY
    from sparkctl.core.sweep import parse_int_list
    from sparkctl.services.bench.profiles import DEFAULT_PROFILE, resolve

    grid = _arena(args)
    try:
        if grid is not None:
            from sparkctl.services.bench.profiles import arena

            profiles, depths, conc = [arena(grid)], list(grid.depths), list(grid.concurrency)
        else:
            profiles = resolve(args.profile or DEFAULT_PROFILE, cfg.bench, args.num_predict, args.prompt)
            depths = parse_int_list(args.depth or "0", "--depth", 0)
            conc = parse_int_list(args.concurrency or "1", "--concurrency", 1)
        slo = parse_slo(args.slo) if args.slo else None
    except ValueError as exc:
        msg = str(exc)
        raise CliError(msg if msg.startswith("--") else f"--slo: {msg}", EXIT_BAD_INPUT) from None
    if max(conc) > MAX_CONCURRENCY:
        raise CliError(f"--concurrency: {max(conc)} is above {MAX_CONCURRENCY}", EXIT_BAD_INPUT)
    if args.until_resolved:
        raise CliError("--until-resolved compares two single benches; it does not combine with a sweep", EXIT_BAD_INPUT)
    if sum(bool(x) for x in (args.json, args.csv, args.markdown)) > 1:
        raise CliError("choose one of --json, --csv, --markdown", EXIT_BAD_INPUT)
    return profiles, depths, conc, slo, grid


def cmd_sweep(args, cfg, engine, settings, progress, models: list) -> int:
    import asyncio
    import json
    from dataclasses import replace

    from sparkctl.core import sweep as core_sweep
    from sparkctl.services.bench.sweep import SweepRunner
    from sparkctl.services.factory import make_probes, make_recorder, make_spool_and_store

    try:
        profiles, depths, conc, slo, grid = _plan_args(args, cfg)
    except CliError:
        asyncio.run(engine.close())
        raise
    schedule = None
    if grid is not None:
        from sparkctl.core.arena import DEFAULT_RUNS

        # the published grid's runs and prefix caching; its cells in its own order (v2's schedule)
        settings = replace(settings, reps=grid.runs or DEFAULT_RUNS, cache="warm")
        schedule = list(grid.schedule) if grid.schedule is not None else None
        emit(f"sparkctl: {grid.pinned}: {len(grid.cells)} cells x {settings.reps} runs, pp {grid.pp}, tg {grid.tg}, "
             f"prefix caching {'on' if grid.prefix_caching else 'off'}"
             + (f", cells in its published order ({grid.strategy})" if schedule else ", cells in grid order"),
             sys.stderr)
    spool, _store = make_spool_and_store(cfg)
    for text in recover(spool):
        emit(f"sparkctl: {text}", sys.stderr)
    box: list = []

    async def work():
        try:
            runner = SweepRunner(cfg, engine, make_probes(), settings, profiles, depths, conc, slo,
                                 sink=progress, recorder=make_recorder(cfg), journal=getattr(spool, "journal", None),
                                 schedule=schedule,
                                 grid=grid.name if grid is not None else "")
            box.append(runner)
            return await runner.run(models)
        finally:
            await engine.close()

    def lanes_bad() -> bool:
        return bool(box and box[0].result.lane_restore is not None and box[0].result.lane_restore.failed)

    result, stopped = run_tracked(work, progress, what="bench", lanes_bad=lanes_bad,
                                  stopped="the cells were recorded (the one in flight as KILLED)")
    if stopped is not None:
        return stopped
    results = result.results
    if getattr(args, "mlflow_export", None):
        from sparkctl.cli.mlflow_export import write_export

        write_export(args.mlflow_export, cfg, [(c.run.run_id, c.cell.model, c.cell.key) for c in result.cells],
                     result.parent_run_id)
    if args.json:
        emit(json.dumps({"cells": [core_sweep.export_row(r, slo is not None) for r in results]}, indent=2), sys.stdout)
    elif args.csv:
        emit(core_sweep.to_csv(results, slo is not None).rstrip("\n"), sys.stdout)
    elif args.markdown:
        md = core_sweep.markdown_table(results, backend=getattr(engine, "kind", ""))
        if core_sweep.falloff(results):
            md += "\n\n" + core_sweep.falloff_table(results, result.identity, result.gpu)
        emit(md, sys.stdout)
    else:
        emit(render_sweep(result), sys.stdout)
    if lanes_bad():
        return EXIT_REFUSED
    if not_saved([c.run for c in result.cells]):
        return EXIT_NOT_SAVED
    return EXIT_ENGINE_ERROR if any(c.run.status == "FAILED" for c in result.cells) else EXIT_OK


def render_sweep(result) -> str:
    from sparkctl.core.latency import highest_meeting
    from sparkctl.core.sweep import falloff, falloff_table, matrix_text

    results = result.results
    lines = [matrix_text(results, result.slo), ""]
    hdr = (f"{'MODEL':<24} {'PROFILE':<9} {'DEPTH':>6} {'C':>2} {'REQ':>4} {'DEC/req':>8} {'AGG':>8} "
           f"{'TTFT p50':>8} {'p90':>7} {'p99':>7} {'n':>4} {'ITL p50':>8} {'p99':>7} {'ROOF%':>6}"
           + (f" {'GOOD%':>6}" if result.slo else "") + f" {'DNF':>4}")
    lines.append(hdr)
    for r in results:
        s = r.stats
        lines.append(
            f"{r.cell.model:<24} {r.cell.profile:<9} {r.cell.depth:>6} {r.cell.concurrency:>2} {s.requests:>4} "
            f"{_f(s.decode_tps_per_request_median):>8} {_f(s.throughput_tps):>8} {_f(s.ttft_s_p50, '.3f'):>8} "
            f"{_f(s.ttft_s_p90, '.3f'):>7} {_f(s.ttft_s_p99, '.3f'):>7} {s.ttft_n:>4} {_f(s.itl_ms_p50, '.1f'):>8} "
            f"{_f(s.itl_ms_p99, '.1f'):>7} {_f(r.roofline_pct, '.0f'):>6}"
            + (f" {_f(s.goodput_pct, '.0f'):>6}" if result.slo else "") + f" {s.dnf:>4}")
    lines.append("  TTFT percentiles from n requests with a measured TTFT: p90 needs 10, p99 100 ('-' below);"
                 " goodput leaves out requests it could not judge (no cold TTFT), counted apart")
    if falloff(results):
        lines += ["", falloff_table(results, result.identity, result.gpu), ""]
    if result.slo is not None:
        by: dict[tuple[str, str, int], dict[int, float | None]] = {}
        for r in results:
            by.setdefault((r.cell.model, r.cell.profile, r.cell.depth), {})[r.cell.concurrency] = r.stats.goodput_pct
        for (m, p, d), g in by.items():
            best = highest_meeting(g, result.slo.share_pct)
            what = (f"serves {best} concurrent request(s)" if best else "meets the targets at no concurrency tried")
            lines.append(f"  {m} {p} depth {d}: {what} at {result.slo.text()} "
                         f"(>= {result.slo.share_pct:g}% of requests within every target)")
    if result.num_parallel:
        lines.append(f"  engine parallelism: {result.num_parallel}")
    if result.parent_run_id:
        lines.append(f"  sweep run {result.parent_run_id} in MLflow: its cells are its child runs")
    for c in result.cells:
        for msg in c.run.invalid + c.run.flags:
            lines.append(f"  ! {c.cell.model} {c.cell.key}: {msg}")
        if c.run.sync_message and c is result.cells[-1]:
            lines.append(f"  {c.run.sync_message} (sweep {result.sweep_id}: tags.sweep.id in MLflow)")
    return "\n".join(lines)


def _f(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)
