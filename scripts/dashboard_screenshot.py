"""Regenerate docs/img/dashboard.svg, the README's picture of the dashboard.

The dashboard runs headless against the FAKE Ollama of the tests (testkit/fakes/ollama_server.py:
gpt-oss:120b on the production lane, qwen3:30b-a3b split between CPU and GPU) and FAKE probes
of a GB10 Spark, with a pinned clock and one sample, and Textual saves what it drew as SVG.
So the picture is what the code draws today, not a hand-made mock-up; a test
(tests/tui/test_dashboard_screenshot.py) renders it again so it cannot silently break.

    .venv/bin/python scripts/dashboard_screenshot.py [OUT.svg] [--size 120x36]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "docs" / "img" / "dashboard.svg"
DEFAULT_SIZE = (120, 32)
SHOWN_HOST = "http://127.0.0.1:11434"  # Ollama's usual address, shown instead of the fake's free port
FIXED = datetime(2030, 1, 1, tzinfo=timezone.utc)  # past the fake's expiries: "Until" reads the same every time


async def render(out: Path, size: tuple[int, int] = DEFAULT_SIZE) -> Path:
    """Draw the dashboard once and save it as SVG at OUT; returns OUT."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # testkit.fakes, when run as a script
    from sparkctl.engines.ollama import OllamaEngine
    from sparkctl.tui.app import make_app
    from testkit.fakes.host import FakeProbes, spark_snapshot
    from testkit.fakes.model_scenarios import spark_config
    from testkit.fakes.ollama_server import FakeOllama, two_models_resident

    state = two_models_resident()
    for resident in state.resident.values():
        if resident.name == "qwen3:30b-a3b":  # a contender loaded for 30 minutes, 23 left at the pinned clock
            resident.expires_at_ns = int((FIXED.timestamp() + 23 * 60) * 1e9)
    server = FakeOllama(state).start()
    try:
        cfg = spark_config()
        cfg = dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, host=server.url),
                                  ui=dataclasses.replace(cfg.ui, refresh_s=3600, history_s=60))
        engine = OllamaEngine(server.url, timeout=5.0, connect_timeout=2.0)
        app = make_app(cfg, engine=engine, probes=FakeProbes(spark_snapshot()), clock=lambda: FIXED,
                       user_theme_dir=out.parent / ".no-user-themes", recorder=lambda r: None)
        app.animation_level = "none"
        async with app.run_test(size=size) as pilot:
            loop = asyncio.get_running_loop()
            end = loop.time() + 20
            table = app.screen.query_one("#resident")
            while table.row_count < 2:  # both resident models are in the table (sampled in threads)
                if loop.time() > end:
                    raise RuntimeError("the dashboard did not show the fake engine's models within 20 s")
                await pilot.pause(0.1)
            await app.workers.wait_for_complete()
            await pilot.pause()  # idle: the table has measured its columns for the rows
            await pilot.pause(0.3)
            svg = app.export_screenshot()
    finally:
        server.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_usual_address(svg, server.port), encoding="utf-8")
    return out


def _usual_address(svg: str, port: int) -> str:
    """The fake listens on a free port; the picture shows Ollama's usual one. Both are five
    digits (free ports come from the 32768-65535 range), so no column moves."""
    fake = f"127.0.0.1:{port}"
    if len(str(port)) != len("11434") or fake not in svg:
        raise RuntimeError(f"the fake's address {fake} cannot be swapped for {SHOWN_HOST} in the picture")
    svg = svg.replace(fake, SHOWN_HOST.removeprefix("http://"))
    # Textual names the picture's CSS classes after a hash of what it drew, fake port included:
    # one fixed name keeps a regenerated picture byte-identical when the dashboard did not change
    return re.sub(r"\bterminal-\d+", "terminal-dashboard", svg)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    p.add_argument("--size", default=f"{DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]}", help="columns x rows")
    args = p.parse_args(argv)
    cols, _, rows = args.size.partition("x")
    out = asyncio.run(render(args.out.resolve(), (int(cols), int(rows))))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
