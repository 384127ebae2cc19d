"""`sparkctl serve` end to end in a REAL browser: headless Chromium (Debian's `chromium`,
installed by `make test`'s set-up) opens the page, textual-serve starts a real `sparkctl`
process for the tab, and the dashboard reaches the browser. The engine behind it is the
FAKE Ollama (testkit/fakes/ollama_server.py).

Chromium is driven over its DevTools protocol (one websocket to the browser, aiohttp as the
client, a flattened session per page). Each test opens its page in a fresh browser context,
so cookies never carry over from one test to the next. Before a page loads, a script records
every websocket message it receives, so a test reads the terminal output the browser got;
the Network domain records every request the page makes.

The browser runs with every host name but localhost resolving to nothing
(--host-resolver-rules), so a request for the internet fails at once instead of hanging, and
the recorded requests show whether the page asked for anything outside loopback.

"Another origin" is a page served by this test from another port of 127.0.0.1: the same
site, so the browser sends it the served page's SameSite=Strict cookie (SameSite ignores
ports); only the server's Origin check can stop its websocket.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import httpx
import pytest

from testkit.fakes.ollama_server import FakeOllama, bench_scenario

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

# The page on another origin: it opens the served TUI's websocket itself and frames the
# served page (whose own script would open it from the right origin).
OTHER_ORIGIN_PAGE = """<!DOCTYPE html><html><body>
<script>
  window.__attempt = {opened: false, closed: false, messages: 0};
  const ws = new WebSocket("ws://127.0.0.1:%(port)d/ws?width=80&height=24");
  ws.onopen = () => { window.__attempt.opened = true; };
  ws.onmessage = () => { window.__attempt.messages += 1; };
  ws.onclose = () => { window.__attempt.closed = true; };
</script>
<iframe src="http://127.0.0.1:%(port)d/" width="800" height="400"></iframe>
</body></html>"""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


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


def _printed_url(stderr: Path, proc: subprocess.Popen) -> str:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        found = re.search(r"serving the TUI at (\S+)", stderr.read_text())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            pytest.fail(f"sparkctl serve exited with {proc.returncode}: {stderr.read_text()}")
        time.sleep(0.1)
    pytest.fail("sparkctl serve printed no URL")


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The fake engine, `sparkctl serve` on it, a page on another origin, and Chromium."""
    chromium = _chromium()
    tmp = tmp_path_factory.mktemp("serve")
    fake = FakeOllama(bench_scenario(tokens_per_s=None)).start()
    config = tmp / "sparkctl.toml"
    config.write_text(f'[engine]\nhost = "{fake.url}"\n[lanes]\nproduction = "llama3.2:3b"\n')
    port = _free_port()
    out, err = tmp / "serve.out", tmp / "serve.err"
    serve = browser = None
    other = ThreadingHTTPServer(("127.0.0.1", 0), _other_origin_handler(port))
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with open(out, "wb") as out_fh, open(err, "wb") as err_fh:
            serve = subprocess.Popen([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve",
                                      "--port", str(port)], stdout=out_fh, stderr=err_fh,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        url = _printed_url(err, serve)
        _wait_http(f"http://127.0.0.1:{port}/", serve, "sparkctl serve")
        profile = tmp / "chromium-profile"
        browser = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             # IP literals go through the rules too: loopback's two names stay reachable
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1280,800", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        active = profile / "DevToolsActivePort"
        end = time.monotonic() + 30
        while not active.is_file() or not active.read_text().strip():
            assert time.monotonic() < end, "chromium did not open its DevTools port"
            assert browser.poll() is None, f"chromium exited with {browser.returncode}"
            time.sleep(0.1)
        yield SimpleNamespace(url=url, port=port, other_url=f"http://127.0.0.1:{other.server_address[1]}/",
                              cdp_port=int(active.read_text().split()[0]), folder=tmp, out=out, err=err)
    finally:
        _stop(browser)
        _stop(serve)
        other.shutdown()
        fake.stop()


def _other_origin_handler(port: int):
    body = (OTHER_ORIGIN_PAGE % {"port": port}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    return Handler


class Browser:
    """The few DevTools calls the tests need, over one websocket to the browser: replies
    are matched to calls by id, events are kept (with their session) for the tests to read."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0
        self.replies: dict[int, asyncio.Future] = {}
        self.events: list[dict] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.replies:
                self.replies.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def call(self, method: str, session: str | None = None, **params):
        self.next_id += 1
        mine = self.next_id
        self.replies[mine] = asyncio.get_running_loop().create_future()
        message = {"id": mine, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await self.ws.send_json(message)
        reply = await asyncio.wait_for(self.replies[mine], 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def new_page(self) -> "Page":
        """A page in a browser context of its own (no cookies from another test)."""
        context = (await self.call("Target.createBrowserContext"))["browserContextId"]
        target = (await self.call("Target.createTarget", url="about:blank", browserContextId=context))["targetId"]
        session = (await self.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        page = Page(self, session)
        await page.call("Page.enable")
        await page.call("Network.enable")
        await page.call("Page.addScriptToEvaluateOnNewDocument", source=RECORDER)
        return page


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    async def call(self, method: str, **params):
        return await self.browser.call(method, session=self.session, **params)

    def events(self, method: str) -> list[dict]:
        return [e["params"] for e in self.browser.events
                if e.get("sessionId") == self.session and e["method"] == method]

    async def value(self, expression: str):
        got = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return got["result"].get("value")

    async def open(self, url: str) -> None:
        loads = len(self.events("Page.loadEventFired"))
        went = await self.call("Page.navigate", url=url)
        assert "errorText" not in went, (url, went)
        end = time.monotonic() + 30
        while len(self.events("Page.loadEventFired")) == loads:
            assert time.monotonic() < end, f"{url} did not finish loading"
            await asyncio.sleep(0.2)

    async def frames_until(self, text: str, timeout: float = 90.0) -> str:
        end = time.monotonic() + timeout
        got = ""
        while time.monotonic() < end:
            got = "".join(json.loads(await self.value("JSON.stringify(window.__frames || [])")))
            if text in got:
                return got
            await asyncio.sleep(0.5)
        return got


async def _with_browser(cdp_port: int, scenario):
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{cdp_port}/json/version") as resp:
            endpoint = json.loads(await resp.text())["webSocketDebuggerUrl"]
        async with http.ws_connect(endpoint, max_msg_size=0) as ws:
            browser = Browser(ws)
            try:
                return await scenario(browser)
            finally:
                browser.reader.cancel()


def _outside_loopback(urls: list[str]) -> list[str]:
    out = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            continue
        if parts.hostname not in LOOPBACK_HOSTS:
            out.append(url)
    return out


def test_the_tokened_url_shows_the_dashboard_with_nothing_from_outside_loopback(site):
    async def scenario(browser: Browser):
        page = await browser.new_page()
        await page.open(site.url)
        text = await page.frames_until("Resident models")
        await asyncio.sleep(1.0)  # let the terminal paint before the screenshot
        shot = site.folder / "serve-dashboard.png"
        shot.write_bytes(base64.b64decode((await page.call("Page.captureScreenshot", format="png"))["data"]))
        fonts = await page.value("[...document.fonts].filter(f => f.family.includes('Roboto Mono'))"
                                 ".map(f => f.style + ':' + f.status)")
        requests = [e["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        sockets = [e["url"] for e in page.events("Network.webSocketCreated")]
        return text, shot, fonts, requests, sockets

    text, shot, fonts, requests, sockets = asyncio.run(_with_browser(site.cdp_port, scenario))
    assert "Memory budget" in text and "Resident models" in text, text[-2000:]
    assert "sparkctl" in text
    assert shot.stat().st_size > 10_000  # a rendered page, kept for a person to look at
    # no request (page, style, script, font, websocket) left this machine's loopback...
    assert requests and sockets, (requests, sockets)
    assert _outside_loopback(requests + sockets) == []
    # ...and the terminal font is the served copy, not the system's fallback
    assert any("/static/fonts/RobotoMono-VariableFont_wght.ttf" in url for url in requests), requests
    assert "normal:loaded" in fonts, fonts
    # the access log shows the first request, with its token redacted
    assert "?token=" in site.url
    token = site.url.split("token=", 1)[1]
    log = site.out.read_text(errors="replace") + site.err.read_text(errors="replace")
    assert log.count(token) == 1  # the line that printed the URL to open, and nothing else
    assert "token=***" in log


def test_a_url_without_the_token_or_with_a_wrong_one_is_refused(site):
    async def scenario(browser: Browser):
        seen = []
        for url in (f"http://127.0.0.1:{site.port}/", f"http://127.0.0.1:{site.port}/?token=not-the-token",
                    f"http://localhost:{site.port}/static/js/textual.js"):
            page = await browser.new_page()
            await page.open(url)
            statuses = [e["response"]["status"] for e in page.events("Network.responseReceived")
                        if e["type"] == "Document"]
            seen.append((url, statuses, await page.value("document.body.innerText"),
                         page.events("Network.webSocketCreated")))
        return seen

    for url, statuses, body, sockets in asyncio.run(_with_browser(site.cdp_port, scenario)):
        assert statuses == [403], (url, statuses)
        assert "open the URL that `sparkctl serve` printed" in body, (url, body)
        assert sockets == [], url


def test_a_page_from_another_origin_cannot_open_the_websocket(site):
    async def scenario(browser: Browser):
        page = await browser.new_page()
        # the user opened the TUI in this browser: the cookie is there, the TUI works...
        await page.open(site.url)
        assert "Resident models" in await page.frames_until("Resident models")
        before = len(page.events("Network.webSocketHandshakeResponseReceived"))
        # ...then visits another page on this machine, which tries the websocket itself and
        # through a frame of the served page
        await page.open(site.other_url)
        end = time.monotonic() + 20
        while not (await page.value("window.__attempt.closed")) and time.monotonic() < end:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)  # time for the framed page to try as well
        attempt = await page.value("window.__attempt")
        handshakes = [e["response"]["status"] for e in
                      page.events("Network.webSocketHandshakeResponseReceived")[before:]]
        tried = [e["url"] for e in page.events("Network.webSocketCreated")]
        return attempt, handshakes, tried

    attempt, handshakes, tried = asyncio.run(_with_browser(site.cdp_port, scenario))
    assert any(f"127.0.0.1:{site.port}/ws" in url for url in tried), tried  # it did try
    assert attempt == {"opened": False, "closed": True, "messages": 0}, attempt
    assert 101 not in handshakes, handshakes


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
    assert re.search(rf"serving the TUI at http://0\.0\.0\.0:{port}/\?token=[\w-]{{40,}} ", second), second
    bad = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve", "--port", "0"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.strip() == "sparkctl: --port must be 1-65535, not 0"
    bad = subprocess.run([sys.executable, "-m", "sparkctl.cli", "--config", str(config), "serve",
                          "--public-url", "spark.example.com:8000"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "sparkctl: --public-url must be an http:// or https:// URL, not 'spark.example.com:8000'")
