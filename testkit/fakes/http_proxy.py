"""A FAKE HTTP forward proxy for tests, on loopback: what a corporate network's
`http_proxy` points at, reduced to what proves who went through it.

A client that uses a proxy for an http:// URL sends it the whole URL on the request line
(`GET http://registry.example.test/v2/... HTTP/1.1`, RFC 9112 absolute-form) and the
proxy makes the request itself. This one records every request line it is sent (`seen`),
answers a request for a host it has a route for from that route's server (a fake registry
or mirror on loopback, so that names like `registry.example.test`, which resolve nowhere,
work through it and only through it), and refuses anything else with 502, as a proxy that
cannot reach a host does. CONNECT (https through the proxy) is recorded and refused.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _relay(self) -> None:
        proxy = self.server.proxy
        with proxy.lock:
            proxy.seen.append(f"{self.command} {self.path}")
        parts = urlsplit(self.path)
        upstream = proxy.routes.get(parts.hostname or "")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if not parts.scheme or upstream is None:
            self._answer(502, {"Content-Type": "text/plain"}, b"no route to host\n")
            return
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        conn = http.client.HTTPConnection(upstream, timeout=30)
        try:
            conn.request(self.command, target or "/", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            out = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP | {"content-length"}}
            self._answer(resp.status, out, data)
        finally:
            conn.close()

    def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_POST = _relay

    def do_CONNECT(self) -> None:
        with self.server.proxy.lock:
            self.server.proxy.seen.append(f"CONNECT {self.path}")
        self._answer(502, {"Content-Type": "text/plain"}, b"tunnels are not offered here\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: "ForwardProxy"


class ForwardProxy:
    """`routes`: host name -> "127.0.0.1:PORT" of the server that answers for it."""

    def __init__(self, routes: dict[str, str] | None = None) -> None:
        self.routes = dict(routes or {})
        self.seen: list[str] = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "ForwardProxy":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
