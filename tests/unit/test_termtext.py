"""core/termtext.py: escape sequences from other processes go whole; the text around them,
any script included, stays as it was."""

from __future__ import annotations

import pytest

from sparkctl.core.termtext import safe_line, safe_text, safe_tree


@pytest.mark.parametrize("raw, shown", [
    ("qwen3:8b", "qwen3:8b"),
    ("a\x1b]0;window title\x07b", "ab"),  # OSC 0, ended by BEL
    ("a\x1b]52;c;ZWNobyBoaQ==\x1b\\b", "ab"),  # OSC 52 (clipboard), ended by ST
    ("x\x1b[2Jy\x1b[1;31mz\x1b[0m", "xyz"),  # CSI: clear screen, colours
    ("before\x1b]0;never ended", "before"),  # a terminal would swallow the rest
    ("p\x9b2Jq\x9d0;t\x9cr", "pqr"),  # the 8-bit C1 forms of CSI and OSC
    ("r\x1bcS\x1b(Bt", "rSt"),  # ESC c (reset), a charset switch
    ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
    ("over\rwrite\x08\x00\x7f", "overwrite"),  # CR, BS, NUL, DEL
    ("lines\nand\ttabs", "lines\nand\ttabs"),
    ("ünïcødé 😀 中文 — ok", "ünïcødé 😀 中文 — ok"),
])
def test_escape_sequences_and_controls_go_and_nothing_else(raw, shown):
    assert safe_text(raw) == shown
    assert safe_text(safe_text(raw)) == shown


def test_one_line_and_json_trees():
    assert safe_line("a\nb\tc\x1b[2J") == "a b c"
    assert safe_tree({"n\x1b[2J": ["x\x07", 1, None, {"k": "v\x1b]0;t\x07"}]}) == {"n": ["x", 1, None, {"k": "v"}]}
    assert safe_text(None) == "" and safe_text(12) == "12"
