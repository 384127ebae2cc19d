"""Validity checks for one bench repetition: did it measure what it claims to?

"Verify what ran, not that something ran": a reload inside a timed request, a prompt the
engine cut short or a model that spilled to the CPU all produce plausible numbers that
are not comparable with the rest of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# A warm request reports a load_duration of milliseconds; re-reading weights (even from
# page cache) takes seconds. One second separates the two for all but the tiniest models.
DEFAULT_RELOAD_THRESHOLD_NS = 1_000_000_000


def reload_detected(load_duration_ns: int | None, threshold_ns: int = DEFAULT_RELOAD_THRESHOLD_NS) -> bool:
    """Whether the engine (re)loaded the model inside this request.

    Ollama omits a zero load_duration, so None means 0: no reload.
    """
    return (load_duration_ns or 0) > threshold_ns


def prompt_truncated(
    prompt_eval_count: int | None, expected_prompt_tokens: int, tolerance: int = 0
) -> bool | None:
    """Whether the engine saw fewer prompt tokens than the prompt has.

    Ollama truncates an over-long prompt silently (context shift), and the only trace
    is a prompt_eval_count below the prompt's length. `tolerance` absorbs small
    tokenizer/template differences. None when the count is missing: Ollama drops a zero
    field, and some versions (around 0.30, ollama#16414) reported only the tokens not
    served from the prompt cache, so a missing or small count after a cache hit is not
    proof of truncation on those versions.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if prompt_eval_count is None:
        return None
    return prompt_eval_count + tolerance < expected_prompt_tokens


def placement_ok(size: int, size_vram: int) -> bool:
    """Whether the whole model sits on the GPU, as /api/ps reports it.

    Ollama reports size_vram == size on a full offload on purpose; anything else (a
    CPU/GPU split, 100% CPU, size_vram > size, size 0) is not a clean GPU run.
    See core.placement for the label `ollama ps` prints.
    """
    return size > 0 and size_vram == size


class Energy(NamedTuple):
    joules: float
    j_per_token: float | None  # None without output tokens
    tokens_per_joule: float | None  # None when no energy was measured


def _power_at(samples: Sequence[tuple[float, float]], t: float) -> float:
    """Power at time t by linear interpolation, held flat beyond the first/last sample."""
    if t <= samples[0][0]:
        return samples[0][1]
    if t >= samples[-1][0]:
        return samples[-1][1]
    lo, hi = 0, len(samples) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if samples[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, p0), (t1, p1) = samples[lo], samples[hi]
    if t1 == t0:
        return p1
    return p0 + (p1 - p0) * (t - t0) / (t1 - t0)


def energy(
    power_samples_w: Sequence[tuple[float, float]],
    decode_window: tuple[float, float],
    output_tokens: int,
) -> Energy | None:
    """Energy spent in the decode window, by trapezoid integration of power samples.

    Samples are (t_seconds, watts) on the same clock as the window, in any order.
    Power is interpolated linearly at the window edges and held at the nearest sample
    beyond the sampled span, so a window that starts between two samples is neither
    under- nor double-counted. None without samples or with an empty window.
    """
    t_start, t_end = decode_window
    if not power_samples_w or t_end <= t_start:
        return None
    samples = sorted((float(t), float(w)) for t, w in power_samples_w)

    points = [(t_start, _power_at(samples, t_start))]
    points += [(t, w) for t, w in samples if t_start < t < t_end]
    points.append((t_end, _power_at(samples, t_end)))

    joules = 0.0
    for (ta, pa), (tb, pb) in zip(points, points[1:]):
        joules += (pa + pb) / 2 * (tb - ta)

    j_per_token = joules / output_tokens if output_tokens > 0 else None
    tokens_per_joule = output_tokens / joules if joules > 0 else None
    return Energy(joules, j_per_token, tokens_per_joule)


# English prose tokenizes at roughly 3-5 characters per token; fewer than one token per
# 8 characters means part of the prompt never reached the model.
MAX_CHARS_PER_TOKEN = 8


def prompt_looks_truncated(prompt_eval_count: int | None, prompt_chars: int, num_ctx: int) -> bool:
    """Truncation as a bench can see it without the engine's tokenizer: the count is far
    below any tokenizer's count for a prompt this long, or the prompt filled the window."""
    if not prompt_eval_count:
        return False
    if prompt_truncated(prompt_eval_count, prompt_chars // MAX_CHARS_PER_TOKEN):
        return True
    return prompt_eval_count >= num_ctx
