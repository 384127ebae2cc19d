"""Strict and loose IFEval verdicts for one response, and the four suite figures.

Strict: the instruction's check on the response as given. Loose: the same check on eight
readings of the response (as given, without its first line, without its last line, without
both, and each of those with every ``*`` removed); it passes if any reading that is not
blank passes. A blank response follows nothing. A prompt passes when all its instructions
pass. These are the reference's definitions (Google's instruction_following_eval).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkctl.core.suites.ifeval.checkers import build_check


@dataclass(frozen=True)
class InstructionVerdict:
    id: str
    strict: bool
    loose: bool


@dataclass(frozen=True)
class IfevalVerdict:
    instructions: list[InstructionVerdict]
    prompt_strict: bool  # every instruction passes strict
    prompt_loose: bool  # every instruction passes loose


def loose_readings(response: str) -> list[str]:
    """The response as the loose metric reads it, in the reference's order."""
    lines = response.split("\n")
    no_first = "\n".join(lines[1:]).strip()
    no_last = "\n".join(lines[:-1]).strip()
    no_either = "\n".join(lines[1:-1]).strip()
    trimmed = [response, no_first, no_last, no_either]
    return trimmed[:1] + [response.replace("*", "")] + trimmed[1:] + [t.replace("*", "") for t in trimmed[1:]]


def score_response(instruction_ids: Sequence[str], kwargs: Sequence[Mapping[str, Any] | None],
                   prompt: str, response: str) -> IfevalVerdict:
    """Verdicts for each instruction of a prompt, in the order given (an id may repeat).

    ``kwargs`` is the suite item's list of argument dicts, one per instruction (None values
    are ignored). ``prompt`` is the suite prompt; the checkers that need prompt text take it
    from their kwargs (``prompt_to_repeat``), as the reference does. Raises ValueError for
    an unknown instruction id or arguments the instruction cannot use."""
    if len(instruction_ids) != len(kwargs):
        raise ValueError(f"{len(instruction_ids)} instruction ids but {len(kwargs)} kwargs")
    # the non-blank readings, each once (a one-line response reads the same several ways)
    readings = list(dict.fromkeys(r for r in loose_readings(response) if r.strip()))
    verdicts = []
    for iid, kw in zip(instruction_ids, kwargs):
        check = build_check(iid, kw)
        strict = bool(response.strip()) and check(response)
        loose = strict or any(check(r) for r in readings)
        verdicts.append(InstructionVerdict(id=iid, strict=bool(strict), loose=bool(loose)))
    return IfevalVerdict(instructions=verdicts, prompt_strict=all(v.strict for v in verdicts),
                         prompt_loose=all(v.loose for v in verdicts))


def summarize(verdicts: Sequence[IfevalVerdict]) -> dict:
    """The suite figures: prompt- and instruction-level accuracy, strict and loose (0..1;
    0.0 over nothing), with the counts they are over."""
    prompts = len(verdicts)
    flat = [i for v in verdicts for i in v.instructions]

    def share(passed: int, total: int) -> float:
        return passed / total if total else 0.0

    return {
        "ifeval_prompt_strict": share(sum(v.prompt_strict for v in verdicts), prompts),
        "ifeval_inst_strict": share(sum(i.strict for i in flat), len(flat)),
        "ifeval_prompt_loose": share(sum(v.prompt_loose for v in verdicts), prompts),
        "ifeval_inst_loose": share(sum(i.loose for i in flat), len(flat)),
        "prompts": prompts,
        "instructions": len(flat),
    }
