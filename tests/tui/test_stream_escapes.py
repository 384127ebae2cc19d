"""A model's streamed answer is drawn as text: Textual would hand an escape sequence in it
to the terminal (measured: an OSC title and a CSI 2J in a Log line both reached it)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from sparkctl.tui.widgets.stream_tail import StreamTail


class _One(App):
    def compose(self) -> ComposeResult:
        yield StreamTail(id="tail")


async def test_streamed_text_loses_escape_sequences_before_it_is_drawn():
    app = _One()
    async with app.run_test(size=(60, 8)) as pilot:
        tail = app.query_one(StreamTail)
        for piece in ("The answer", " is\x1b]0;PWNED\x07 42", "\x1b[2J.\n", "[error: boom\x1b]52;c;eA==\x07]"):
            tail.append(piece)
        tail.write_line("── next\x9b31m ──")
        await pilot.pause()
        drawn = "".join(seg.text for y in range(8) for seg in tail.render_line(y))
        assert "The answer is 42." in drawn and "── next ──" in drawn
        assert not any(ch in drawn for ch in "\x1b\x07\x9b") and "PWNED" not in drawn
