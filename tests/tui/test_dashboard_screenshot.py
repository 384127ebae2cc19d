"""The README's picture of the dashboard (docs/img/dashboard.svg) is made by
scripts/dashboard_screenshot.py from the FAKE Ollama and FAKE Spark probes. The script still
renders, and the committed picture shows what the dashboard draws today: when the dashboard
changes, this fails until the picture is made again."""

from __future__ import annotations

import importlib.util
import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "dashboard_screenshot.py"
COMMITTED = REPO / "docs" / "img" / "dashboard.svg"


def load_script():
    spec = importlib.util.spec_from_file_location("dashboard_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def screen_text(svg: str) -> list[str]:
    """The characters on screen, row by row (Textual writes one <text> per run of a style)."""
    ET.fromstring(svg)  # well-formed, or a browser shows nothing
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, body in re.findall(r'<text[^>]*\bx="([\d.]+)"[^>]*\by="([\d.]+)"[^>]*>(.*?)</text>', svg, re.S):
        rows.setdefault(float(y), []).append((float(x), unescape(re.sub(r"<[^>]+>", "", body))))
    return ["".join(t for _x, t in sorted(parts)).replace("\xa0", " ").rstrip() for _y, parts in sorted(rows.items())]


async def test_the_script_renders_the_dashboard_and_the_committed_picture_is_current(tmp_path):
    script = load_script()
    out = await script.render(tmp_path / "dashboard.svg")
    fresh = screen_text(out.read_text(encoding="utf-8"))
    text = "\n".join(fresh)
    assert "gpt-oss:120b" in text and "production" in text and "Unified memory" in text
    assert "http://127.0.0.1:11434" in text and "127.0.0.1:4" not in text  # the usual address, not the fake's port
    assert COMMITTED.is_file(), "docs/img/dashboard.svg is missing: run scripts/dashboard_screenshot.py"
    assert screen_text(COMMITTED.read_text(encoding="utf-8")) == fresh, \
        "the dashboard changed: run `.venv/bin/python scripts/dashboard_screenshot.py` and commit docs/img/dashboard.svg"
