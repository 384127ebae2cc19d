"""`sparkctl compare` and `sparkctl regressions`: decisions from the recorded runs.

The statistics are sparkctl.core.compare's; picking and pairing the runs is
sparkctl.services.runs.comparison (compare) and .regressions (regressions). This module
reads arguments and prints."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE


def register(sub) -> None:
    c = sub.add_parser("compare", help="head-to-head of models' latest like-for-like benches and evals, with 95%% "
                                       "intervals, verdicts and a recommendation")
    c.add_argument("models", nargs="+", metavar="MODEL",
                   help="two or more models; the incumbent lane model (else the first) is the baseline")
    c.add_argument("--any-engine", action="store_true",
                   help="also compare runs on another engine kind or version (said so in the output)")
    c.add_argument("--community", action="store_true",
                   help="also show imported community figures (sparkctl import) of each model at the same depth, "
                        "and the compared runs beside each model's AIPerf runs by the OpenTelemetry GenAI names, "
                        "apart from the comparison")
    c.add_argument("--any-hardware", action="store_true",
                   help="also compare runs from hosts of another hardware class (GPU, memory, driver)")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object (keys in docs/runs.md)")
    out.add_argument("--table", action="store_true", help="the decision table in Markdown")
    c.set_defaults(handler=cmd_compare)

    r = sub.add_parser("regressions", help="each model's latest bench against its last one on the previous "
                                           "engine version; exit 4 when a drop is flagged")
    r.add_argument("--json", action="store_true", help="a JSON list (keys in docs/runs.md)")
    r.set_defaults(handler=cmd_regressions)


def _store(cfg):
    from sparkctl.cli.history_store import history_store

    return history_store(cfg)


def _tracking_error(exc):
    from sparkctl.core.redact import redact_text

    return CliError(redact_text(str(exc)), EXIT_UNREACHABLE if exc.unreachable else EXIT_ENGINE_ERROR)


def cmd_compare(args, cfg) -> int:
    import json

    from sparkctl.services.runs.comparison import NothingToCompare, compare_models
    from sparkctl.tracking.store import TrackingError

    models = list(dict.fromkeys(m.strip() for m in args.models))
    if len(models) < 2 or any(not m for m in models):
        raise CliError("compare needs at least two different models", EXIT_BAD_INPUT)
    try:
        cmp = compare_models(_store(cfg), models, any_engine=args.any_engine, lanes=cfg.lanes,
                             margins=cfg.promote.quality_margin_pp, any_hardware=args.any_hardware,
                             limits=cfg.promote.limits())
    except NothingToCompare as exc:
        raise CliError(str(exc), EXIT_REFUSED) from None
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    try:
        community = _community(cfg, cmp) if args.community else None
        same_names = _genai(cfg, cmp) if args.community else None
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    if args.json:
        out = cmp.to_dict()
        if community is not None:
            out["community"] = [f.to_dict() for f in community]
        if same_names is not None:
            out["genai"] = [g.to_dict() for g in same_names]
        print(json.dumps(out, indent=2))
    elif args.table:
        from sparkctl.services.runs.decision import decision_table

        print(decision_table(cmp).markdown(), end="")
    else:
        from sparkctl.cli.textreport import render_comparison  # the decision, then the tables the TUI shows too

        print(render_comparison(cmp))
        if community is not None:
            print("\ncommunity figures (imported; another tool, machine and engine: not compared statistically)")
            print("\n".join(f"  {f.text()}" for f in community) or "  none imported for these models at this depth")
        if same_names is not None:
            from sparkctl.services.runs.genai import render

            print("\nby the OpenTelemetry GenAI names (sparkctl's compared runs and each model's AIPerf runs in "
                  "this experiment; another client and workload: not compared statistically)")
            print(render(same_names))
    return EXIT_OK


def _community(cfg, cmp):
    """Imported figures of each compared model at the depth and concurrency of its run's
    workload identity (a plain bench: depth 0, one request at a time)."""
    from sparkctl.services.imports.community import figures

    store = _store(cfg)
    out = []
    for side in cmp.sides:
        ident = side.run.identity
        out.extend(figures(store, side.model, depth=int(ident.depth) if ident.depth.isdigit() else 0,
                           concurrency=int(ident.concurrency) if ident.concurrency.isdigit() else 1))
    return out


def _genai(cfg, cmp):
    """The compared runs and the same models' AIPerf runs, by the GenAI names."""
    from sparkctl.services.runs.genai import side_by_side

    return side_by_side(_store(cfg), [side.run for side in cmp.sides if side.run is not None])


def cmd_regressions(args, cfg) -> int:
    import json

    from sparkctl.services.runs.regressions import regression_report
    from sparkctl.tracking.store import TrackingError

    try:
        report = regression_report(_store(cfg), margins=cfg.promote.quality_margin_pp)
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    rows = report.rows
    if args.json:
        # speed rows (metric decode_tps), then quality rows (metric the suite's, with "suite")
        print(json.dumps([r.to_dict() for r in rows] + [q.to_dict() for q in report.quality], indent=2))
        for note in report.notes:  # the list stays what it was; what was passed over goes to stderr
            print(f"sparkctl: note: {note}", file=sys.stderr)
    else:
        from sparkctl.services.runs.report_text import render_regressions

        print(render_regressions(rows, report.notes, report.quality))
    sys.stdout.flush()
    return EXIT_REFUSED if any(r.flagged for r in [*rows, *report.quality]) else EXIT_OK
