"""A screen out of sight does nothing: the dashboard behind the Models screen is not
restyled and laid out every refresh for nobody to see, and shows the engine as it is now
the moment it comes back; a fleet host's dashboard stops asking that host while another
screen is in front. FAKE Ollama (real HTTP, Ollama's wire format) and FAKE host probes (a
GB10 Spark, which this box is not)."""

from __future__ import annotations

import asyncio

from sparkctl.tui.screens.dashboard import DashboardScreen
from tests.tui.test_dashboard import app_for, fake, table_rows, wait_for  # noqa: F401  (fake: a fixture)


async def test_the_dashboard_behind_another_screen_waits_and_then_shows_what_changed(fake):  # noqa: F811
    app = app_for(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: len(table_rows(app)) == 2)
        dashboard = app.screen
        await pilot.press("m")
        await wait_for(pilot, lambda: not isinstance(app.screen, DashboardScreen))
        with fake.state.lock:
            fake.state.resident.pop("qwen3:30b-a3b")  # unloaded while the user looks at Models
        await wait_for(pilot, lambda: app.report is not None and len(app.report.rows) == 1)
        await pilot.pause(0.5)  # a few more refreshes
        shown = [str(c) for c in dashboard.query_one("#resident").get_column_at(0)]
        assert shown == ["gpt-oss:120b", "qwen3:30b-a3b"]  # not redrawn while out of sight
        await pilot.press("d")
        await pilot.pause(0.05)
        assert app.screen is dashboard
        assert [r[0] for r in table_rows(app)] == ["gpt-oss:120b"]  # drawn as the engine is now


async def test_quitting_as_the_first_frame_is_written_ends_cleanly(fake, monkeypatch):  # noqa: F811
    """ctrl+q the moment the dashboard appears: the history and the footer, mounted right
    after the first frame, are not mounted into a screen being torn down (that raised
    Textual's MountError: a traceback and exit status 1)."""
    from sparkctl.tui.app import SparkApp

    app = app_for(fake)
    monkeypatch.setattr(SparkApp, "first_frame_written", lambda self: self.exit())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
    assert app.return_code == 0


async def test_a_host_opened_from_the_fleet_is_not_asked_while_another_screen_is_in_front(fake, tmp_path):  # noqa: F811
    """A host's read-only dashboard asks that host over ssh every [fleet] refresh_s; with
    another mode in front (d: the local dashboard) it asked on for nobody to see. It pauses,
    and asks again at once when it is back. The fleet's asks are counted (no ssh here: the
    fleet has no hosts; the host screen is opened on one by name)."""
    from types import SimpleNamespace

    from sparkctl.config import Config, FleetConfig
    from sparkctl.tui.screens.fleet import FleetScreen, HostDashboardScreen

    app = app_for(fake, cfg=Config(fleet=FleetConfig(refresh_s=1.0)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
        fleet = app.screen
        asked: list[float] = []
        fleet.ask_hosts = lambda names=None: asked.append(asyncio.get_running_loop().time())
        app.push_screen(HostDashboardScreen("spark-a", fleet, SimpleNamespace(status=None)))
        await wait_for(pilot, lambda: len(asked) >= 2, timeout=5)  # at once, then each second
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen)
                       and not isinstance(app.screen, HostDashboardScreen))
        before = len(asked)
        await pilot.pause(2.5)
        assert len(asked) == before  # nobody sees it: not asked
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen))
        await wait_for(pilot, lambda: len(asked) >= before + 2, timeout=5)  # at once, then each second again
