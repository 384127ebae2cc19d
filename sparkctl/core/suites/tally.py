"""Running totals of a suite run, with did-not-finish items counted apart from wrong answers.

Each metric is a count of passes over a count of chances: one chance per item for GSM8K
and for IFEval's prompt-level metrics, one per instruction for IFEval's instruction-level
ones. A DNF (or an engine error) item scores no pass: it is counted in the "all items"
figures (``gsm8k_strict``) and left out of the "answered items" ones
(``gsm8k_strict_answered``), so a model that never finishes cannot look accurate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkctl.core.compare import wilson_interval

# metric -> whether it counts instructions (True) or items (False); the first is primary
SUITE_METRICS: dict[str, dict[str, bool]] = {
    "gsm8k": {"gsm8k_strict": False, "gsm8k_flexible": False},
    "ifeval": {"ifeval_prompt_strict": False, "ifeval_inst_strict": True,
               "ifeval_prompt_loose": False, "ifeval_inst_loose": True},
}


def primary_metric(suite: str) -> str:
    return next(iter(SUITE_METRICS[suite]))


def item_counts(suite: str, verdict: dict) -> dict[str, tuple[int, int]]:
    """(passes, chances) per metric for one scored item (the verdict dicts of services.evals)."""
    if suite == "gsm8k":
        return {"gsm8k_strict": (int(verdict["strict_ok"]), 1),
                "gsm8k_flexible": (int(verdict["flexible_ok"]), 1)}
    inst = verdict["instructions"]
    n = len(inst)
    return {
        "ifeval_prompt_strict": (int(all(i["strict"] for i in inst)), 1),
        "ifeval_inst_strict": (sum(bool(i["strict"]) for i in inst), n),
        "ifeval_prompt_loose": (int(all(i["loose"] for i in inst)), 1),
        "ifeval_inst_loose": (sum(bool(i["loose"]) for i in inst), n),
    }


@dataclass
class Tally:
    suite: str
    total: int  # items in the sample
    answered: int = 0
    passed: int = 0  # primary metric passes among answered items
    dnf: int = 0
    errors: int = 0
    all_counts: dict[str, list[int]] = field(default_factory=dict)
    answered_counts: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.suite not in SUITE_METRICS:
            raise ValueError(f"unknown suite {self.suite!r}")
        for m in SUITE_METRICS[self.suite]:
            self.all_counts.setdefault(m, [0, 0])
            self.answered_counts.setdefault(m, [0, 0])

    @property
    def done(self) -> int:
        return self.answered + self.dnf + self.errors

    def add_answer(self, counts: dict[str, tuple[int, int]]) -> None:
        self.answered += 1
        for m, (p, n) in counts.items():
            for acc in (self.all_counts[m], self.answered_counts[m]):
                acc[0] += p
                acc[1] += n
        p, _ = counts[primary_metric(self.suite)]
        self.passed += p

    def add_unanswered(self, chances: int, dnf: bool) -> None:
        """A DNF (dnf=True) or failed item: no pass, `chances` instructions (1 for GSM8K)."""
        if dnf:
            self.dnf += 1
        else:
            self.errors += 1
        for m, counts_instructions in SUITE_METRICS[self.suite].items():
            self.all_counts[m][1] += chances if counts_instructions else 1

    def accuracy(self) -> tuple[float | None, tuple[float, float] | None]:
        """The primary metric over the items done so far (DNF counted as not passed), with
        its 95% Wilson interval; (None, None) before the first item."""
        n = self.done
        if n == 0:
            return None, None
        return self.passed / n, wilson_interval(self.passed, n)

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in SUITE_METRICS[self.suite]:
            p, n = self.all_counts[m]
            if n:
                out[m] = p / n
            p, n = self.answered_counts[m]
            if n:
                out[f"{m}_answered"] = p / n
        first = primary_metric(self.suite)
        if self.done:
            lo, hi = wilson_interval(self.passed, self.done)
            out[f"{first}_ci_low"] = lo
            out[f"{first}_ci_high"] = hi
        out["items"] = float(self.done)
        out["answered"] = float(self.answered)
        out["passed"] = float(self.passed)
        out["dnf_count"] = float(self.dnf)
        out["error_count"] = float(self.errors)
        return out
