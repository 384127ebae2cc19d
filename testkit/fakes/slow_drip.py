"""A FAKE server that answers every request, then sends its body one byte at a time, slowly
(a "slow drip"): the attack no per-read timeout catches, since a byte always arrives before
the read timeout runs out. It stands in for a hostile or broken registry, tracking server or
any other HTTP peer. Real HTTP on 127.0.0.1; bounded: each answer stops dripping after
`max_s` and closes, so a client without a deadline of its own still ends (late).

`asked` is set on the first request; `paths` lists every request line's path."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _drip(self) -> None:
        srv = self.server
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with srv.lock:
            srv.paths.append(self.path)
        srv.asked.set()
        body = srv.body
        self.send_response(200)
        self.send_header("Content-Type", srv.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        started = time.monotonic()
        try:
            for i in range(len(body)):
                if time.monotonic() - started > srv.max_s or srv.stopping.is_set():
                    break
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                srv.stopping.wait(srv.interval_s)
        except OSError:
            pass  # the client gave up: what it was meant to do
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _drip


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class SlowDrip:
    """Listens on 127.0.0.1; every answer is 200 with `body`, one byte per `interval_s`."""

    def __init__(self, *, interval_s: float = 0.25, max_s: float = 30.0, body: bytes = b"{" + b" " * 4096 + b"}",
                 content_type: str = "application/json") -> None:
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.interval_s, self._srv.max_s = interval_s, max_s
        self._srv.body, self._srv.content_type = body, content_type
        self._srv.lock = threading.Lock()
        self._srv.paths = []
        self._srv.asked = threading.Event()
        self._srv.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._srv.server_address[1]}"

    @property
    def asked(self) -> threading.Event:
        return self._srv.asked

    @property
    def paths(self) -> list[str]:
        with self._srv.lock:
            return list(self._srv.paths)

    def start(self) -> "SlowDrip":
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._srv.stopping.set()
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> "SlowDrip":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
