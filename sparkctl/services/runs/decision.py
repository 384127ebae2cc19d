"""One decision on one screen: the incumbent against each contender, six figures each with
its interval and verdict, and one recommendation line (promote / keep / not resolved, with
the reasons and what to run next).

Built from a Comparison (services.runs.decide), so it reads exactly the runs and
repetitions compare chose; rendered as text (the CLI, the TUI's head to head), Markdown
(`sparkctl compare --table`) and JSON (`--json`, under "decision").

The recommendation reads speed and quality as the gate does: a contender is recommended
only when its decode speed is not worse beyond the noise, every suite the incumbent was
evaluated on is shown to be not worse by more than its margin, and something is better. A
clear loss (decode worse, or a suite whose difference is at or beyond the margin) says
keep. Anything the evidence cannot settle yet says "not resolved" and names the run that
would settle it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core import compare

PROMOTE = "promote"
KEEP = "keep"
NOT_RESOLVED = "not resolved"

SUITE_TITLE = {"gsm8k": "GSM8K strict %", "ifeval": "IFEval prompt strict %"}
MEMORY_SAME_PCT = 1.0  # one reading each: a smaller difference is not called


@dataclass(frozen=True)
class DecisionRow:
    metric: str
    baseline: str  # the incumbent's value, with its n
    contender: str
    difference: str  # "+12.3% [+10.1, +14.5]", "-7.0 pp [-15.4, +1.3]"
    verdict: str
    note: str = ""  # what was left out, how it was measured

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class Decision:
    baseline: str
    contender: str
    rows: list[DecisionRow]
    action: str
    reasons: list[str]
    next_steps: list[str] = field(default_factory=list)

    @property
    def recommendation(self) -> str:
        head = {PROMOTE: f"promote {self.contender}", KEEP: f"keep {self.baseline}",
                NOT_RESOLVED: "not resolved"}[self.action]
        why = "; ".join(self.reasons)
        nxt = f"; next: {'; '.join(self.next_steps)}" if self.next_steps else ""
        return f"recommendation: {head}" + (f" ({why})" if why else "") + nxt

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "contender": self.contender, "rows": [r.to_dict() for r in self.rows],
                "action": self.action, "reasons": self.reasons, "next": self.next_steps,
                "recommendation": self.recommendation}


@dataclass
class DecisionTable:
    engine: str
    workload: str
    decisions: list[Decision]
    notes: list[str] = field(default_factory=list)
    incumbent: bool = False  # the baseline serves a lane (it is the incumbent, not just the first named)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "workload": self.workload, "decisions": [d.to_dict() for d in self.decisions]}

    def _who(self, d: Decision) -> str:
        return f"{d.baseline} (incumbent)" if self.incumbent else d.baseline

    def text(self) -> str:
        out = [f"decision on {self.engine} ({self.workload})"]
        for d in self.decisions:
            heads = ["METRIC", self._who(d), d.contender, "DIFFERENCE [95% CI]", "VERDICT"]
            cells = [[r.metric, r.baseline, r.contender, r.difference, r.verdict + (f" ({r.note})" if r.note else "")]
                     for r in d.rows]
            widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads[:4])]
            out.append("")
            out.append("  ".join([heads[0].ljust(widths[0]), *(heads[i].rjust(widths[i]) for i in (1, 2, 3)),
                                  heads[4]]))
            for c in cells:
                out.append("  ".join([c[0].ljust(widths[0]), *(c[i].rjust(widths[i]) for i in (1, 2, 3)), c[4]]))
            out.append(d.recommendation)
        return "\n".join(out)

    def markdown(self) -> str:
        out = [f"Decision on {_md(self.engine)}; workload: {_md(self.workload)}.", ""]
        for d in self.decisions:
            out.append(f"| metric | {_md(self._who(d))} | {_md(d.contender)} | difference [95% CI] | verdict |")
            out.append("| --- | ---: | ---: | ---: | --- |")
            for r in d.rows:
                verdict = r.verdict + (f" ({r.note})" if r.note else "")
                out.append(f"| {r.metric} | {_md(r.baseline)} | {_md(r.contender)} | {_md(r.difference)} | {_md(verdict)} |")
            out.append("")
            out.append(f"**{_md(d.recommendation[0].upper() + d.recommendation[1:])}**")
            out.append("")
        for note in self.notes:
            out.append(f"- {_md(note)}")
        return "\n".join(out).rstrip() + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _num(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def _speed_row(title: str, a: list[float], b: list[float], diff, higher_is_better: bool, spec: str,
               excluded_a: str, excluded_b: str) -> DecisionRow:
    note = "; ".join(x for x in (f"{excluded_a} ({diff.a})" if excluded_a else "",
                                  f"{excluded_b} ({diff.b})" if excluded_b else "") if x)
    va = f"{_num(_median(a), spec)} (n={len(a)})"
    vb = f"{_num(_median(b), spec)} (n={len(b)})"
    ci = diff.ci
    if ci.relative:
        d = "-" if ci.diff_pct is None else f"{ci.diff_pct:+.1f}%"
        if ci.ci_low_pct is not None:
            d += f" [{ci.ci_low_pct:+.1f}, {ci.ci_high_pct:+.1f}]"
    else:
        d = "-" if ci.diff_abs is None else f"{ci.diff_abs:+{spec}}"
        if ci.ci_low_abs is not None:
            d += f" [{ci.ci_low_abs:+{spec}}, {ci.ci_high_abs:+{spec}}] (absolute: baseline ~0)"
    return DecisionRow(title, va, vb, d, diff.verdict, note)


def decision_table(cmp) -> DecisionTable:
    """The decision for each contender against the baseline of a Comparison."""
    base = cmp.sides[0]
    run = base.run
    table = DecisionTable(f"{cmp.engine.get('kind')} {cmp.engine.get('version')}",
                          run.identity.describe() if run is not None else "-", [], list(cmp.notes),
                          incumbent=bool(base.lane))
    for other in cmp.sides[1:]:
        table.decisions.append(_decide(cmp, base, other))
    return table


def _decide(cmp, base, other) -> Decision:
    rows: list[DecisionRow] = []
    keep: list[str] = []
    missing: list[str] = []
    steps: list[str] = []
    better: list[str] = []
    diffs = {d.metric: d for d in cmp.differences if d.b == other.model}
    pair = f"{base.model} {other.model}"

    for metric, title, higher, spec in (("decode_tps", "decode tok/s", True, ".1f"), ("ttft_s", "TTFT s", False, ".3f")):
        d = diffs.get(metric)
        if d is None:
            rows.append(DecisionRow(title, "-", "-", "-", "not measured"))
            if metric == "decode_tps":
                missing.append("no decode figures to compare")
            continue
        rows.append(_speed_row(title, base.values.get(metric, []), other.values.get(metric, []), d, higher, spec,
                               d.excluded_a, d.excluded_b))
        if d.verdict == compare.WORSE and metric == "decode_tps":
            keep.append(f"decode {rows[-1].difference}")
        elif d.verdict == compare.NOT_ENOUGH and metric == "decode_tps":
            missing.append("decode: not enough repetitions")
            steps.append(f"sparkctl bench {pair} --until-resolved")
        elif d.verdict == compare.BETTER:
            better.append(title.split()[0] if metric == "decode_tps" else "TTFT")

    evidence = {e.suite: e for e in cmp.evidence if e.contender == other.model}
    for suite in ("gsm8k", "ifeval"):
        title = SUITE_TITLE[suite]
        ev = evidence.get(suite)
        if ev is None:
            rows.append(DecisionRow(title, "-", "-", "-", "not measured (the incumbent has no eval)"))
            missing.append(f"{suite}: no eval of the incumbent")
            steps.append(f"sparkctl eval {pair} --suite {suite} --for-promotion")
            continue
        if ev.diff is None:
            a = ev.incumbent_run
            rows.append(DecisionRow(title, _score(a), _score(ev.contender_run), "-", "not compared"))
            missing.append(ev.problem)
            if ev.command:
                steps.append(ev.command)
            continue
        q, g = ev.diff, ev.diff.gate
        c = q.ci
        n = f"{c.n} paired" if q.paired else f"{c.n_a}/{c.n_b}"
        diff_text = f"{c.diff_pp:+.1f} pp [{c.ci_low_pp:+.1f}, {c.ci_high_pp:+.1f}]"
        if g is not None and g.shown:
            verdict = "better" if q.verdict == compare.BETTER else f"not worse (margin {g.margin_pp:g} pp)"
            if q.verdict == compare.BETTER:
                better.append(suite)
        elif g is not None and g.needed is None:
            verdict = f"worse than the {g.margin_pp:g} pp margin allows"
            keep.append(f"{suite} {diff_text} is beyond the {g.margin_pp:g} pp margin")
        elif q.verdict == compare.WORSE:
            verdict = "worse"
            keep.append(f"{suite} {diff_text}")
        else:
            verdict = f"not shown (margin {g.margin_pp:g} pp)" if g else q.verdict
            if g is not None:
                missing.append(g.explain())
                steps.append(ev.command or f"sparkctl eval {pair} --suite {suite} --for-promotion")
        rows.append(DecisionRow(title, _score(ev.incumbent_run), _score(ev.contender_run), diff_text, verdict,
                                f"{n} items"))

    rows.append(_memory_row(base, other, better))
    jd = diffs.get("joules_per_token")
    if jd is not None:
        rows.append(_speed_row("J/token", base.values.get("joules_per_token", []),
                               other.values.get("joules_per_token", []), jd, False, ".2f", "", ""))
        if jd.verdict == compare.BETTER:
            better.append("J/token")
    else:
        rows.append(DecisionRow("J/token", _num(base.run.joules_per_token if base.run else None, ".2f"),
                                _num(other.run.joules_per_token if other.run else None, ".2f"), "-",
                                "not measured" if not (base.run and base.run.joules_per_token) else "no interval"))

    if keep:
        return Decision(base.model, other.model, rows, KEEP, keep)
    if missing:
        return Decision(base.model, other.model, rows, NOT_RESOLVED, missing, list(dict.fromkeys(steps)))
    if better:
        return Decision(base.model, other.model, rows, PROMOTE,
                        [f"better: {', '.join(dict.fromkeys(better))}; nothing worse beyond the noise or margins"])
    return Decision(base.model, other.model, rows, KEEP,
                    ["no advantage shown: every figure is within the noise"])


def _score(row) -> str:
    if row is None or row.score is None:
        return "-"
    return f"{row.score * 100:.1f} ({row.eval_items or '?'})"


def _memory_row(base, other, better: list[str]) -> DecisionRow:
    a = base.run.resident_gib if base.run else None
    b = other.run.resident_gib if other.run else None
    if a is None or b is None or a <= 0:
        return DecisionRow("resident GiB", _num(a, ".2f"), _num(b, ".2f"), "-", "not measured")
    pct = (b - a) / a * 100.0
    if abs(pct) < MEMORY_SAME_PCT:
        verdict = "same"
    elif pct < 0:
        verdict = "better (smaller)"
        better.append("memory")
    else:
        verdict = "worse (larger)"
    return DecisionRow("resident GiB", f"{a:.2f}", f"{b:.2f}", f"{pct:+.1f}%", verdict, "one reading each, no interval")
