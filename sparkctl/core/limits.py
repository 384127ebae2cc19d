"""The largest counts sparkctl accepts, wherever they are given (a flag, a config key, a
TUI field). Each one sizes something held in memory or sent at once: a bench keeps every
repetition and re-journals its run after each one, an eval starts one worker per item in
flight. On a Spark, memory is shared with the serving lanes and running out can freeze the
box, so a count past these is refused with its bound rather than attempted."""

from __future__ import annotations

MAX_REPS = 1000  # measured repetitions per model (--reps, [bench] reps, --max-reps)
MAX_WARMUP = 100  # warm-up requests per model (--warmup, [bench] warmup)
MAX_CONCURRENCY = 64  # requests in flight at once (sweep --concurrency, eval --concurrency)
