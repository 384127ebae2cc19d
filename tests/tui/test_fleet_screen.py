"""The fleet screen over REAL ssh (Debian's sshd on loopback, tests/integration/sshd.py) to
two sparkctl installs (wrapper scripts running this sparkctl), each pointed at a FAKE
Ollama (testkit/fakes/ollama_server.py, real HTTP). The local app's own engine and probes
are FAKES too (a GB10 Spark)."""

from __future__ import annotations

import asyncio
import subprocess
import time

from textual.widgets import DataTable

from sparkctl.config import load_config
from sparkctl.engines.ollama import OllamaEngine
from sparkctl.tui.app import make_app
from testkit.fakes.host import FakeProbes, spark_snapshot
from testkit.fakes.ollama_server import FakeOllama, default_state, two_models_resident
from tests.integration.sshd import lab  # noqa: F401  (the fixture)
from tests.integration.test_fleet import fleet_config, install


def cells(app, name: str) -> dict[str, str]:
    table = app.screen.query_one("#fleet", DataTable)
    row = table.get_row(name)
    keys = [c.key.value for c in table.ordered_columns]
    return {k: str(v) for k, v in zip(keys, row)}


async def wait_for(pilot, predicate, timeout: float):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():
            return loop.time()
        await pilot.pause(0.05)
    raise AssertionError(f"condition not reached in {timeout} s")


async def test_the_live_host_shows_within_2_s_while_the_other_is_down_and_enter_opens_it(lab, tmp_path):
    sshd_a, sshd_b = lab.server("a"), lab.server("b")
    lab.alias("spark-a", sshd_a)
    lab.alias("spark-b", sshd_b)
    fake_a, fake_b = FakeOllama(two_models_resident()).start(), FakeOllama(default_state()).start()
    local = FakeOllama(default_state()).start()
    try:
        a = install(tmp_path, "a", fake_a.url, {"production": "gpt-oss:120b"})
        b = install(tmp_path, "b", fake_b.url)
        path = fleet_config(tmp_path / "fleet.toml", lab, {"spark-a": {"sparkctl": str(a)},
                                                           "spark-b": {"sparkctl": str(b)}},
                            timeout_s=20, refresh_s=1)
        cfg = load_config(str(path), state=None)
        # what one ask costs on this machine now (ssh login + sparkctl's start-up there)
        t0 = time.monotonic()
        subprocess.run(["ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes", "--", "spark-a",
                        f"{a} status --json"], capture_output=True, check=False, timeout=60)
        one_ask = time.monotonic() - t0
        sshd_b.stop()  # spark-b is down when the fleet opens
        app = make_app(cfg, engine=OllamaEngine(local.url, timeout=3.0), probes=FakeProbes(spark_snapshot()),
                       recorder=lambda r: None)
        app.animation_level = "none"
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("F")
            opened = asyncio.get_running_loop().time()
            seen = await wait_for(pilot, lambda: app.current_mode == "fleet" and app.screen.query("#fleet")
                                  and app.screen.query_one("#fleet", DataTable).row_count == 2
                                  and cells(app, "spark-a")["state"] == "live", timeout=10)
            live_after = seen - opened
            row_a = cells(app, "spark-a")
            assert "gpt-oss:120b [production]" in row_a["models"] and row_a["seen"] == "now"
            await wait_for(pilot, lambda: cells(app, "spark-b")["state"] == "unreachable", timeout=10)
            row_b = cells(app, "spark-b")
            assert row_b["warnings"].endswith(": Connection refused") and row_b["seen"] == "never"
            table = app.screen.query_one("#fleet", DataTable)
            table.move_cursor(row=table.get_row_index("spark-b"))
            await pilot.pause(0.1)  # the line under the table: the whole reason
            detail = str(app.screen.query_one("#fleet-detail").render())
            assert f"unreachable: ssh: connect to host 127.0.0.1 port {sshd_b.port}: Connection refused" in detail
            # within 2 s; on a machine so busy that one ask alone takes most of that, within
            # that ask and half a second: the fleet adds no wait of its own, down host or not
            limit = max(2.0, one_ask + 0.5)
            assert live_after <= limit, f"spark-a live {live_after:.2f} s after the fleet opened (one ask {one_ask:.2f} s)"

            # spark-b comes up, answers, then goes away in the middle of the refreshes
            sshd_b.start(lab.sshd_bin)
            await wait_for(pilot, lambda: cells(app, "spark-b")["state"] == "live", timeout=15)
            sshd_b.stop()
            await wait_for(pilot, lambda: cells(app, "spark-b")["state"] == "unreachable", timeout=15)
            row_b = cells(app, "spark-b")
            assert row_b["seen"].endswith(" ago")  # its last known state, and how old it is
            assert row_b["memory"] != "-"  # still shown, from that state
            assert cells(app, "spark-a")["state"] == "live"

            # Enter on spark-a: its dashboard, read-only
            table = app.screen.query_one("#fleet", DataTable)
            table.move_cursor(row=table.get_row_index("spark-a"))
            await pilot.press("enter")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "HostDashboardScreen", timeout=5)
            resident = app.screen.query_one("#resident", DataTable)
            await wait_for(pilot, lambda: resident.row_count == 2, timeout=5)
            names = {str(resident.get_row_at(i)[0]) for i in range(resident.row_count)}
            assert names == {"gpt-oss:120b", "qwen3:30b-a3b"}  # spark-a's models, not the local engine's
            assert "read-only" in app.screen.sub_title
            await pilot.press("l")  # the local dashboard's Lanes key does nothing here
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "HostDashboardScreen"
            await pilot.press("escape")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "FleetScreen", timeout=5)
        print(f"spark-a live {live_after:.2f} s after the fleet screen opened (one ssh ask alone: {one_ask:.2f} s)")
    finally:
        for f in (fake_a, fake_b, local):
            f.stop()


async def test_r_reads_the_config_s_hosts_again(lab, tmp_path):
    """Issue 30: a host added to (or removed from) the config while the fleet screen is open
    appeared only after a restart; r re-read nothing but the hosts' status."""
    sshd_a, sshd_b = lab.server("a"), lab.server("b")
    lab.alias("spark-a", sshd_a)
    lab.alias("spark-b", sshd_b)
    fake_a, fake_b, local = (FakeOllama(two_models_resident()).start(), FakeOllama(default_state()).start(),
                             FakeOllama(default_state()).start())
    try:
        a = install(tmp_path, "a", fake_a.url, {"production": "gpt-oss:120b"})
        b = install(tmp_path, "b", fake_b.url)
        path = fleet_config(tmp_path / "fleet.toml", lab, {"spark-a": {"sparkctl": str(a)}}, refresh_s=1)
        app = make_app(load_config(str(path), state=None), engine=OllamaEngine(local.url, timeout=3.0),
                       probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
        app.animation_level = "none"
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("F")
            await wait_for(pilot, lambda: app.current_mode == "fleet" and app.screen.query("#fleet")
                           and app.screen.query_one("#fleet", DataTable).row_count == 1, timeout=10)
            table = app.screen.query_one("#fleet", DataTable)
            fleet_config(path, lab, {"spark-a": {"sparkctl": str(a)}, "spark-b": {"sparkctl": str(b)}}, refresh_s=1)
            await pilot.press("r")
            await wait_for(pilot, lambda: table.row_count == 2, timeout=10)
            await wait_for(pilot, lambda: cells(app, "spark-b")["state"] == "live", timeout=20)
            fleet_config(path, lab, {"spark-b": {"sparkctl": str(b)}}, refresh_s=1)  # spark-a removed
            await pilot.press("r")
            await wait_for(pilot, lambda: table.row_count == 1 and table.get_row_index("spark-b") == 0, timeout=10)
            await pilot.pause(1.5)  # a refresh later: nothing of spark-a comes back
            assert table.row_count == 1 and set(app.screen.views) == {"spark-b"}
    finally:
        for f in (fake_a, fake_b, local):
            f.stop()


async def test_a_config_error_on_r_is_shown_with_its_secrets_redacted(tmp_path):
    """Review of issue 30: r on a config that no longer reads showed the error as it came,
    with a password from a URL in the bad value; the CLI redacts the same line. No host is
    asked here; the local engine is the FAKE Ollama."""
    from textual.widgets import Label

    from tests.tui.screen_text import screen_text

    local = FakeOllama(default_state()).start()
    try:
        path = tmp_path / "sparkctl.toml"
        path.write_text(f'[engine]\nhost = "{local.url}"\n')
        app = make_app(load_config(str(path), state=None), engine=OllamaEngine(local.url, timeout=3.0),
                       probes=FakeProbes(spark_snapshot()), recorder=lambda r: None)
        app.animation_level = "none"
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("F")
            await wait_for(pilot, lambda: app.current_mode == "fleet" and app.screen.query("#fleet-status"),
                           timeout=10)
            path.write_text(f'[engine]\nhost = "{local.url}"\nkind = "x http://admin:hunter2@spark"\n')
            await pilot.press("r")
            status = app.screen.query_one("#fleet-status", Label)
            await wait_for(pilot, lambda: "hosts not re-read" in str(status.render()), timeout=10)
            shown = str(status.render())
            assert "hunter2" not in shown and "hunter2" not in screen_text(app)
            assert "[engine] kind: expected one of 'ollama', got 'x http://***@spark'" in shown, shown
    finally:
        local.stop()
