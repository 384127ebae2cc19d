"""Cold prefill, checked against the engine: where each request's nonce goes, what the
template still makes every request share, and how many prompt tokens the engine evaluated.

A chat template wraps the prompt: an opening (BOS, role markers, a fixed system block such
as Llama 3's date line or gpt-oss's harmony preamble), the model's own system prompt when it
has one, the user's text, the assistant's marker. Engines reuse the KV cache of the longest
token prefix two requests share, so a nonce placed in the user's text leaves everything
before it cached: a 100-token header is then "prefilled" in no time by every repetition,
and a prefill rate computed over the whole prompt count (Ollama counts the whole prompt
but times only what it evaluated) comes out inflated (+57% for a 100-token header on a
~280-token prompt). So:

1. The nonce goes at the very start of what the template renders first: the model's system
   prompt where it has one (Ollama's `system` field replaces the Modelfile's SYSTEM, so the
   bench sends the nonce followed by that same text), otherwise the user's text.
2. What still precedes it (the template's fixed opening) is measured from the engine
   itself, on two minimal requests that differ only in their nonce: the engine's own count
   of reused tokens where it gives one (llama-server `cache_n`, OpenAI `cached_tokens`), or
   the common prefix of the token ids it returns for the two prompts (Ollama's
   /api/generate `context`; llama-server's /apply-template + /tokenize, which is what
   Ollama's llama-server runner calls to fill `context`).
3. The prefill rate is computed over the tokens the engine evaluated: the prompt count
   less the cached tokens when the engine says how many, else less the measured opening
   when the engine's count includes it (Ollama before 0.30 and from 0.30.1), else the
   count as it is (Ollama 0.30.0 counts only what it evaluated).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sparkctl.core import prefill
from sparkctl.engines.base import DoneEvent

NONCE_IN_SYSTEM = "system"  # at the start of the model's system prompt
NONCE_IN_PROMPT = "prompt"  # at the start of the user's text
NONCE_NONE = "none"  # llama-server: cache_prompt=false re-evaluates everything, no nonce needed

# The probes' body: short, and the same for both, so that only their nonces differ.
PROBE_BODY = "Reply with one word."

METHOD_CACHED_COUNT = "the engine's count of reused tokens (second of two probes)"
METHOD_TOKEN_IDS = "common prefix of the token ids the engine returned for two probes"
METHOD_TEMPLATE_IDS = "common prefix of two probes' token ids (engine's /apply-template + /tokenize)"
METHOD_NONE = "not measurable: the engine returned neither reused-token counts nor token ids"
METHOD_RUNNER = "each request's count from Ollama's llama-server runner"


@dataclass(frozen=True)
class Opening:
    """What every cold request of one model still shares with the one before it.

    tokens: the template's fixed opening in tokens (None: not measurable on this engine).
    counts_shared: whether the engine's prompt_eval_count includes those tokens (True: the
    whole prompt is counted, so they must be subtracted; False: only evaluated tokens are
    counted; None: unknown, taken as True, the common case).
    """

    tokens: int | None
    method: str
    counts_shared: bool | None = None

    def tags(self, where: str) -> dict[str, str]:
        return {"bench.nonce_position": where,
                "bench.shared_prefix_tokens": "unknown" if self.tokens is None else str(self.tokens),
                "bench.shared_prefix_method": self.method}


def nonce_position(engine_kind: str, system: str) -> str:
    """Where the cold nonce goes for a model whose own system prompt is `system`."""
    if engine_kind == "llama.cpp":
        return NONCE_NONE
    return NONCE_IN_SYSTEM if system.strip() else NONCE_IN_PROMPT


def cold_request(body: str, nonce: str, k: int, where: str, system: str) -> tuple[str, str | None, str]:
    """(prompt, system to send or None, text the bench added) for cold request k."""
    if where == NONCE_NONE:
        return body, None, ""
    marked = prefill.cold_prompt("", nonce, k)  # the preamble alone: "<Word> request <nonce>-<k>.\n\n"
    if where == NONCE_IN_SYSTEM:
        return body, marked + system, marked
    return marked + body, None, marked


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids two prompts share (os.path.commonprefix compares any
    sequences element by element, not only paths)."""
    return len(os.path.commonprefix([list(a), list(b)]))


def evaluated_tokens(done: DoneEvent, opening: Opening | None) -> int:
    """Prompt tokens the engine evaluated for this request (what its prefill time covers)."""
    count = done.prompt_eval_count
    if done.prompt_cached_count is not None:  # the engine said how many it reused
        return max(0, count - done.prompt_cached_count)
    if opening is not None and opening.tokens and opening.counts_shared is not False:
        return max(0, count - opening.tokens)
    return count


Send = Callable[[str, str | None], Awaitable[DoneEvent | None]]
TokenIds = Callable[[str, str | None], Awaitable[list[int] | None]]


async def measure_opening(where: str, system: str, nonce: str, send: Send,
                          token_ids: TokenIds | None = None) -> Opening:
    """The template's opening shared by any two of this model's cold requests, from the
    engine's own answers to two minimal probes that differ only in their nonce.

    `send(prompt, system)` makes one request (num_predict 1) and returns its final event;
    `token_ids(prompt, system)` asks the engine for a prompt's token ids without generating
    (llama-server), where it can."""
    probes = [cold_request(PROBE_BODY, f"{nonce}p", k, where if where != NONCE_NONE else NONCE_IN_PROMPT, system)
              for k in (0, 1)]
    if token_ids is not None:
        ids = [await token_ids(p, s) for p, s, _ in probes]
        if ids[0] and ids[1]:
            return Opening(common_prefix(ids[0], ids[1]), METHOD_TEMPLATE_IDS, counts_shared=True)
    dones = [await send(p, s) for p, s, _ in probes]
    a, b = dones
    if b is not None and b.prompt_cached_count is not None:
        return Opening(b.prompt_cached_count, METHOD_CACHED_COUNT, counts_shared=True)
    if a is not None and b is not None and a.context_ids and b.context_ids:
        shared = common_prefix(a.context_ids, b.context_ids)
        return Opening(shared, METHOD_TOKEN_IDS, _counts_shared(b, shared))
    return Opening(None, METHOD_NONE)


def _counts_shared(done: DoneEvent, shared: int) -> bool | None:
    """Whether prompt_eval_count covered the reused opening: the probe's prompt length is its
    `context` (prompt + output ids) less what it generated; one token of slack for the
    output being re-tokenized together with the prompt."""
    if done.context_ids is None or shared < 3:
        return None  # too few shared tokens to tell the two styles apart
    prompt_len = len(done.context_ids) - done.eval_count
    if abs(done.prompt_eval_count - prompt_len) <= 1:
        return True
    if abs(done.prompt_eval_count - (prompt_len - shared)) <= 1:
        return False
    return None


def describe(opening: Opening | None, where: str) -> str:
    """One line for the run's notes."""
    if opening is None:
        return ""
    at = {NONCE_IN_SYSTEM: "the start of the model's system prompt", NONCE_IN_PROMPT: "the start of the prompt",
          NONCE_NONE: "nowhere (the engine's prompt cache is off)"}.get(where, where)
    if opening.tokens is None:
        return f"cold nonce at {at}; the template's shared opening is {opening.method}"
    return f"cold nonce at {at}; {opening.tokens} template token(s) before it are shared by every request ({opening.method})"


def request_kwargs(system: str | None) -> dict[str, Any]:
    """The engine.generate keyword for a system prompt, only when there is one (adapters
    that predate it need not know the argument)."""
    return {"system": system} if system is not None else {}
