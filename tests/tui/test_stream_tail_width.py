"""The streamed text fills the pane it is shown in: text that arrived before the panes were
laid out, or before the terminal was resized, is cut again at the pane's width (it was left
cut at 20 columns in a 50-column pane, a different picture from run to run)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from sparkctl.tui.widgets.stream_tail import StreamTail

SENTENCE = "Okay, the user asks about the sky and why it is blue at noon."


class _One(App):
    def compose(self) -> ComposeResult:
        yield StreamTail(id="tail")


def drawn(tail: StreamTail, rows: int) -> list[str]:
    return ["".join(seg.text for seg in tail.render_line(y)).rstrip() for y in range(rows)]


async def test_text_streamed_before_layout_is_cut_at_the_panes_width():
    app = _One()
    tail = StreamTail(id="early")
    for word in SENTENCE.split(" "):  # arrives while the view has no size yet
        tail.append(word + " ")
    tail.write_line("── next ──")
    async with app.run_test(size=(80, 8)) as pilot:
        await app.mount(tail)
        await pilot.pause()
        rows = drawn(tail, 8)
    assert rows[:2] == [SENTENCE, "── next ──"]


async def test_a_resize_cuts_the_rows_again_and_keeps_every_word():
    app = _One()
    async with app.run_test(size=(80, 10)) as pilot:
        tail = app.query_one(StreamTail)
        tail.append(SENTENCE + "\nsecond line")
        await pilot.pause()
        assert drawn(tail, 3)[:2] == [SENTENCE, "second line"]
        await pilot.resize_terminal(30, 10)
        await pilot.pause()
        narrow = [r for r in drawn(tail, 10) if r]
        assert max(len(r) for r in narrow) <= 28  # the pane's padding takes two columns
        assert " ".join(narrow).split() == (SENTENCE + " second line").split()
        await pilot.resize_terminal(80, 10)
        await pilot.pause()
        assert drawn(tail, 3)[:2] == [SENTENCE, "second line"]
        tail.append(" and more")  # the stream goes on where the row ends
        await pilot.pause()
        assert drawn(tail, 3)[1] == "second line and more"
