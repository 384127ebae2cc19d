"""What an idle dashboard draws: only what changed on screen, and without laying the whole
screen out again for a figure. Real Textual widgets in a small app (the budget bar and the
history sparkline as the dashboard uses them); what is counted is Textual's own work: the
widget's repaints and the screen's layouts."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.screen import Screen

from sparkctl.core.budget import MemoryBudget, Pool, Segment
from sparkctl.core.snapshots import GIB
from sparkctl.tui.widgets import drift_gate
from sparkctl.tui.widgets.budget_bar import BudgetBar
from sparkctl.tui.widgets.history_sparkline import HistorySparkline


def budget(available_gib: float, claimed_gib: float | None = None) -> MemoryBudget:
    """A 121 GiB unified pool with one 68 GiB model; with `claimed_gib`, the note the budget
    makes when the engine claims more than the memory in use (core/budget.py)."""
    notes = ()
    if claimed_gib is not None:
        used = 121 - available_gib
        notes = (f"models claim {claimed_gib:.1f} GiB but only {used:.1f} GiB of memory is in use "
                 f"({claimed_gib - used:.1f} GiB more)",)
    free = int((available_gib - 10) * GIB)
    return MemoryBudget(Pool.UNIFIED, 121 * GIB, int(available_gib * GIB), 8 * GIB, 16 * GIB,
                        (Segment("model", "qwen3:8b", 68 * GIB, "production"),
                         Segment("other", "other use", 121 * GIB - 68 * GIB - 10 * GIB - free),
                         Segment("cache", "reclaimable cache", 10 * GIB), Segment("free", "free", free)),
                        notes)


class Counting(App):
    """The widget under test, and a count of its repaints and of the screen's layouts."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.widget = widget
        self.repaints = 0
        self.layouts = 0

    def compose(self):
        yield self.widget


@pytest.fixture
def counted(monkeypatch):
    def count(app: Counting):
        refresh, layout = type(app.widget).refresh, Screen._refresh_layout

        def counting_refresh(widget, *args, **kwargs):
            if widget is app.widget:
                app.repaints += 1
            return refresh(widget, *args, **kwargs)

        def counting_layout(screen, *args, **kwargs):
            app.layouts += 1
            return layout(screen, *args, **kwargs)

        monkeypatch.setattr(type(app.widget), "refresh", counting_refresh)
        monkeypatch.setattr(Screen, "_refresh_layout", counting_layout)

    return count


async def test_a_note_quoting_figures_drifts_with_them_instead_of_repainting_each_second(counted, monkeypatch):
    """The note's words are what it says; its numbers drift like the bar's own figures: a
    0.1 GiB move waits for the next few-second boundary instead of a repaint every sample."""
    clock = iter([1.0, 1.5, 2.0, 2.5, 3.0])  # seconds: all inside one 5 s drift window

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return next(clock)

    monkeypatch.setattr(drift_gate, "time", Clock)  # the gate's clock only
    app = Counting(BudgetBar())
    async with app.run_test(size=(140, 10)) as pilot:
        counted(app)
        app.widget.show(budget(60.0, claimed_gib=92.0))
        await pilot.pause()
        first = app.repaints
        for avail in (60.1, 60.2, 60.3, 60.2):
            app.widget.show(budget(avail, claimed_gib=92.0))
            await pilot.pause()
        assert app.repaints == first  # nothing new in kind, small drifts: wait


async def test_a_figure_that_moves_repaints_the_bar_without_laying_out_the_screen(counted):
    app = Counting(BudgetBar())
    async with app.run_test(size=(140, 10)) as pilot:
        app.widget.show(budget(60.0))
        await pilot.pause()
        counted(app)
        app.widget.show(budget(50.0))  # 10 GiB less available: shown at once
        await pilot.pause()
        assert "available 50.0 GiB" in app.widget.render().plain
        assert app.repaints == 1 and app.layouts == 0  # the bar's own lines, same height
        app.widget.show(budget(50.0))  # the same cells
        await pilot.pause()
        assert app.repaints == 1


async def test_new_samples_that_draw_the_same_bars_leave_the_sparkline_as_it_is(counted):
    spark = HistorySparkline([], bounds=(0.0, 121.0))
    spark.styles.height = 3
    spark.styles.width = 40
    app = Counting(spark)
    async with app.run_test(size=(60, 10)) as pilot:
        spark.data = [60.0] * 40
        await pilot.pause()
        counted(app)
        spark.data = [60.0] * 39 + [60.2]  # 0.2 GiB on a 121 GiB scale: the same bar, the same colour
        await pilot.pause()
        assert app.repaints == 0
        spark.data = [60.0] * 39 + [110.0]  # a column that grows: repainted
        await pilot.pause()
        assert app.repaints == 1


async def test_a_full_history_keeps_reaching_the_sparkline(monkeypatch):
    """The sparklines take new samples on the drift gates' shared boundary; once the
    history holds all it keeps (its length no longer grows) the new samples still reach
    them. The dashboard against the FAKE Ollama and FAKE host probes (a GB10 Spark), a
    history of 10 samples, and the gates' clock run ten times faster (a 5 s boundary every
    0.5 s)."""
    import time

    from sparkctl.config import Config, UiConfig
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tui.app import make_app
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.ollama_server import FakeOllama, two_models_resident
    from tests.tui.test_dashboard import wait_for

    class Faster:
        @staticmethod
        def monotonic() -> float:
            return time.monotonic() * 10

    monkeypatch.setattr(drift_gate, "time", Faster)
    server = FakeOllama(two_models_resident()).start()
    probes = FakeProbes(spark_snapshot(available_gib=61.0))
    try:
        app = make_app(Config(ui=UiConfig(refresh_s=0.05, history_s=0.5)), engine=OllamaEngine(server.url, timeout=3.0),
                       probes=probes, recorder=lambda r: None)
        async with app.run_test(size=(120, 40)) as pilot:
            spark = lambda: list(app.screen.query_one("#spark-mem", HistorySparkline).data or ())  # noqa: E731
            await wait_for(pilot, lambda: len(app.history_available) == app.history_available.maxlen
                           and spark() == [61.0] * app.history_available.maxlen)
            probes.snapshot = spark_snapshot(available_gib=12.0)  # a model loaded: 49 GiB gone
            await wait_for(pilot, lambda: spark()[-3:] == [12.0] * 3, timeout=5.0)
    finally:
        server.stop()


async def test_new_history_waits_for_the_frame_that_brings_the_other_drifts(monkeypatch):
    """Once drawn, the sparklines take new samples only when the drift gates' shared
    boundary passes (every 5 s), so their bars reach the screen in the frame that brings
    the budget's and the labels' drift instead of in a frame of their own. The dashboard
    against the FAKE Ollama and FAKE host probes (a GB10 Spark); the gates' clock is
    held still, then moved past the boundary."""
    from sparkctl.config import Config, UiConfig
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tui.app import make_app
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.ollama_server import FakeOllama, two_models_resident
    from tests.tui.test_dashboard import wait_for

    now = [1.0]

    class Still:
        @staticmethod
        def monotonic() -> float:
            return now[0]

    monkeypatch.setattr(drift_gate, "time", Still)
    server = FakeOllama(two_models_resident()).start()
    probes = FakeProbes(spark_snapshot(available_gib=61.0))
    try:
        app = make_app(Config(ui=UiConfig(refresh_s=0.05, history_s=2)), engine=OllamaEngine(server.url, timeout=3.0),
                       probes=probes, recorder=lambda r: None)
        async with app.run_test(size=(120, 40)) as pilot:
            spark = lambda: list(app.screen.query_one("#spark-mem", HistorySparkline).data or ())  # noqa: E731
            await wait_for(pilot, lambda: spark()[-1:] == [61.0])
            probes.snapshot = spark_snapshot(available_gib=12.0)
            await wait_for(pilot, lambda: list(app.history_available)[-10:] == [12.0] * 10)  # of 40 kept
            assert 12.0 not in spark()  # ten samples on, the same 5 s window: not drawn yet
            now[0] = 6.0  # the boundary passes
            await wait_for(pilot, lambda: 12.0 in spark())
    finally:
        server.stop()


async def test_a_note_that_wraps_differently_lays_the_bar_out_again():
    """Review of issue 32: the bar laid the screen out only when its number of lines
    changed; a note that grows by two characters wraps onto a second line in the same
    number of lines of text, and its end was cut off. The bar's height follows what it
    draws."""
    short, longer = budget(60.0, claimed_gib=92.0), budget(60.0, claimed_gib=192.0)
    probe = Counting(BudgetBar())
    async with probe.run_test(size=(200, 10)) as pilot:
        probe.widget.show(short)
        await pilot.pause()
        def note_width() -> int:
            return max(len(line) for line in probe.widget.render().plain.split("\n") if "models claim" in line)

        width = note_width() + 200 - probe.widget.content_size.width  # the note just fits
        probe.widget.show(longer)
        await pilot.pause()
        assert note_width() > width - (200 - probe.widget.content_size.width)

    async def height_after(*shown) -> int:
        app = Counting(BudgetBar())
        async with app.run_test(size=(width, 12)) as pilot:
            for b in shown:
                app.widget.show(b)
                await pilot.pause()
                await pilot.pause()
            return app.widget.size.height

    fresh = await height_after(longer)
    assert await height_after(short, longer) == fresh > await height_after(short)
