"""The largest counts sparkctl accepts, wherever they are given (a flag, a config key, a
TUI field). Each one sizes something held in memory or sent at once: a bench keeps every
repetition and re-journals its run after each one, an eval starts one worker per item in
flight. On a Spark, memory is shared with the serving lanes and running out can freeze the
box, so a count past these is refused with its bound rather than attempted."""

from __future__ import annotations

MAX_REPS = 1000  # measured repetitions per model (--reps, [bench] reps, --max-reps)
MAX_WARMUP = 100  # warm-up requests per model (--warmup, [bench] warmup)
MAX_CONCURRENCY = 64  # requests in flight at once (sweep --concurrency, eval --concurrency)
# A context (--ctx, the num_ctx fields): Ollama reads num_ctx as a Go int, so a larger one is
# an HTTP 400 after the run has started (and MLflow would record a number no engine ran at).
# Past a model's trained context Ollama runs it at the trained one: the bench refuses that
# where /api/show says it (services/bench/runner.py).
MAX_NUM_CTX = 2**63 - 1
# The fleet's per-host limit (fleet --timeout): ssh and `sparkctl status --json` answer in
# seconds; an hour is past any real wait, and a larger number would hang the table for good.
MAX_FLEET_TIMEOUT_S = 3600.0


def count_text(value: int) -> str:
    """A count for a message: a number hundreds of digits long is shown by its size."""
    text = str(value)
    return text if len(text) <= 20 else f"a {len(text)}-digit number"
