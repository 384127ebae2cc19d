"""One decision on one screen: the incumbent against each contender, six figures (seven with
speculative decoding) each with its interval and verdict, and one recommendation line
(promote / keep / not resolved, with the reasons and what to run next).

Built from a Comparison (services.runs.comparison), so it reads exactly the runs and
repetitions compare chose; rendered as text (the CLI, the TUI's head to head), Markdown
(`sparkctl compare --table`) and JSON (`--json`, under "decision").

Verdict words follow the interval (DESIGN.md, "The seams"). A suite with a margin is
"better" / "not worse" when the interval's lower bound clears -margin, "worse" when its upper
bound lies below -margin, and otherwise "not resolved: too few items" with the items that
would resolve it at the observed spread (core.noninferiority).

The recommendation goes the same three ways. "keep" on a clear loss: decode worse beyond the
noise, a suite worse beyond its margin, or a row beyond an optional limit ([promote]
max_ttft_increase_pct, max_memory_increase_pct: the interval wholly beyond it). "not
resolved" on anything the evidence cannot settle yet, with the run that would ("run about N
more items"). "promote" only when every suite is shown not worse and something is better.
Whatever the outcome, every row that is worse beyond its noise (decode, TTFT, memory,
J/token, acceptance, a suite) is named in the reason with its difference: a trade-off is
said, never summed up by a fixed phrase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkctl.core import compare
from sparkctl.core import noninferiority as gate_words
from sparkctl.services.runs.pairing import matching_command

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
    asks: list[str] = field(default_factory=list)  # not resolved: what to run ("run about 240 more gsm8k items")
    worse: list[str] = field(default_factory=list)  # the rows worse beyond their noise or margin
    # each [promote] limit set: (True within it / False beyond it / None cannot tell, in words)
    limit_checks: list[tuple[bool | None, str]] = field(default_factory=list)

    @property
    def recommendation(self) -> str:
        unresolved = NOT_RESOLVED + (f": {'; '.join(self.asks)}" if self.asks else "")
        head = {PROMOTE: f"promote {self.contender}", KEEP: f"keep {self.baseline}",
                NOT_RESOLVED: unresolved}[self.action]
        why = "; ".join(self.reasons)
        nxt = f"; next: {'; '.join(self.next_steps)}" if self.next_steps else ""
        return f"recommendation: {head}" + (f" ({why})" if why else "") + nxt

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "contender": self.contender, "rows": [r.to_dict() for r in self.rows],
                "action": self.action, "reasons": self.reasons, "next": self.next_steps, "worse": self.worse,
                "limits": [{"within": ok, "text": text} for ok, text in self.limit_checks],
                "recommendation": self.recommendation}


@dataclass
class DecisionTable:
    engine: str
    workload: str
    decisions: list[Decision]
    notes: list[str] = field(default_factory=list)
    limits: dict[str, float] = field(default_factory=dict)
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


# [promote] limits a decision reads (config keys max_ttft_increase_pct, max_memory_increase_pct)
TTFT_LIMIT = "ttft_pct"
MEMORY_LIMIT = "memory_pct"


def decision_table(cmp) -> DecisionTable:
    """The decision for each contender against the baseline of a Comparison."""
    base = cmp.sides[0]
    run = base.run
    limits = dict(getattr(cmp, "limits", None) or {})
    table = DecisionTable(f"{cmp.engine.get('kind')} {cmp.engine.get('version')}",
                          run.identity.describe() if run is not None else "-", [], list(cmp.notes),
                          incumbent=bool(base.lane), limits=limits)
    for other in cmp.sides[1:]:
        table.decisions.append(_decide(cmp, base, other, limits))
    return table


@dataclass
class _Tally:
    """What each row says about the decision, gathered as the rows are built."""

    keep: list[str] = field(default_factory=list)  # clear losses (blockers)
    blockers: list[str] = field(default_factory=list)  # the rows behind them, so they are not named twice
    missing: list[str] = field(default_factory=list)  # what cannot be settled yet, and why
    asks: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    better: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # suites shown not worse
    worse: dict[str, str] = field(default_factory=dict)  # row -> its phrase
    limits: list[tuple[bool | None, str]] = field(default_factory=list)  # see Decision.limit_checks

    def unresolved(self, why: str, ask: str, step: str = "") -> None:
        self.missing.append(why)
        if ask and ask not in self.asks:
            self.asks.append(ask)
        if step:
            self.steps.append(step)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _decide(cmp, base, other, limits: dict[str, float]) -> Decision:
    rows: list[DecisionRow] = []
    t = _Tally()
    diffs = {d.metric: d for d in cmp.differences if d.b == other.model}
    pair = f"{base.model} {other.model}"
    more_reps = f"sparkctl bench {pair} --until-resolved"

    # decode: the speed a lane is chosen for
    d = diffs.get("decode_tps")
    if d is None:
        rows.append(DecisionRow("decode tok/s", "-", "-", "-", "not measured"))
        t.unresolved("no decode figures to compare", "bench both")
    else:
        rows.append(_speed_row("decode tok/s", base.values.get("decode_tps", []), other.values.get("decode_tps", []),
                               d, True, ".1f", d.excluded_a, d.excluded_b))
        text = rows[-1].difference
        if d.verdict == compare.WORSE:
            t.worse["decode"] = f"slower decode {text}"
            t.keep.append(f"slower decode {text}")
            t.blockers.append("decode")
        elif d.verdict == compare.NOT_ENOUGH:
            t.unresolved("decode: not enough repetitions", "run more repetitions", more_reps)
        elif d.verdict == compare.BETTER:
            t.better.append(f"faster decode {text}")

    _ttft(rows, t, base, other, diffs.get("ttft_s"), limits.get(TTFT_LIMIT), more_reps)
    _quality(rows, t, cmp, base, other, pair)
    _memory(rows, t, base, other, limits.get(MEMORY_LIMIT))

    jd = diffs.get("joules_per_token")
    if jd is not None:
        rows.append(_speed_row("J/token", base.values.get("joules_per_token", []),
                               other.values.get("joules_per_token", []), jd, False, ".2f", "", ""))
        if jd.verdict == compare.BETTER:
            t.better.append(f"less energy per token {rows[-1].difference}")
        elif jd.verdict == compare.WORSE:
            t.worse["J/token"] = f"J/token {rows[-1].difference}"
    else:
        rows.append(DecisionRow("J/token", _num(base.run.joules_per_token if base.run else None, ".2f"),
                                _num(other.run.joules_per_token if other.run else None, ".2f"), "-",
                                "not measured" if not (base.run and base.run.joules_per_token) else "no interval"))

    ad = diffs.get("acceptance")  # speculative decoding, where both engines reported it
    if ad is not None:
        rows.append(_speed_row("acceptance %", base.values.get("acceptance", []), other.values.get("acceptance", []),
                               ad, True, ".1f", "", ""))
        if ad.verdict == compare.BETTER:
            t.better.append(f"higher draft acceptance {rows[-1].difference}")
        elif ad.verdict == compare.WORSE:
            t.worse["acceptance"] = f"draft acceptance {rows[-1].difference}"

    worse_rows = list(t.worse)
    others = [phrase for row, phrase in t.worse.items() if row not in t.blockers]
    if t.keep:
        also = [f"also worse: {_and(others)}"] if others else []
        return Decision(base.model, other.model, rows, KEEP, t.keep + also, worse=worse_rows, limit_checks=t.limits)
    if t.missing:
        also = [f"worse: {_and(others)}"] if others else []
        return Decision(base.model, other.model, rows, NOT_RESOLVED, t.missing + also, list(dict.fromkeys(t.steps)),
                        t.asks, worse_rows, t.limits)
    held = [f"{_and(t.held)} shown not worse within {'its margin' if len(t.held) == 1 else 'their margins'}"] \
        if t.held else []
    if t.better:
        but = f", but {_and(others)}" if others else ""
        return Decision(base.model, other.model, rows, PROMOTE, [_and(t.better) + but] + held, worse=worse_rows,
                        limit_checks=t.limits)
    also = [f"worse: {_and(others)}"] if others else []
    return Decision(base.model, other.model, rows, KEEP, ["nothing better beyond the noise or margins"] + also,
                    worse=worse_rows, limit_checks=t.limits)


def _ttft(rows: list[DecisionRow], t: _Tally, base, other, d, limit: float | None, more_reps: str) -> None:
    """TTFT: named when worse beyond the noise; with [promote] max_ttft_increase_pct, a
    blocker when its interval lies wholly above the limit, unresolved when it reaches it."""
    key = "[promote] max_ttft_increase_pct"
    if d is None:
        rows.append(DecisionRow("TTFT s", "-", "-", "-", "not measured"))
        if limit is not None:
            t.unresolved(f"TTFT not measured: {key} = {limit:g} cannot be checked", "bench both")
            t.limits.append((None, t.missing[-1]))
        return
    rows.append(_speed_row("TTFT s", base.values.get("ttft_s", []), other.values.get("ttft_s", []), d, False, ".3f",
                           d.excluded_a, d.excluded_b))
    text = rows[-1].difference
    if d.verdict == compare.BETTER:
        t.better.append(f"shorter TTFT {text}")
    elif d.verdict == compare.WORSE:
        t.worse["TTFT"] = f"TTFT {text}"
    if limit is None:
        return
    ci = d.ci
    if d.verdict == compare.NOT_ENOUGH or not ci.relative or ci.ci_low_pct is None:
        t.unresolved(f"TTFT {text}: not enough repetitions to check {key} = {limit:g}", "run more repetitions",
                     more_reps)
        t.limits.append((None, t.missing[-1]))
    elif ci.ci_low_pct > limit:
        t.keep.append(f"TTFT {text} is beyond {key} = {limit:g}")
        t.blockers.append("TTFT")
        t.limits.append((False, t.keep[-1]))
    elif ci.ci_high_pct > limit:
        t.unresolved(f"TTFT {text}: the interval reaches both sides of {key} = {limit:g}", "run more repetitions",
                     more_reps)
        t.limits.append((None, t.missing[-1]))
    else:
        t.limits.append((True, f"TTFT {text} is within {key} = {limit:g}"))


def _quality(rows: list[DecisionRow], t: _Tally, cmp, base, other, pair: str) -> None:
    evidence = {e.suite: e for e in cmp.evidence if e.contender == other.model}
    for suite in ("gsm8k", "ifeval"):
        title = SUITE_TITLE[suite]
        ev = evidence.get(suite)
        whole = f"sparkctl eval {pair} --suite {suite} --for-promotion"
        if ev is None:
            rows.append(DecisionRow(title, "-", "-", "-", "not measured (the incumbent has no eval)"))
            t.unresolved(f"{suite}: no eval of the incumbent", f"evaluate both on {suite}", whole)
            continue
        if ev.diff is None:
            rows.append(DecisionRow(title, _score(ev.incumbent_run), _score(ev.contender_run), "-", "not compared"))
            t.unresolved(ev.problem, f"a matching {suite} eval of both", ev.command)
            continue
        q, g = ev.diff, ev.diff.gate
        c = q.ci
        n = f"{c.n} paired" if q.paired else f"{c.n_a}/{c.n_b}"
        diff_text = f"{c.diff_pp:+.1f} pp [{c.ci_low_pp:+.1f}, {c.ci_high_pp:+.1f}]"
        if g is None:  # no margin asked: the plain interval's word
            rows.append(DecisionRow(title, _score(ev.incumbent_run), _score(ev.contender_run), diff_text, q.verdict,
                                    f"{n} items"))
            if q.verdict == compare.WORSE:
                t.worse[suite] = f"{suite} {diff_text}"
            continue
        rows.append(DecisionRow(title, _score(ev.incumbent_run), _score(ev.contender_run), diff_text, g.verdict(),
                                f"{n} items"))
        outcome = g.outcome
        if outcome == gate_words.BETTER:
            t.better.append(f"{suite} {diff_text}")
        elif outcome == gate_words.NOT_WORSE:
            t.held.append(suite)
        elif outcome == gate_words.WORSE:
            t.worse[suite] = f"{suite} {diff_text}"
            t.keep.append(f"{suite} {diff_text} is worse beyond the {g.margin_pp:g} pp margin")
            t.blockers.append(suite)
        else:
            why = (f"{suite} {diff_text} on {g.n} {'paired items' if g.paired else 'items per model'}: not resolved "
                   f"at the {g.margin_pp:g} pp margin; {g.resolution(power_note=False)}")
            ident = ev.incumbent_run.identity if ev.incumbent_run is not None else None
            if g.needed is None:
                t.unresolved(why, "", "")
            elif g.suite_items is None or g.needed <= g.suite_items:
                step = (matching_command([base.model, other.model], ident) + f" --n {g.needed}") if ident else whole
                t.unresolved(why, f"run about {g.more:,} more {suite} items", step)
            elif g.n < g.suite_items:
                t.unresolved(why, f"run the whole {suite} suite ({g.suite_items:,} items)", whole)
            else:
                t.unresolved(why, "", "")


def _score(row) -> str:
    if row is None or row.score is None:
        return "-"
    return f"{row.score * 100:.1f} ({row.eval_items or '?'})"


def _memory(rows: list[DecisionRow], t: _Tally, base, other, limit: float | None) -> None:
    """Resident memory, one reading each (no interval): "same" within 1%, else better or
    worse; with [promote] max_memory_increase_pct, a blocker above it."""
    key = "[promote] max_memory_increase_pct"
    a = base.run.resident_gib if base.run else None
    b = other.run.resident_gib if other.run else None
    if a is None or b is None or a <= 0:
        rows.append(DecisionRow("resident GiB", _num(a, ".2f"), _num(b, ".2f"), "-", "not measured"))
        if limit is not None:
            t.unresolved(f"resident memory not measured: {key} = {limit:g} cannot be checked", "bench both")
            t.limits.append((None, t.missing[-1]))
        return
    pct = (b - a) / a * 100.0
    ratio = b / a
    said = ("twice the memory" if 1.9 <= ratio < 2.1 else f"{ratio:.1f} times the memory" if ratio >= 2.1
            else f"memory {pct:+.1f}%")
    if abs(pct) < MEMORY_SAME_PCT:
        verdict = "same"
    elif pct < 0:
        verdict = "better (smaller)"
        t.better.append(f"less memory ({b:.2f} vs {a:.2f} GiB)")
    else:
        verdict = "worse (larger)"
        t.worse["memory"] = f"{said} ({b:.2f} vs {a:.2f} GiB)"
    # the limit is the user's own line: checked against the figure whatever the row's word
    # ("same" only says that under 1% one reading each is not called a difference)
    if limit is not None and pct > limit:
        figure = f"{b:.2f} vs {a:.2f} GiB" if said.startswith("memory") else f"{pct:+.1f}%, {b:.2f} vs {a:.2f} GiB"
        t.keep.append(f"{said} ({figure}) is beyond {key} = {limit:g}")
        t.blockers.append("memory")
        t.limits.append((False, t.keep[-1]))
    elif limit is not None:
        t.limits.append((True, f"resident memory {pct:+.1f}% ({b:.2f} vs {a:.2f} GiB) is within {key} = {limit:g}"))
    rows.append(DecisionRow("resident GiB", f"{a:.2f}", f"{b:.2f}", f"{pct:+.1f}%", verdict,
                            "one reading each, no interval"))
