"""Context-depth text: prose that fills a model's context before the measured prompt.

Shipped in the package, never downloaded: sentences are assembled deterministically from
the word lists below (written for sparkctl, public domain) with random.Random(seed), so the
same depth gives the same text on every machine, and no sentence repeats often enough for
an engine to treat the context as one repeated pattern. How many tokens a text is depends
on the model's tokenizer, so the service calibrates on the engine itself (prompt_eval_count
of a sample, see `chars_per_token`) and checks each cell's depth from the engine's count.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import random

DEFAULT_CHARS_PER_TOKEN = 4.0
DEPTH_TOLERANCE = 0.10  # a cell whose measured depth is off by more than this is flagged

_PEOPLE = ("the keeper", "the ferryman", "a surveyor", "the miller's daughter", "an old clerk",
           "the harbour master", "a travelling tinker", "the schoolteacher", "two fishermen",
           "the night watch", "a botanist", "the postmistress", "the river pilot", "a cartwright",
           "the archivist", "a shepherd from the upper valley", "the lamplighter", "the carpenter")
_VERBS = ("counted", "repaired", "wrote down", "carried", "measured", "questioned", "painted",
          "mended", "watched", "sorted", "weighed", "remembered", "sketched", "traded", "buried",
          "copied", "followed", "mapped", "planted", "sealed")
_THINGS = ("the tide tables", "a crate of lamp oil", "the broken weather vane", "forty sacks of barley",
           "the parish ledgers", "a map of the northern shoals", "the brass telescope",
           "the winter's firewood", "a letter from the capital", "the survey chains",
           "a basket of late apples", "the signal flags", "the old stone bridge", "the church bell rope",
           "three dozen candles", "the quarry accounts", "a bundle of oak saplings", "the toll records")
_PLACES = ("beside the harbour wall", "in the loft above the mill", "along the eastern causeway",
           "at the crossroads inn", "under the lighthouse stair", "by the dry stone wall",
           "in the counting house", "on the shingle beach", "near the ford", "behind the granary",
           "at the edge of the marsh", "in the chapel porch", "on the ridge road", "by the lock gates")
_TIMES = ("before dawn", "in the grey hour after the storm", "on the first market day", "late in autumn",
          "during the long frost", "when the fog lifted", "at the turn of the tide", "after the harvest",
          "on a bright spring morning", "while the bells rang noon", "in the last week of the fair")
_ADJ = ("careful", "weathered", "patient", "hurried", "quiet", "stubborn", "cheerful", "tired",
        "meticulous", "restless", "generous", "doubtful")
_REASONS = ("because the ledger would be checked at midsummer", "so that nothing would be lost to the damp",
            "though no one had asked for it", "as the charter required", "to settle an old argument",
            "for fear of another flood year", "since the roads would soon close", "at the council's request",
            "while the others slept", "in the hope of a fair price")


def _sentence(rng: random.Random, n: int) -> str:
    form = rng.randrange(5)
    p, v, t = rng.choice(_PEOPLE), rng.choice(_VERBS), rng.choice(_THINGS)
    where, when, adj, why = rng.choice(_PLACES), rng.choice(_TIMES), rng.choice(_ADJ), rng.choice(_REASONS)
    if form == 0:
        s = f"{when.capitalize()}, {p} {v} {t} {where}, {why}."
    elif form == 1:
        s = f"{p.capitalize()}, {adj} as ever, {v} {t} {where}."
    elif form == 2:
        s = f"Entry {n}: {rng.randint(2, 97)} of {t} {v.split()[0]} {when}; {p} signed for them {where}."
    elif form == 3:
        s = f"It was {p} who {v} {t}, {why}, and {rng.choice(_PEOPLE)} who kept the tally."
    else:
        s = (f"{when.capitalize()} the wind came round to the {rng.choice(('north', 'south', 'east', 'west'))}, "
             f"and {p} {v} {t} again.")
    return s


def depth_text(chars: int, seed: int = 0) -> str:
    """About `chars` characters of prose (whole sentences, paragraphs of 6; never more than
    `chars` unless one sentence is), the same for the same (chars, seed). 0 -> ''."""
    if chars <= 0:
        return ""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    n = 0
    para: list[str] = []
    while size < chars:
        n += 1
        s = _sentence(rng, n)
        if n > 1 and size + len(s) + 1 > chars:
            break
        para.append(s)
        size += len(s) + 1
        if len(para) >= 6:
            out.append(" ".join(para))
            para = []
            size += 1
    if para:
        out.append(" ".join(para))
    return "\n\n".join(out)


def text_for_tokens(tokens: int, chars_per_token: float, seed: int = 0) -> str:
    """Depth text sized for `tokens` tokens of a tokenizer measured at `chars_per_token`."""
    if tokens <= 0:
        return ""
    return depth_text(int(tokens * chars_per_token), seed)


def chars_per_token(sample_chars: int, tokens_with: int | None, tokens_without: int | None) -> float | None:
    """Calibration from the engine's own prompt_eval_count: the same prompt with and
    without a sample of `sample_chars` characters of depth text in front of it."""
    if not tokens_with or tokens_without is None or tokens_with <= tokens_without:
        return None
    return sample_chars / (tokens_with - tokens_without)


def depth_check(target: int, measured: int | None) -> str:
    """'' when the engine's count of the depth is within tolerance, else why not."""
    if target <= 0 or measured is None:
        return ""
    off = (measured - target) / target
    if abs(off) <= DEPTH_TOLERANCE:
        return ""
    return (f"depth {target} tokens asked, the engine counted {measured} ({off * 100:+.0f}%): "
            "the depth text did not tokenize as calibrated")


def assemble(depth: str, prompt: str) -> str:
    """The measured request's prompt: the depth text as earlier context, then the profile's
    prompt (the cold-cache preamble goes in front of both, so nothing is cached)."""
    if not depth:
        return prompt
    return f"Background notes (for context only):\n\n{depth}\n\n---\n\n{prompt}"
