"""`sparkctl eval score`: score saved responses against a suite, no model involved.

Input: JSONL, one ``{"prompt": ..., "response": ...}`` per line (the IFEval reference's
input_response_data format). A prompt is matched to a suite item by its exact text (for
GSM8K the question, or the whole prompt sparkctl sends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from sparkctl.core.suites.tally import Tally, item_counts
from sparkctl.core.textfile import UnreadableFile, read_text
from sparkctl.services.evals.verdicts import score_item
from sparkctl.services.evals.suites import Suite, SuiteError


@dataclass(frozen=True)
class Rescored:
    suite: str
    summary: dict[str, float]
    samples: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "summary": self.summary, "samples": self.samples}


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def rescore(suite: Suite, lines: Iterable[str], origin: str) -> Rescored:
    """Score every line; an unknown prompt or a malformed line is a SuiteError naming it."""
    by_text = suite.by_text()
    tally = Tally(suite.name, 0)
    samples: list[dict[str, Any]] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SuiteError(f"{origin}:{no}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not isinstance(row.get("response"), str):
            raise SuiteError(f'{origin}:{no}: expected {{"prompt": "...", "response": "..."}}')
        item = by_text.get(row["prompt"])
        if item is None:
            raise SuiteError(f"{origin}:{no}: prompt not in the {suite.spec.title} suite: {_clip(row['prompt'])!r}")
        verdict = score_item(suite.name, item, row["response"])
        tally.add_answer(item_counts(suite.name, verdict))
        if suite.name == "ifeval":
            samples.append({"key": int(item.id) if item.id.isdigit() else item.id, "prompt": row["prompt"],
                            "instructions": verdict["instructions"]})
        else:
            samples.append({"prompt": row["prompt"], **verdict})
    if not samples:
        raise SuiteError(f"{origin}: no responses")
    tally.total = tally.done
    return Rescored(suite.name, tally.summary(), samples)


def rescore_file(suite: Suite, path: Path) -> Rescored:
    """`rescore` of a JSONL file; a file that cannot be read is a SuiteError naming it."""
    try:
        lines = read_text(path).splitlines()
    except UnreadableFile as exc:
        raise SuiteError(str(exc)) from None
    return rescore(suite, lines, str(path))
