"""IFEval scoring by the rules of Google's instruction_following_eval (strict and loose,
prompt- and instruction-level), in our own code; agreement with the reference is proved on
tests/data/ifeval_dev by tests/unit/test_ifeval_scoring.py."""

from sparkctl.core.suites import thinking
from sparkctl.core.suites.ifeval.checkers import BUILDERS
from sparkctl.core.suites.ifeval.scoring import (
    IfevalVerdict,
    InstructionVerdict,
    loose_readings,
    score_response,
    summarize,
)

INSTRUCTION_IDS: tuple[str, ...] = tuple(BUILDERS)
# Which rules score a run (recorded per eval run): the reference's definitions as written
# in this package (a change to a checker's verdicts gets a new number), and how thinking is
# kept out of the scored text (thinking.py; before it, the whole text was scored).
RULES_VERSION = f"google instruction_following_eval, sparkctl checkers 1; {thinking.RULES_VERSION}"

__all__ = ["INSTRUCTION_IDS", "RULES_VERSION", "IfevalVerdict", "InstructionVerdict", "loose_readings",
           "score_response", "summarize"]
