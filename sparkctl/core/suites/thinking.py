"""Thinking is never scored: the answer a suite scores is what follows the model's reasoning.

Engines return reasoning in two ways. Ollama (with `think`), llama-server (reasoning_format),
vLLM and SGLang (their reasoning parsers) put it in a field of its own, which the adapters
already keep apart from the content. Where no parser ran (a model without Ollama's
"thinking" capability that thinks anyway, a server started without a reasoning parser) the
reasoning arrives inline, closed by an end marker such as `</think>`. There the answer is
the text after the last end marker, as lm-evaluation-harness does with its
`think_end_token` model argument (lm_eval/models/utils.py postprocess_generated_text:
`generation.split(think_end_token)[-1]`); a response without the marker is scored whole, as
there too. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

THINK_END_TOKENS = ("</think>",)
# How thinking is kept out of the scored text, as part of every suite's RULES_VERSION (the
# workload identity's "scoring rules"): a run scored before inline thinking was cut (the whole
# text scored) is never paired with one scored after. A change here gets a new number.
RULES_VERSION = "thinking cut at the last </think> 1"

FIELD = "separate field"  # the engine returned the reasoning apart
SPLIT = "text before the last {token} removed"  # inline, cut at its end marker
NONE = ""


@dataclass(frozen=True)
class Scored:
    """What is scored, what was taken out before, and how."""

    answer: str
    removed: str
    how: str


def answer_of(content: str, thinking_field: str = "", end_tokens: tuple[str, ...] = THINK_END_TOKENS) -> Scored:
    """The text to score from a response's content (and its separate thinking, if any)."""
    for token in end_tokens:
        if token in content:
            head, _, tail = content.rpartition(token)
            return Scored(tail.lstrip(), head + token, SPLIT.format(token=token))
    return Scored(content, "", FIELD if thinking_field else NONE)


def describe(counts: dict[str, int]) -> str:
    """One phrase for a run's record: how many items had their thinking taken out, each way."""
    parts = []
    for how, n in sorted(counts.items(), key=lambda kv: (kv[0] == NONE, kv[0])):
        what = ("no thinking in the response" if how == NONE else
                "the engine's separate thinking field, not scored" if how == FIELD else
                f"{how}, as lm-eval's think_end_token")
        parts.append(f"{what} ({n} item{'s' if n != 1 else ''})")
    return "; ".join(parts) or "no item answered"
