"""GSM8K scored by the rules of lm-evaluation-harness's ``gsm8k_cot_zeroshot`` task.

The rules (task YAML ``lm_eval/tasks/gsm8k/gsm8k-cot-zeroshot.yaml``, metadata version 3.0;
read at lm-evaluation-harness commit 4e7e0d47f33bc71070c1d38394bafbb52b117163 of 2026-08-21,
0.4.13.dev0, the newest on its main branch when this was last checked), written here from
their description, not copied. ``RULES_VERSION`` names them; every eval run records it, so
runs scored under other rules are never paired as one measurement. Read again on that
commit: the ignore list is still the four patterns below. A proposal to also drop a
trailing ``.0+`` ("18.00" = "18"; lm-evaluation-harness pull request 3254, commit ffacfc8c5)
exists only on a branch that main does not contain, so it is not applied here: a strict
score must stay the reference's.

- **strict-match**: the first match of ``The answer is (\\-?[0-9\\.\\,]+).`` in the response,
  its one group. Case matters, and the final ``.`` of that pattern is a regex dot: *any*
  character but a newline, so "The answer is 18" at the very end extracts "1" (the group
  gives back its last digit for the dot to eat) and "The answer is 7" at the end extracts
  nothing. There is no "#### N" fallback in this task: no match is "[invalid]".
- **flexible-extract**: every match of ``(-?[$0-9.,]{2,})|(-?[0-9]+)``; the *last* match,
  its first non-empty group ("$1,234.", "...", "-3" are all possible extractions).
- Both extractions are stripped of surrounding whitespace; no match gives "[invalid]".
- **exact_match** (lm-eval's reimplementation of HF evaluate's): on the extraction and on the
  gold (the whole ``answer`` field, ``doc_to_target: "{{answer}}"``), delete in turn every
  match of ``,`` then ``\\$`` then ``(?s).*#### `` then ``\\.$`` (so one trailing period,
  and everything up to the last "#### " of the gold), lower-case (``ignore_case: true``),
  keep punctuation (``ignore_punctuation: false``), then compare the strings exactly. No
  other stripping happens: "18.00" is not "18", "018" is not "18", "18.." is "18." and wrong.

Agreement with the reference is checked row by row on ``tests/data/gsm8k_dev`` (responses
scored by lm-eval itself). The generation side of the task (stop at ``LM_EVAL_UNTIL``,
greedy) is the caller's business; these functions score whatever text they are given.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sparkctl.core.suites import thinking

INVALID = "[invalid]"  # what lm-eval's regex filter gives when nothing matches

# the task's filter patterns (pattern, which match of findall to keep)
STRICT_PATTERN = re.compile(r"The answer is (\-?[0-9\.\,]+).")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")

# exact_match's regexes_to_ignore, applied in this order to both sides
IGNORE_PATTERNS = (re.compile(","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))

# the task's generation stop strings (generation_kwargs.until), for callers that want the
# engine to stop where lm-eval's would; the scoring below does not cut responses at them
LM_EVAL_UNTIL = ("Q:", "</s>", "<|im_end|>")

# Which rules score a run: the task, its metadata version and the lm-eval commit read, and
# how thinking is kept out of the scored text (thinking.py; before it, the whole text was scored).
RULES_VERSION = f"lm-eval gsm8k_cot_zeroshot v3.0 @4e7e0d47; {thinking.RULES_VERSION}"

_COT_ZEROSHOT = "Q: {question}\nA: Let's think step by step."
_FINISH = ('\nEnd your response with "The answer is N." where N is the final answer'
           " as a bare number, without units or a $ sign.")

# Prompt templates, by name. "sparkctl" (the default) asks for the phrase strict-match
# looks for; "lm-eval" is the task's own doc_to_text, unmodified, for scores that compare
# with published lm-eval numbers.
TEMPLATE_SPARKCTL = "sparkctl"
TEMPLATE_LM_EVAL = "lm-eval"
TEMPLATES: dict[str, str] = {TEMPLATE_SPARKCTL: _COT_ZEROSHOT + _FINISH, TEMPLATE_LM_EVAL: _COT_ZEROSHOT}


def template_sha256(name: str = TEMPLATE_SPARKCTL) -> str:
    """sha256 of a template's text, ``{question}`` placeholder included: recorded per run, so
    runs asked with different templates are never paired."""
    return hashlib.sha256(TEMPLATES[name].encode()).hexdigest()


def build_prompt(question: str, template: str = TEMPLATE_SPARKCTL) -> str:
    """The prompt for one question under ``template`` (a key of TEMPLATES).

    "sparkctl": lm-eval's zero-shot CoT prompt, plus one sentence asking for "The answer is N.".

    The first two lines are exactly lm-eval's ``doc_to_text``
    (``"Q: {question}\\nA: Let's think step by step."``). lm-eval's strict-match only accepts
    "The answer is N." (case-sensitive, no "$"), a phrase its few-shot variants teach by example
    but its zero-shot prompt never asks for, so on the bare prompt instruction-tuned models
    score near zero on strict whatever their arithmetic. The appended sentence asks for the
    phrase so strict measures answers rather than phrasing; the extraction and scoring rules
    are unchanged. Because of it, strict scores are not comparable with lm-eval runs of the
    unmodified task; flexible scores are closer but the prompt still differs.

    "lm-eval": the task's prompt exactly, so a score compares with a published zero-shot
    lm-eval figure (expect a low strict score from chat models, as lm-eval itself gives).
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown GSM8K prompt template {template!r}; expected one of {', '.join(TEMPLATES)}")
    return TEMPLATES[template].format(question=question)


def _normalise(text: str) -> str:
    """exact_match's view of one side: the ignore regexes, then lower case.

    lm-eval holds the strings in numpy fixed-width arrays, which drop trailing NULs and
    truncate a lower-cased string that grew (only "İ" does) to the original width; both are
    mirrored so the comparison is the reference's even on odd input.
    """
    for pattern in IGNORE_PATTERNS:
        text = pattern.sub("", text).rstrip("\x00")
    return text.lower()[: len(text)].rstrip("\x00")


def gold_answer(answer_field: str) -> str:
    """The gold as exact_match sees it: the text after the last "#### ", without "," and "$",
    one trailing "." dropped, lower-cased ("#### 1,234" -> "1234")."""
    return _normalise(answer_field)


def _extract(pattern: re.Pattern[str], response: str, which: int) -> str:
    matches = pattern.findall(response if isinstance(response, str) else "")
    if not matches:
        return INVALID
    found = matches[which]
    if isinstance(found, tuple):  # several groups: the first that matched something
        found = next((g for g in found if g), INVALID)
    return found.strip()


def extract_strict(response: str) -> str:
    return _extract(STRICT_PATTERN, response, 0)


def extract_flexible(response: str) -> str:
    return _extract(FLEXIBLE_PATTERN, response, -1)


@dataclass(frozen=True, slots=True)
class Gsm8kVerdict:
    strict: str  # what strict-match extracted (before normalising), or "[invalid]"
    flexible: str  # what flexible-extract extracted, or "[invalid]"
    strict_ok: bool
    flexible_ok: bool


def score_response(response: str, gold: str) -> Gsm8kVerdict:
    """Both of the task's verdicts for one response; ``gold`` is ``gold_answer(answer)``."""
    strict = extract_strict(response)
    flexible = extract_flexible(response)
    return Gsm8kVerdict(strict=strict, flexible=flexible,
                        strict_ok=_normalise(strict) == gold, flexible_ok=_normalise(flexible) == gold)


def summarize(verdicts: Iterable[Gsm8kVerdict]) -> dict[str, float | int]:
    """Mean of each verdict over the items (lm-eval's ``aggregation: mean``); 0.0 when there are none."""
    items = strict = flexible = 0
    for v in verdicts:
        items += 1
        strict += bool(v.strict_ok)
        flexible += bool(v.flexible_ok)
    return {"gsm8k_strict": strict / items if items else 0.0,
            "gsm8k_flexible": flexible / items if items else 0.0,
            "items": items}
