"""Where the tests find the real suite files: ../shared/suites beside the repo (GSM8K test
set and IFEval prompts with their licences; not in the repo). $SPARKCTL_TEST_SUITES points
elsewhere. Without them a test that needs them is skipped with the reason, except under
CI=true, where their absence is a failure (CI must run them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_suites() -> Path:
    override = os.environ.get("SPARKCTL_TEST_SUITES")
    folder = Path(override) if override else REPO.parent / "shared" / "suites"
    if not (folder / "gsm8k-test.jsonl").is_file() or not (folder / "ifeval-input.jsonl").is_file():
        message = f"suite data not found in {folder} (set SPARKCTL_TEST_SUITES)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return folder
