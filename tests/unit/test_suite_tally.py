"""Suite totals: DNF and engine errors count as not passed over all items and are left
out of the answered-only figures; IFEval's instruction-level metrics count instructions."""

import pytest

from sparkctl.core.suites.tally import Tally, item_counts


def gsm(ok: bool) -> dict:
    return {"strict_ok": ok, "flexible_ok": True}


def test_gsm8k_dnf_counts_against_all_items_only():
    t = Tally("gsm8k", 4)
    t.add_answer(item_counts("gsm8k", gsm(True)))
    t.add_answer(item_counts("gsm8k", gsm(False)))
    t.add_unanswered(1, dnf=True)
    t.add_unanswered(1, dnf=False)
    s = t.summary()
    assert s["gsm8k_strict"] == 0.25 and s["gsm8k_strict_answered"] == 0.5
    assert s["gsm8k_flexible"] == 0.5 and s["gsm8k_flexible_answered"] == 1.0
    assert (s["items"], s["answered"], s["dnf_count"], s["error_count"]) == (4, 2, 1, 1)
    acc, (lo, hi) = t.accuracy()
    assert acc == 0.25 and lo < 0.25 < hi


def test_ifeval_instruction_level_counts_instructions_and_dnf_forfeits_them():
    t = Tally("ifeval", 2)
    verdict = {"instructions": [{"id": "a", "strict": True, "loose": True},
                                {"id": "b", "strict": False, "loose": True}]}
    t.add_answer(item_counts("ifeval", verdict))
    t.add_unanswered(3, dnf=True)  # an item with three instructions did not finish
    s = t.summary()
    assert s["ifeval_prompt_strict"] == 0.0 and s["ifeval_prompt_loose"] == 0.5  # b failed strict
    assert s["ifeval_inst_strict"] == pytest.approx(1 / 5) and s["ifeval_inst_loose"] == pytest.approx(2 / 5)
    assert s["ifeval_inst_strict_answered"] == 0.5 and s["ifeval_prompt_loose_answered"] == 1.0


def test_before_any_item_there_is_no_accuracy():
    assert Tally("gsm8k", 10).accuracy() == (None, None)
    with pytest.raises(ValueError):
        Tally("mmlu", 1)
