"""TUI tests: text cursors do not blink, so a snapshot never depends on the moment it is
taken (Textual's own advice for snapshot tests)."""

from __future__ import annotations

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def _no_cursor_blink(monkeypatch):
    monkeypatch.setattr(Input, "cursor_blink", False)
