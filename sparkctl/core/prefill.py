"""Prompt-cache policy for benches: make every measured request pay its whole prefill
(cold), or measure a cached follow-up on purpose (warm), and check from the engine's own
counts which one really happened.

Engines keep the KV cache of the last prompt and evaluate only the tokens after the longest
common prefix. Reporting differs: Ollama 0.12-era runners and llama-server count the whole
prompt in prompt_eval_count while prompt_eval_duration covers only the uncached tokens;
Ollama 0.30.x counts only the uncached tokens. So a cache hit shows either as a count far
below a cold request's, or as a time per prompt token far below a cold request's.
"""

from __future__ import annotations

from dataclasses import dataclass

COLD = "cold"
WARM = "warm"
POLICIES = (COLD, WARM)

# A cached request evaluates a few tokens where a cold one evaluates hundreds; a cold
# request on a fresh runner can be a few times slower per token than the next (buffers
# allocated, kernels compiled). These factors sit between the two.
CACHED_COUNT_SHARE = 0.5
CACHED_TIME_FACTOR = 4.0
# A whole-prompt hit is timed over a token or two of a prompt of hundreds: per token it is
# ~100x below a cold request. The first request after a load may be several times slower
# than the next cold ones, never 20 times.
FIRST_REQUEST_FACTOR = 20.0

# Distinct first words: the first prompt token differs from the previous request's, so the
# engine can reuse at most the chat template's fixed header, never the prompt itself.
_OPENERS = ("Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India",
            "Juliet", "Kilo", "Lima", "Mike", "November", "Oscar", "Papa", "Quebec", "Romeo",
            "Sierra", "Tango", "Uniform", "Victor", "Whiskey", "Xray", "Yankee", "Zulu")

PREAMBLE_FORMAT = "<word k mod 26> request <nonce>-<k>.\\n\\n (before the prompt; cold policy)"
FOLLOW_UP_FORMAT = "\\n\\n(Follow-up <nonce>-<k>: answer the request above.) (after the prompt; warm policy)"


def cold_prompt(body: str, nonce: str, k: int) -> str:
    """The prompt for request k of a cold bench: a short preamble that changes its first token."""
    return f"{_OPENERS[k % len(_OPENERS)]} request {nonce}-{k}.\n\n{body}"


def warm_prompt(body: str, nonce: str, k: int) -> str:
    """The prompt for request k of a warm bench: the fixed body (cached after the first
    request) and a short follow-up that differs each time (llama-benchy's two-step)."""
    return f"{body}\n\n(Follow-up {nonce}-{k}: answer the request above.)"


@dataclass(frozen=True)
class PrefillSample:
    count: int | None  # prompt_eval_count
    duration_ns: int | None  # prompt_eval_duration
    cached: int | None = None  # tokens the engine says came from its cache, when it says

    @property
    def ns_per_token(self) -> float | None:
        if not self.count or not self.duration_ns:
            return None
        return self.duration_ns / self.count


@dataclass(frozen=True)
class PrefillVerdict:
    cached: bool | None  # None: the engine gave nothing to judge by
    cached_tokens: int | None  # known when the engine counts only uncached tokens
    reason: str = ""


def judge(samples: list[PrefillSample]) -> list[PrefillVerdict]:
    """Which of one model's requests (in order, on one runner, the first one the first after
    its load) were served from the cache.

    Where the engine counts its cached tokens (llama-server, some OpenAI-compatible servers)
    that count decides. Otherwise two signs, each against a reference a cache hit cannot
    fake: a count far below the largest count (a cold request's whole prompt: the 0.30.0
    style), or a time per counted token far below that of the other requests (the
    whole-count style, where a hit is timed over a token or two). The time reference is the
    median of the requests after the first, whose first-after-load costs (buffers, kernels)
    would otherwise make every later request look cached; the first one is still the
    reference for the case where every later request was a hit, at a factor no first-request
    overhead reaches."""
    counts = [s.count for s in samples if s.count]
    if not counts:
        return [PrefillVerdict(None, None) for _ in samples]
    full = max(counts)
    per_tok = [s.ns_per_token for s in samples]
    later = sorted(t for t in per_tok[1:] if t)
    typical = later[len(later) // 2] if later else None
    first = per_tok[0] if per_tok else None
    out = []
    for i, s in enumerate(samples):
        if not s.count:
            out.append(PrefillVerdict(None, None))
            continue
        if s.cached is not None:  # the engine said it: no inference needed
            hit = s.cached > s.count * (1 - CACHED_COUNT_SHARE)
            out.append(PrefillVerdict(hit, s.cached, f"the engine reused {s.cached} of {s.count} prompt tokens "
                                      "from its cache" if hit else ""))
            continue
        if s.count < full * CACHED_COUNT_SHARE:
            out.append(PrefillVerdict(True, full - s.count,
                                      f"the engine evaluated {s.count} of {full} prompt tokens"))
            continue
        t = s.ns_per_token
        ref = None
        if t and typical and i > 0 and t * CACHED_TIME_FACTOR < typical:
            ref = typical
        elif t and first and i > 0 and t * FIRST_REQUEST_FACTOR < first:
            ref = first
        if ref is not None:
            out.append(PrefillVerdict(True, None,
                                      f"prefill took {t / 1e3:.0f} us per prompt token against "
                                      f"{ref / 1e3:.0f} us for a cold request"))
            continue
        out.append(PrefillVerdict(False, (full - s.count) if s.count < full else 0))
    return out
