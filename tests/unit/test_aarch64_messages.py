"""scripts/check_aarch64_wheels.py names why an sdist did not build: pip's own error line,
not its closing "note: This error originates from a subprocess" (all an H200 box without
network showed, where the real cause was that setuptools could not be fetched)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_aarch64_wheels.py"


def load():
    spec = importlib.util.spec_from_file_location("check_aarch64_wheels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reason_is_pips_error_line_not_its_closing_note():
    stderr = ("  error: subprocess-exited-with-error\n\n"
              "  x pip subprocess to install build dependencies did not run successfully.\n"
              "  | exit code: 1\n"
              "  > ERROR: Could not find a version that satisfies the requirement setuptools>=61\n"
              "ERROR: No matching distribution found for setuptools>=61\n\n"
              "note: This error originates from a subprocess, and is likely not a problem with pip.\n")
    assert load().pip_error(stderr) == "ERROR: No matching distribution found for setuptools>=61"


def test_without_an_error_line_the_last_line_that_says_something():
    assert load().pip_error("building wheel\nfailed: gcc not found\nhint: see above\n") == "failed: gcc not found"
    assert load().pip_error("") == "no wheel came out"
