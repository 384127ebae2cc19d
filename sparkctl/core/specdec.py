"""Speculative decoding figures: drafted and accepted tokens, acceptance rate and mean
accepted length, per repetition and per run. Pure arithmetic over what an engine reported:
the pure core of sparkctl.engines.specdec, which reads it.

Engines report different things (engines/specdec.py reads them):
- llama-server: per response, `timings.draft_n` (tokens drafted) and `draft_n_accepted`.
- vLLM: cumulative Prometheus counters (`vllm:spec_decode_num_drafts_total`,
  `..._num_draft_tokens_total`, `..._num_accepted_tokens_total`), differenced around a
  request or a run.
- SGLang: an accept length only (tokens per verification step, server-wide).
- Ollama: nothing; a model may carry a draft, but acceptance is not exposed.

Definitions (the engines' own conventions):
- acceptance = accepted draft tokens / drafted tokens.
- mean accepted length = tokens emitted per target verification step, the target's own
  (bonus) token included: 1 + accepted / drafts where the engine counts draft rounds (vLLM),
  the engine's figure where it gives one (SGLang), and for llama-server, which counts
  neither rounds nor steps, tokens / (tokens - accepted): every step emits its accepted
  draft tokens plus one token of the target's, so tokens - accepted is the step count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sparkctl.core.stats import summarize


@dataclass(frozen=True)
class SpecCounts:
    """What one request (or one run) drafted and accepted. None: the engine did not say."""

    drafted: int | None = None
    accepted: int | None = None
    drafts: int | None = None  # draft rounds, where the engine counts them (vLLM)
    tokens: int | None = None  # tokens the request generated, for llama-server's step count
    accept_length: float | None = None  # the engine's own mean accepted length (SGLang)

    @property
    def acceptance(self) -> float | None:
        if self.drafted is None or self.accepted is None or self.drafted <= 0:
            return None
        return self.accepted / self.drafted

    @property
    def mean_accepted_length(self) -> float | None:
        if self.accept_length is not None:
            return self.accept_length
        if self.accepted is None:
            return None
        if self.drafts:
            return 1.0 + self.accepted / self.drafts
        if self.tokens and self.tokens > self.accepted:
            return self.tokens / (self.tokens - self.accepted)
        return None

    @property
    def empty(self) -> bool:
        return self.drafted is None and self.accepted is None and self.accept_length is None

    def minus(self, before: "SpecCounts") -> "SpecCounts":
        """This cumulative reading less an earlier one (counters differenced around a span)."""

        def d(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else max(0, a - b)

        return replace(self, drafted=d(self.drafted, before.drafted), accepted=d(self.accepted, before.accepted),
                       drafts=d(self.drafts, before.drafts))

    def plus(self, other: "SpecCounts") -> "SpecCounts":
        def s(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else a + b

        return SpecCounts(s(self.drafted, other.drafted), s(self.accepted, other.accepted),
                          s(self.drafts, other.drafts), s(self.tokens, other.tokens),
                          other.accept_length if other.accept_length is not None else self.accept_length)


def summary(per_rep: list[SpecCounts | None], run_total: SpecCounts | None = None) -> dict[str, float]:
    """Run-level metrics: the repetitions' acceptance (median, min, max, CV in percent)
    beside the run's pooled totals (`*_total`: all drafted and accepted tokens added up, or
    the engine's counters differenced around the whole run when given). The per-repetition
    series (step_metrics) keep the names without a suffix: MLflow keeps one history per key."""
    reps = [c for c in per_rep if c is not None and not c.empty]
    out: dict[str, float] = {}
    pct = summarize(c.acceptance * 100 for c in reps if c.acceptance is not None)
    if pct.n:
        out["spec_acceptance_pct_median"] = pct.median
        out["spec_acceptance_pct_min"] = pct.min
        out["spec_acceptance_pct_max"] = pct.max
        if pct.cv_pct is not None:
            out["spec_acceptance_pct_cv_pct"] = pct.cv_pct
    lengths = summarize(c.mean_accepted_length for c in reps if c.mean_accepted_length is not None)
    if lengths.n:
        out["spec_accept_len_median"] = lengths.median
    total = run_total
    if total is None and reps:
        total = SpecCounts()
        for c in reps:
            total = total.plus(c)
    if total is not None and not total.empty:
        if total.drafted is not None:
            out["spec_draft_tokens_total"] = float(total.drafted)
        if total.accepted is not None:
            out["spec_accepted_tokens_total"] = float(total.accepted)
        if total.acceptance is not None:
            out["spec_acceptance_pct_total"] = total.acceptance * 100
        if total.mean_accepted_length is not None:
            out["spec_accept_len_total"] = total.mean_accepted_length
    return out


def step_metrics(per_rep: list[SpecCounts | None]) -> dict[str, list[float | None]]:
    """Per-repetition series for MLflow (None where a repetition has no figure)."""

    def f(x: float | int | None) -> float | None:
        return None if x is None else float(x)

    if not any(c is not None and not c.empty for c in per_rep):
        return {}
    return {
        "spec_draft_tokens": [f(c.drafted) if c else None for c in per_rep],
        "spec_accepted_tokens": [f(c.accepted) if c else None for c in per_rep],
        "spec_acceptance_pct": [None if c is None or c.acceptance is None else c.acceptance * 100 for c in per_rep],
        "spec_accept_len": [f(c.mean_accepted_length) if c else None for c in per_rep],
    }


def summary_text(summary: dict) -> str:
    """Speculative decoding in one phrase: pooled acceptance (accepted/drafted), tokens per
    step, and the repetitions' range; "" when the engine reported none."""
    if "spec_acceptance_pct_total" not in summary and "spec_accept_len_total" not in summary:
        return ""
    parts = []
    if "spec_acceptance_pct_total" in summary:
        parts.append(f"acceptance {summary['spec_acceptance_pct_total']:.1f}% "
                     f"({int(summary.get('spec_accepted_tokens_total', 0))}/"
                     f"{int(summary.get('spec_draft_tokens_total', 0))} drafted)")
    if "spec_accept_len_total" in summary:
        parts.append(f"{summary['spec_accept_len_total']:.2f} tokens per step")
    if "spec_acceptance_pct_min" in summary:
        parts.append(f"per repetition {summary['spec_acceptance_pct_min']:.1f}-{summary['spec_acceptance_pct_max']:.1f}%")
    return "speculative decoding " + ", ".join(parts)
