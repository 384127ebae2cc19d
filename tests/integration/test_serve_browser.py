"""`sparkctl serve` end to end in a REAL browser: headless Chromium (Debian's `chromium`,
installed by `make test`'s set-up) opens the page, textual-serve starts a real `sparkctl`
process for the tab, and the dashboard reaches the browser. The engine behind it is the
FAKE Ollama (tests/fakes/ollama_server.py).

Chromium is driven over its DevTools protocol (a websocket; aiohttp, which textual-serve
already brings, is the client): before the page loads, a script records every websocket
message the page receives, so the test reads the terminal output the browser got, and a
screenshot of the page is kept beside the test's files for a person to look at.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.ollama_server import FakeOllama, bench_scenario

# Every websocket frame the page receives, as text (binary frames decoded as UTF-8 with
# replacement), kept on window for the test to read.
RECORDER = """
(() => {
  window.__frames = [];
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new Native(...args);
    ws.addEventListener("message", async (ev) => {
      let data = ev.data;
      if (data instanceof Blob) data = new Uint8Array(await data.arrayBuffer());
      if (data instanceof ArrayBuffer) data = new Uint8Array(data);
      window.__frames.push(typeof data === "string" ? data : new TextDecoder("utf-8", {fatal: false}).decode(data));
    });
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "Debian's chromium is not installed (make test installs it where it can)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def _wait_http(url: str, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail(f"{what} did not answer at {url} within {timeout:.0f} s")


class DevTools:
    """The few DevTools calls the test needs, over one page's websocket."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params):
        self.next_id += 1
        mine = self.next_id
        await self.ws.send_json({"id": mine, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=30)
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})


@pytest.fixture
def fake():
    server = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    yield server
    server.stop()


def test_the_dashboard_reaches_a_real_browser(fake, tmp_path):
    chromium = _chromium()
    config = tmp_path / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{fake.url}"\n[lanes]\nproduction = "llama3.2:3b"\n')
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    serve = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve",
                              "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
    profile = tmp_path / "chromium-profile"
    browser = None
    try:
        _wait_http(f"http://127.0.0.1:{port}/", serve, "sparkctl serve")
        browser = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1280,800", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        active = profile / "DevToolsActivePort"
        end = time.monotonic() + 30
        while not active.is_file() or not active.read_text().strip():
            assert time.monotonic() < end, "chromium did not open its DevTools port"
            assert browser.poll() is None, f"chromium exited with {browser.returncode}"
            time.sleep(0.1)
        cdp_port = int(active.read_text().split()[0])
        frames, shot = asyncio.run(_drive(cdp_port, f"http://127.0.0.1:{port}/", tmp_path))
    finally:
        for proc in (browser, serve):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    text = "".join(frames)
    assert "Memory budget" in text and "Resident models" in text, text[-2000:]
    assert "sparkctl" in text
    assert shot.stat().st_size > 10_000  # a rendered page, kept for a person to look at


async def _drive(cdp_port: int, url: str, folder: Path) -> tuple[list[str], Path]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{cdp_port}/json/new?about:blank") as resp:
            target = json.loads(await resp.text())
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            dt = DevTools(ws)
            await dt.call("Page.enable")
            await dt.call("Page.addScriptToEvaluateOnNewDocument", source=RECORDER)
            await dt.call("Page.navigate", url=url)
            frames: list[str] = []
            end = time.monotonic() + 60
            while time.monotonic() < end:
                got = await dt.call("Runtime.evaluate", expression="JSON.stringify(window.__frames || [])",
                                    returnByValue=True)
                frames = json.loads(got["result"]["value"])
                if "Resident models" in "".join(frames):
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.0)  # let the terminal paint before the screenshot
            png = await dt.call("Page.captureScreenshot", format="png")
            shot = folder / "serve-dashboard.png"
            shot.write_bytes(base64.b64decode(png["data"]))
            return frames, shot


def test_any_host_but_loopback_is_spelled_out_and_warned_about(tmp_path):
    config = tmp_path / "sparkctl.toml"
    config.write_text("")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve",
                             "--host", "0.0.0.0", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = proc.stderr.readline()
        second = proc.stderr.readline()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    assert first.startswith("sparkctl: WARNING: serving on 0.0.0.0") and "controls the models" in first
    assert "serving the TUI at http://0.0.0.0:" in second
    bad = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve", "--port", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.strip() == "sparkctl: --port must be 1-65535, not 0"
