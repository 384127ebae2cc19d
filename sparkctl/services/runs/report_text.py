"""A comparison and an engine-change regression report as plain-text tables: what
`sparkctl compare` prints under its decision and `sparkctl regressions` prints, and what the
TUI's head to head and regressions screens show when asked for the whole tables."""

from __future__ import annotations


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _num(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_comparison_detail(cmp) -> str:
    """The runs compared and every difference, with what each run's summary left out."""
    lines = [f"engine: {cmp.engine.get('kind')} {cmp.engine.get('version')}"]
    names = [s.model + (f" ({s.note})" if s.note else "") for s in cmp.sides]
    w = max([len("MODEL")] + [len(n) for n in names])
    spec = any(getattr(s.run, "spec_acceptance_pct", None) is not None for s in cmp.sides)
    head = (f"{'MODEL':<{w}} {'REPS':>4} {'DECODE tok/s':>12} {'CV%':>5}" + (f" {'ACC%':>5}" if spec else "")
            + f" {'TTFT s':>7} {'PREFILL':>8} {'J/tok':>6} {'MEM GiB':>7} {'GSM8K%':>7} {'IFEval%':>8}  RUN")
    lines.append(head)
    for s, name in zip(cmp.sides, names):
        r = s.run
        g, i = s.quality.get("gsm8k"), s.quality.get("ifeval")
        lines.append(f"{name:<{w}} {len(s.values.get('decode_tps', [])):>4} {_num(r.decode_tps_median):>12} "
                     f"{_num(r.decode_tps_cv_pct):>5}" + (f" {_num(r.spec_acceptance_pct):>5}" if spec else "")
                     + f" {_num(r.ttft_s_median, '.2f'):>7} "
                     f"{_num(r.prefill_tps_median, '.0f'):>8} {_num(r.joules_per_token, '.2f'):>6} "
                     f"{_num(r.resident_gib):>7} {_num(g.score * 100 if g else None):>7} {_num(i.score * 100 if i else None):>8}  {r.run_id[:8]}")
    if cmp.differences:
        lines.append("")
        lines.append(f"{'B vs A':<40} {'METRIC':<16} {'DIFF':>8} {'95% CI (Welch)':>20}  VERDICT")
        for d in cmp.differences:
            c = d.ci
            if c.relative:
                diff = _pct(c.diff_pct)
                ci = "-" if c.ci_low_pct is None else f"{_pct(c.ci_low_pct)} .. {_pct(c.ci_high_pct)}"
            else:  # a baseline of (about) zero: the difference in the metric's own unit
                diff = _num(c.diff_abs, "+.3g")
                ci = "-" if c.ci_low_abs is None else f"{c.ci_low_abs:+.3g} .. {c.ci_high_abs:+.3g} abs"
            pair = f"{d.b} vs {d.a} ({c.n_b}/{c.n_a} reps)"
            left_out = "; ".join(f"{x} ({who})" for x, who in ((d.excluded_b, d.b), (d.excluded_a, d.a)) if x)
            lines.append(f"{pair:<40} {d.metric:<16} {diff:>8} {ci:>20}  {d.verdict}"
                         + (f" [{left_out}]" if left_out else ""))
    if cmp.quality:
        lines.append("")
        lines.append(f"{'B vs A':<40} {'SUITE':<16} {'DIFF pp':>8} {'95% CI':>20}  VERDICT")
        for q in cmp.quality:
            c = q.ci
            how = f"paired on {c.n} items, McNemar p={c.p_value:.3f}" if q.paired else f"{c.n_b}/{c.n_a} items"
            pair = f"{q.b} vs {q.a}"
            lines.append(f"{pair:<40} {q.metric:<16} {c.diff_pp:>+8.1f} "
                         f"{f'{c.ci_low_pp:+.1f} .. {c.ci_high_pp:+.1f}':>20}  {q.verdict} ({how})")
            if q.gate is not None:
                lines.append(f"  {q.suite}: {q.gate.explain()}")
    for note in cmp.notes:
        lines.append(f"  ! {note}")
    return "\n".join(lines)


def render_regressions(rows, notes=(), quality=()) -> str:
    lines: list[str] = []
    if rows:
        lines.append(f"{'MODEL':<28} {'BEFORE':>16} {'AFTER':>16} {'CHANGE':>8} {'LIMIT':>6}  VERDICT")
    for row in rows:
        r = row.result
        before = f"{_num(r.median_before)} @{row.before.engine_version}"
        after = f"{_num(r.median_after)} @{row.after.engine_version}"
        verdict = "REGRESSION" if r.flagged else "ok"
        lines.append(f"{row.model:<28} {before:>16} {after:>16} {_pct(r.change_pct):>8} "
                     f"{r.threshold_pct:>5.1f}%  {verdict} ({r.reason})")
        acc = getattr(row, "acceptance", None)
        if acc is not None:
            what = "ACCEPTANCE DROP" if acc.flagged else "ok"
            lines.append(f"  {'speculative acceptance':<26} {_num(acc.median_before):>15}% {_num(acc.median_after):>15}% "
                         f"{_pct(acc.change_pct):>8} {acc.threshold_pct:>5.1f}%  {what} ({acc.reason})")
        changed = getattr(row, "identity_changes", None)
        if changed:
            lines.append(f"  engine changes: {'; '.join(changed)}")
    if not rows and not quality:
        lines.append("no model has usable runs of one workload on two engine versions" + (":" if notes else ""))
    if quality:
        if rows:
            lines.append("")
        lines.append(f"{'MODEL':<28} {'SUITE':<20} {'BEFORE':>14} {'AFTER':>14} {'DIFF pp':>8} {'95% CI':>16}  VERDICT")
        for q in quality:
            c = q.diff.ci
            before = f"{_num(q.before.score * 100 if q.before.score is not None else None)} @{q.before.engine_version}"
            after = f"{_num(q.after.score * 100 if q.after.score is not None else None)} @{q.after.engine_version}"
            lines.append(f"{q.model:<28} {q.diff.metric:<20} {before:>14} {after:>14} {c.diff_pp:>+8.1f} "
                         f"{f'{c.ci_low_pp:+.1f} .. {c.ci_high_pp:+.1f}':>16}  "
                         f"{'QUALITY DROP' if q.flagged else q.diff.verdict}")
            if q.diff.gate is not None and not q.diff.gate.resolved:
                lines.append(f"  {q.diff.gate.explain()}")
            if q.sampling_changes:
                lines.append(f"  sampling changes: {'; '.join(q.sampling_changes)}")
            if q.identity_changes:
                lines.append(f"  engine changes: {'; '.join(q.identity_changes)}")
    lines.extend(f"  ! {n}" for n in notes)
    return "\n".join(lines)
