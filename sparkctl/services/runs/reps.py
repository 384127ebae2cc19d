"""The repetitions a bench run used for its own summary, read back per repetition.

A bench logs every repetition's figures as steps (services/bench/runner.py to_record),
cache hits and failures included, but its summary leaves some out: a DNF or failed
repetition has no speed, and under the cold-cache policy a repetition served from the
prompt cache says nothing about TTFT or prefill. Compare, charts and gates must read the
same set the summary did ("One set of numbers", DESIGN.md): this module applies the
runner's own rules to the logged steps and counts what it leaves out, so a table can say
"3 cached, excluded". Blocking (MLflow): call from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkctl.services.runs.rows import RunRow

# name in a comparison -> the per-repetition metric the bench logs
REP_METRICS = {"decode_tps": "engine_decode_tps", "ttft_s": "ttft_s", "prefill_tps": "prefill_tps",
               "joules_per_token": "joules_per_token",
               "acceptance": "spec_acceptance_pct"}  # speculative decoding, where the engine reports it
# figures that need a whole cold prefill (left out for cached repetitions under "cold")
COLD_ONLY = ("ttft_s", "prefill_tps")


@dataclass
class RunReps:
    """Per-repetition values of one run, exactly those its summary used, and what was left out."""

    values: dict[str, list[float]] = field(default_factory=dict)
    reps: int = 0  # repetitions recorded
    dnf: int = 0
    failed: int = 0
    cached: int = 0  # served from the prompt cache under the cold policy: no TTFT/prefill figure

    def excluded(self, metric: str) -> list[str]:
        """What was left out of `metric`, in words ("1 DNF", "3 cached")."""
        out = []
        if self.dnf:
            out.append(f"{self.dnf} DNF")
        if self.failed:
            out.append(f"{self.failed} failed")
        if self.cached and metric in COLD_ONLY:
            out.append(f"{self.cached} cached")
        return out

    def excluded_text(self, metric: str) -> str:
        parts = self.excluded(metric)
        return f"{', '.join(parts)}, excluded" if parts else ""


def select(steps: dict[str, dict[int, float]], cache_policy: str) -> RunReps:
    """The runner's rules over one run's logged steps (metric -> {step: value}).

    A repetition is used when it neither did not finish nor failed; TTFT and prefill come
    only from those that paid their whole prefill (policy cold), all of them under "warm",
    which reports no prefill rate at all. Runs older than the `error` step metric: a
    repetition with no decode figure and no DNF is taken as failed."""
    dnf = steps.get("dnf", {})
    error = steps.get("error", {})
    cached = steps.get("prefill_cached", {})
    decode = steps.get("engine_decode_tps", {})
    all_steps = set(dnf) | set(error) | set(decode) | set(steps.get("ttft_s", {}))
    out = RunReps(reps=len(all_steps))
    used = []
    for step in sorted(all_steps):
        if dnf.get(step):
            out.dnf += 1
        elif error.get(step) or ("error" not in steps and step not in decode):
            out.failed += 1
        else:
            used.append(step)
    warm = cache_policy == "warm"
    cold_used = [k for k in used if warm or not cached.get(k)]
    out.cached = 0 if warm else len(used) - len(cold_used)
    for name, key in REP_METRICS.items():
        pool = used
        if name in COLD_ONLY:
            pool = [] if (warm and name == "prefill_tps") else cold_used
        series = steps.get(key, {})
        out.values[name] = [series[k] for k in pool if k in series]
    return out


STEP_KEYS = ("dnf", "error", "prefill_cached", *REP_METRICS.values())


def read_reps(store, row: RunRow) -> RunReps:
    """One run's used repetitions (a few metric histories: for the runs a decision reads)."""
    steps = {key: store.metric_steps(row.run_id, key) for key in STEP_KEYS}
    return select(steps, row.cache_policy or row.identity.cache_policy)
