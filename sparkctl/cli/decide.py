"""`sparkctl compare` and `sparkctl regressions`: decisions from the recorded runs.

The statistics are sparkctl.core.compare's; picking runs is sparkctl.services.runs.decide.
This module reads arguments and prints."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE


def register(sub) -> None:
    c = sub.add_parser("compare", help="head-to-head of models' latest valid benches, with 95%% intervals")
    c.add_argument("models", nargs="+", metavar="MODEL", help="two or more models; the first is the baseline")
    c.add_argument("--any-engine", action="store_true",
                   help="also compare runs on another engine kind or version (said so in the output)")
    c.add_argument("--json", action="store_true", help="one JSON object (keys in README)")
    c.set_defaults(handler=cmd_compare)

    r = sub.add_parser("regressions", help="each model's latest bench against its last one on the previous "
                                           "engine version; exit 4 when a drop is flagged")
    r.add_argument("--json", action="store_true", help="a JSON list (keys in README)")
    r.set_defaults(handler=cmd_regressions)


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _num(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_comparison(cmp) -> str:
    lines = [f"engine: {cmp.engine.get('kind')} {cmp.engine.get('version')}"]
    names = [s.model + (f" ({s.note})" if s.note else "") for s in cmp.sides]
    w = max([len("MODEL")] + [len(n) for n in names])
    head = (f"{'MODEL':<{w}} {'REPS':>4} {'DECODE tok/s':>12} {'CV%':>5} {'TTFT s':>7} {'PREFILL':>8} {'J/tok':>6} "
            f"{'GSM8K%':>7} {'IFEval%':>8}  RUN")
    lines.append(head)
    for s, name in zip(cmp.sides, names):
        r = s.run
        g, i = s.quality.get("gsm8k"), s.quality.get("ifeval")
        lines.append(f"{name:<{w}} {len(s.values.get('decode_tps', [])):>4} {_num(r.decode_tps_median):>12} "
                     f"{_num(r.decode_tps_cv_pct):>5} {_num(r.ttft_s_median, '.2f'):>7} "
                     f"{_num(r.prefill_tps_median, '.0f'):>8} {_num(r.joules_per_token, '.2f'):>6} "
                     f"{_num(g.score * 100 if g else None):>7} {_num(i.score * 100 if i else None):>8}  {r.run_id[:8]}")
    if cmp.differences:
        lines.append("")
        lines.append(f"{'B vs A':<40} {'METRIC':<12} {'DIFF':>8} {'95% CI (Welch)':>20}  VERDICT")
        for d in cmp.differences:
            ci = "-" if d.ci.ci_low_pct is None else f"{_pct(d.ci.ci_low_pct)} .. {_pct(d.ci.ci_high_pct)}"
            pair = f"{d.b} vs {d.a} ({d.ci.n_b}/{d.ci.n_a} reps)"
            lines.append(f"{pair:<40} {d.metric:<12} {_pct(d.ci.diff_pct):>8} {ci:>20}  {d.verdict}")
    if cmp.quality:
        lines.append("")
        lines.append(f"{'B vs A':<40} {'SUITE':<12} {'DIFF pp':>8} {'95% CI':>20}  VERDICT")
        for q in cmp.quality:
            c = q.ci
            how = f"paired on {c.n} items, McNemar p={c.p_value:.3f}" if q.paired else f"{c.n_b}/{c.n_a} items"
            pair = f"{q.b} vs {q.a}"
            lines.append(f"{pair:<40} {q.metric:<12} {c.diff_pp:>+8.1f} "
                         f"{f'{c.ci_low_pp:+.1f} .. {c.ci_high_pp:+.1f}':>20}  {q.verdict} ({how})")
    for note in cmp.notes:
        lines.append(f"  ! {note}")
    return "\n".join(lines)


def render_regressions(rows) -> str:
    if not rows:
        return "no model has runs on two engine versions with the same settings"
    lines = [f"{'MODEL':<28} {'BEFORE':>16} {'AFTER':>16} {'CHANGE':>8} {'LIMIT':>6}  VERDICT"]
    for row in rows:
        r = row.result
        before = f"{_num(r.median_before)} @{row.before.engine_version}"
        after = f"{_num(r.median_after)} @{row.after.engine_version}"
        verdict = "REGRESSION" if r.flagged else "ok"
        lines.append(f"{row.model:<28} {before:>16} {after:>16} {_pct(r.change_pct):>8} "
                     f"{r.threshold_pct:>5.1f}%  {verdict} ({r.reason})")
    return "\n".join(lines)


def _store(cfg):
    from sparkctl.services.factory import make_spool_and_store

    return make_spool_and_store(cfg)[1]


def _tracking_error(exc):
    from sparkctl.core.redact import redact_text

    return CliError(redact_text(str(exc)), EXIT_UNREACHABLE if exc.unreachable else EXIT_ENGINE_ERROR)


def cmd_compare(args, cfg) -> int:
    import json

    from sparkctl.services.runs.decide import NothingToCompare, compare_models
    from sparkctl.tracking.store import TrackingError

    models = list(dict.fromkeys(m.strip() for m in args.models))
    if len(models) < 2 or any(not m for m in models):
        raise CliError("compare needs at least two different models", EXIT_BAD_INPUT)
    try:
        cmp = compare_models(_store(cfg), models, any_engine=args.any_engine, lanes=cfg.lanes)
    except NothingToCompare as exc:
        raise CliError(str(exc), EXIT_REFUSED) from None
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    if args.json:
        print(json.dumps(cmp.to_dict(), indent=2))
    else:
        print(render_comparison(cmp))
    return EXIT_OK


def cmd_regressions(args, cfg) -> int:
    import json

    from sparkctl.services.runs.decide import find_regressions
    from sparkctl.tracking.store import TrackingError

    try:
        rows = find_regressions(_store(cfg))
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        print(render_regressions(rows))
    sys.stdout.flush()
    return EXIT_REFUSED if any(r.result.flagged for r in rows) else EXIT_OK
