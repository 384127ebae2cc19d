"""Plain-text rendering of the status report for `sparkctl status`."""

from __future__ import annotations

from sparkctl.core.budget import MemoryBudget
from sparkctl.core.fmt import gib, na
from sparkctl.core.snapshots import GpuMemory, MemInfo, Pressure, Unavailable
from sparkctl.services.status import StatusReport, redact_engine_status, redact_named_status


def render_status(r: StatusReport) -> str:
    lines: list[str] = []
    e = redact_engine_status(r.engine)  # no credential of [engine] host / [engines.*] url is printed
    if e.reachable and e.error is not None:
        # it answered, with an error (a runner that died, a 500): up but failing
        version = f" {e.version}" if e.version else ""
        lines.append(f"engine   {e.kind}{version} at {e.host}: reachable, engine error: {e.error}")
    elif e.reachable:
        lines.append(f"engine   {e.kind} {e.version} at {e.host}: reachable")
    else:
        lines.append(f"engine   {e.kind} at {e.host}: UNREACHABLE ({e.error})")

    b = r.budget
    if isinstance(b, MemoryBudget):
        pool = {"unified": "unified memory", "vram": "GPU VRAM", "host": "host RAM (no GPU)"}[b.pool.value]
        lines.append(
            f"budget   {pool}: {gib(b.total)} total, {gib(b.available)} available, "
            f"reserve {gib(b.reserve)}, headroom {gib(b.headroom)} [{b.level.value}]"
        )
        for s in b.segments:
            lane = f" ({s.lane})" if s.kind == "model" else ""
            lines.append(f"  {s.label + lane:<40} {gib(s.bytes):>10}")
        for note in b.notes:
            lines.append(f"  note: {note}")
    else:
        lines.append(f"budget   {b}")

    if r.rows:
        lines.append("resident")
        lines.append(f"  {'NAME':<28} {'LANE':<11} {'SIZE':>10}  {'PROCESSOR':<16} {'CONTEXT':>8}  UNTIL")
        for row in r.rows:
            m = row.model
            ctx = str(m.context_length) if m.context_length else "n/a"
            lines.append(
                f"  {m.name:<28} {row.lane or '-':<11} {gib(m.size):>10}  {row.placement:<16} {ctx:>8}  {row.until}"
            )
    elif e.reachable and e.error is None:
        lines.append("resident (no models loaded)")
    elif e.reachable:
        lines.append("resident (unknown: the engine answered with an error)")
    if r.attribution is not None and r.attribution.mismatch:
        lines.append(f"  WARNING: {r.attribution.mismatch}")
    for lane, model in r.lanes_not_resident:
        lines.append(f"  WARNING: lane {lane}: {model} is not resident (its next request loads it cold)")
    for text in r.lanes_spilled:
        lines.append(f"  WARNING: {text}")
    for text in r.residency_warnings:
        lines.append(f"  WARNING: {text}")

    for ne in map(redact_named_status, r.engines):
        if ne.reachable and ne.error is not None:
            lines.append(f"bench    {ne.name}: {ne.kind} at {ne.url}: reachable, engine error: {ne.error}")
        elif ne.reachable:
            served = ""
            if ne.model:
                served = f", model {ne.model}" + ("" if ne.model_served is not False else " NOT served")
            lines.append(f"bench    {ne.name}: {ne.kind} {ne.version or ''} at {ne.url}: reachable{served}")
        else:
            lines.append(f"bench    {ne.name}: {ne.kind} at {ne.url}: UNREACHABLE ({ne.error})")

    if r.host.gpu.unavailable is not None:
        lines.append(f"gpu      {r.host.gpu.unavailable}")
    for g in r.host.gpu.gpus:
        thr = g.throttle_reasons
        thr_s = na(thr) if isinstance(thr, Unavailable) else (", ".join(thr) or "none")
        mem = "unified (from /proc/meminfo)" if g.unified_memory else (
            f"{gib(g.memory.used)} / {gib(g.memory.total)}" if isinstance(g.memory, GpuMemory) else na(g.memory)
        )
        lines.append(
            f"gpu {g.index}    {na(g.name)}: util {na(g.utilization_pct, '{:.0f}', '%')}, "
            f"temp {na(g.temperature_c, '{:.0f}', ' C')}, power {na(g.power_w, '{:.1f}', ' W')}, "
            f"SM {na(g.sm_clock_mhz, '{:.0f}', ' MHz')}, throttle {thr_s}, memory {mem}"
        )

    m = r.host.meminfo
    if isinstance(m, MemInfo):
        lines.append(
            f"host     {r.host.hostname}: {gib(m.total)} RAM, {gib(m.available)} available, "
            f"{gib(m.reclaimable)} reclaimable cache, swap free {gib(m.swap_free)}"
        )
    p = r.host.pressure
    if isinstance(p, Pressure):
        lines.append(f"pressure memory some {p.some_avg10:.2f}% full {p.full_avg10:.2f}% (avg10)")
    else:
        lines.append(f"pressure {p}")
    return "\n".join(lines)


# ---- decisions (sparkctl compare / regressions, and the Runs screen's head to head) ------------


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _num(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_comparison(cmp) -> str:
    """The decision first (six figures, verdicts, one recommendation per contender), then
    the runs and every difference in detail."""
    from sparkctl.services.runs.decision import decision_table

    return decision_table(cmp).text() + "\n\n" + render_comparison_detail(cmp)


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


# ---- the effective configuration (sparkctl config, and the TUI's Config view) --------------------


def render_config(cfg) -> str:
    """The effective config as TOML, each value followed by the file that set it; where
    the config came from and sparkctl's own layered file first. Credentials show as ***."""
    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    out: list[str] = []
    out.append(f"# source: {cfg.source}")
    if cfg.source == "built-in defaults":
        from sparkctl import paths

        out.append(f"# no config file: `sparkctl config --init` writes the documented default to {paths.user_config_file()}")
    if cfg.state_file:
        from pathlib import Path

        what = "layered over it" if Path(cfg.state_file).is_file() else "layered over it once written"
        out.append(f"# {what}: {cfg.state_file} (sparkctl's own file: promotions, rollbacks, the theme)")
    for note in cfg.notes:
        out.append(f"# note: {note}")
    return "\n".join(out) + "\n" + render_with_sources(redact_config_dict(to_toml_dict(cfg)), cfg.sources)


def render_with_sources(data: dict, sources: dict[str, str]) -> str:
    """TOML of the effective config, each key followed by `# <file>` when a file set it
    (keys without a comment are built-in defaults)."""
    import tomli_w

    lines: list[str] = []

    def table(header: str, values: dict, prefix: str) -> None:
        lines.append(f"[{header}]")
        for key, value in values.items():
            if isinstance(value, dict):
                continue
            text = tomli_w.dumps({key: value}).rstrip("\n")
            src = sources.get(f"{prefix}{key}")
            lines.append(f"{text}  # {src}" if src and "\n" not in text else text)
        lines.append("")
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{header}.{_key(key)}", value, f"{prefix}{key}.")

    for name, values in data.items():
        table(_key(name), values, f"{name}.")
    return "\n".join(lines)


def _key(name: str) -> str:
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace('"', '\\"') + '"'
