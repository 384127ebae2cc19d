"""`sparkctl serve`'s locks, request by request, against the real aiohttp application the
command serves (sparkctl.web.server over textual-serve), through aiohttp's test client on
loopback. What a browser does with them is in test_serve_browser.py.

The websocket's command is `true`: a connection that gets through starts (and ends) a real
process, as the TUI would be started; these tests only look at whether the upgrade happens.
"""

from __future__ import annotations

import re

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from sparkctl.web.server import LockedServer

TOKEN = "k3Qx-per-launch-token-for-the-tests-0123456789"


@pytest.fixture
async def served():
    made: list[TestClient] = []

    async def serve(host: str = "127.0.0.1", public_url: str | None = None) -> tuple[LockedServer, TestClient]:
        server = LockedServer("true", host=host, port=8000, public_url=public_url, token=TOKEN)
        client = TestClient(TestServer(await server._make_app(), host="127.0.0.1"))
        await client.start_server()
        made.append(client)
        return server, client

    yield serve
    for client in made:
        await client.close()


def _cookie(server: LockedServer, value: str = TOKEN) -> dict[str, str]:
    return {"Cookie": f"{server.cookie_name}={value}"}


async def _upgrade_status(client: TestClient, headers: dict[str, str], origin: str | None) -> int:
    """101 when the websocket opened, else the status the server refused it with."""
    try:
        ws = await client.ws_connect("/ws?width=80&height=24", headers=headers, origin=origin)
    except aiohttp.WSServerHandshakeError as exc:
        return exc.status
    await ws.close()
    return 101


async def test_a_url_without_the_token_or_with_a_wrong_one_is_refused(served):
    server, client = await served()
    for path in ("/", "/?token=", "/?token=wrong", f"/?token={TOKEN[:-1]}", f"/?token={TOKEN}x",
                 "/static/js/textual.js", "/static/fonts/"):
        resp = await client.get(path)
        assert resp.status == 403, path
        assert "open the URL that `sparkctl serve` printed" in await resp.text()
        assert "Set-Cookie" not in resp.headers
    # a cookie with the wrong value (or another launch's name) opens nothing either
    assert (await client.get("/", headers=_cookie(server, "wrong"))).status == 403
    assert (await client.get("/", headers={"Cookie": f"sparkctl-00000000={TOKEN}"})).status == 403


async def test_the_tokened_url_gives_the_page_and_a_strict_cookie_that_opens_the_rest(served):
    server, client = await served()
    assert server.url == f"http://127.0.0.1:8000/?token={TOKEN}"
    resp = await client.get(f"/?token={TOKEN}")
    assert resp.status == 200
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith(f"{server.cookie_name}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http on loopback: a Secure cookie would never come back
    # the page holds the token in its URL: no Referer leaves it, and no other page may frame it
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
    # after the first load the cookie is enough, for the page and its files
    for path in ("/", "/static/js/textual.js", "/static/css/xterm.css",
                 "/static/fonts/RobotoMono-VariableFont_wght.ttf"):
        assert (await client.get(path, headers=_cookie(server))).status == 200, path


async def test_the_page_asks_for_nothing_outside_this_server(served):
    server, client = await served()
    port = client.port
    html = await (await client.get(f"/?token={TOKEN}")).text()
    urls = re.findall(r"""(?:src|href)="([^"]+)"|url\("([^"]+)"\)|data-session-websocket-url="([^"]+)\"""", html)
    found = [u for group in urls for u in group if u]
    assert len(found) >= 5, found  # font preload, stylesheet, two fonts, script, websocket
    for url in found:
        assert url.startswith((f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/")), url
    assert "googleapis" not in html and "https://" not in html
    assert f'href="http://127.0.0.1:{port}/static/fonts/RobotoMono-VariableFont_wght.ttf"' in html


async def test_the_websocket_opens_only_from_the_pages_own_origin(served):
    server, client = await served()
    port = client.port
    own = f"http://127.0.0.1:{port}"
    assert await _upgrade_status(client, _cookie(server), own) == 101
    # localhost and IPv6 loopback: the page's own origin is the name the browser used
    for host, origin in ((f"localhost:{port}", f"http://localhost:{port}"),
                         (f"[::1]:{port}", f"http://[::1]:{port}"),
                         (f"LocalHost:{port}", f"http://localhost:{port}")):
        assert await _upgrade_status(client, {**_cookie(server), "Host": host}, origin) == 101, host
    # a page on another local port has the cookie (SameSite ignores ports): the Origin stops it
    for origin in (f"http://127.0.0.1:{port + 1}", f"http://localhost:{port}", f"https://127.0.0.1:{port}",
                   "http://evil.example", "null", "file://", None):
        assert await _upgrade_status(client, _cookie(server), origin) == 403, origin
    assert await _upgrade_status(client, {**_cookie(server), "Host": f"[::1]:{port}"},
                                 f"http://127.0.0.1:{port}") == 403


async def test_the_websocket_needs_the_token_even_from_its_own_page(served):
    server, client = await served()
    own = f"http://127.0.0.1:{client.port}"
    assert await _upgrade_status(client, {}, own) == 403
    assert await _upgrade_status(client, _cookie(server, "wrong"), own) == 403


async def test_a_rebound_dns_name_is_refused_on_loopback_even_with_the_token(served):
    server, client = await served()
    port = client.port
    resp = await client.get(f"/?token={TOKEN}", headers={"Host": f"evil.example:{port}"})
    assert resp.status == 403 and "Host header" in await resp.text()
    assert await _upgrade_status(client, {**_cookie(server), "Host": f"evil.example:{port}"},
                                 f"http://evil.example:{port}") == 403
    # an address outside loopback was asked for: the names it is reached by are the user's
    server, client = await served(host="0.0.0.0")
    resp = await client.get(f"/?token={TOKEN}", headers={"Host": f"spark.lan:{client.port}"})
    assert resp.status == 200
    assert f'data-session-websocket-url="ws://spark.lan:{client.port}/ws"' in await resp.text()


async def test_a_public_url_is_the_pages_origin(served):
    server, client = await served(public_url="https://spark.example.com/")
    assert server.url == f"https://spark.example.com/?token={TOKEN}"
    resp = await client.get(f"/?token={TOKEN}", headers={"Host": "spark.example.com"})
    assert resp.status == 200
    assert "Secure" in resp.headers["Set-Cookie"]
    html = await resp.text()
    assert 'data-session-websocket-url="wss://spark.example.com/ws"' in html
    assert 'src="https://spark.example.com/static/js/textual.js"' in html
    proxied = {**_cookie(server), "Host": "spark.example.com"}
    assert await _upgrade_status(client, proxied, "https://spark.example.com") == 101
    assert await _upgrade_status(client, proxied, "https://spark.example.com:443") == 101
    assert await _upgrade_status(client, proxied, "https://spark.example.com:8443") == 403
    assert await _upgrade_status(client, proxied, "https://other.example.com") == 403
    # a tunnel to another local port, named with --public-url
    server, client = await served(public_url="http://127.0.0.1:9000")
    assert server.url == f"http://127.0.0.1:9000/?token={TOKEN}"
    html = await (await client.get(f"/?token={TOKEN}", headers={"Host": "127.0.0.1:9000"})).text()
    assert 'data-session-websocket-url="ws://127.0.0.1:9000/ws"' in html
    assert await _upgrade_status(client, {**_cookie(server), "Host": "127.0.0.1:9000"}, "http://127.0.0.1:9000") == 101


async def test_each_launch_has_its_own_token_and_cookie():
    first = LockedServer("true", host="127.0.0.1", port=8000)
    second = LockedServer("true", host="127.0.0.1", port=8001)
    assert first.token != second.token and len(first.token) >= 40
    assert first.cookie_name != second.cookie_name
    assert first.url.startswith("http://127.0.0.1:8000/?token=")
    assert LockedServer("true", host="::1", port=8000).url.startswith("http://[::1]:8000/?token=")
