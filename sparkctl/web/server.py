"""textual-serve's server with the doors locked.

As shipped, textual-serve answers anyone who reaches its port, and its websocket (which
types into a real `sparkctl`) checks neither a secret nor the page's Origin. Browsers do not
apply the same-origin rule to websockets, so any page open in the user's browser, including
one on the laptop that holds the `ssh -L` tunnel, could drive the TUI: unload or delete
models, promote one (which runs the `[lanes] on_change` hook). Here:

- Every request needs the per-launch token: in the URL `sparkctl serve` prints, or in the
  cookie the first tokened page load sets (HttpOnly, SameSite=Strict, named per launch so two
  servers on one host do not overwrite each other's). Compared in constant time.
- A websocket upgrade (and any request that carries an Origin) must come from the page's own
  origin: the address the browser used for this server (its Host header) or `--public-url`.
  SameSite does not separate ports, so a page on another local port gets the cookie; the
  Origin check is what stops it.
- Bound to loopback, the Host header must name loopback (or the public URL's host): a DNS
  rebinding page cannot pass for this server even before the token is checked.
- The page is sparkctl's own template: textual-serve's links Google Fonts, which an offline
  Spark cannot load; this one takes Roboto Mono from textual-serve's own static files. It
  cannot be framed by another page, and sends no Referer (its URL holds the token).
- The access log goes through the project's redaction, so the token is not logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

from sparkctl.core.redact import redact_text

TEMPLATES = Path(__file__).resolve().with_name("templates")
TOKEN_PARAM = "token"

# Headers of every page this server answers with (the HTML carries the token in its URL).
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}

NEED_TOKEN = ("sparkctl serve: this address needs the token: open the URL that `sparkctl serve` "
              "printed (it ends in ?token=...)\n")
WRONG_ORIGIN = "sparkctl serve: refused: the request did not come from this server's own page\n"
WRONG_HOST = ("sparkctl serve: refused: the Host header does not name this machine's loopback; "
              "start it with --public-url for any other name\n")


Origin = tuple[str, str, int]


def origin_of(url: str | None) -> Origin | None:
    """(scheme, host, port) of an http(s) URL or Origin header, ports filled in; None for
    anything else ("null", a file: page, junk)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host, port or (443 if scheme == "https" else 80)


def is_loopback_name(name: str) -> bool:
    """localhost (and *.localhost, which browsers resolve to loopback), 127.0.0.0/8 or ::1."""
    name = name.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_in_url(host: str) -> str:
    """A host as it goes into a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class LockedServer(Server):
    """textual-serve's Server behind a token, an Origin check and a page that stays offline."""

    def __init__(self, command: str, *, host: str, port: int, title: str = "sparkctl",
                 public_url: str | None = None, token: str | None = None) -> None:
        super().__init__(command, host=host, port=port, title=title, public_url=public_url,
                         templates_path=TEMPLATES)
        self.token = token or secrets.token_urlsafe(32)
        self._token_bytes = self.token.encode()
        # A cookie is per host, not per port: a per-launch name keeps two servers apart.
        self.cookie_name = f"sparkctl-{secrets.token_hex(4)}"
        self.explicit_public_url = public_url.rstrip("/") if public_url else None
        self._public_origin = origin_of(self.explicit_public_url)
        self.loopback_only = is_loopback_name(host)

    @property
    def url(self) -> str:
        """The URL to open: the public one, or this server's address, with the token."""
        base = self.explicit_public_url or f"http://{host_in_url(self.host)}:{self.port}"
        return f"{base}/?{TOKEN_PARAM}={self.token}"

    # ---- checks ------------------------------------------------------------------------

    def token_matches(self, candidate: str | None) -> bool:
        if not candidate:
            return False
        return hmac.compare_digest(candidate.encode("utf-8", "replace"), self._token_bytes)

    def host_allowed(self, host_header: str) -> bool:
        if not self.loopback_only:
            return True  # a wildcard or LAN bind: the names it is reached by are not known here
        got = origin_of(f"http://{host_header}")
        if got is None:
            return False
        return is_loopback_name(got[1]) or (self._public_origin is not None and got[1] == self._public_origin[1])

    def origin_allowed(self, origin: str | None, host_header: str) -> bool:
        got = origin_of(origin)
        if got is None:
            return False
        return got == self._public_origin or got == origin_of(f"http://{host_header}")

    # ---- textual-serve's hooks -----------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()

        @web.middleware
        async def guard(request: web.Request, handler) -> web.StreamResponse:
            if not self.host_allowed(request.host):
                return _refuse(WRONG_HOST)
            origin = request.headers.get("Origin")
            upgrade = request.path == "/ws"
            if (origin is not None or upgrade) and not self.origin_allowed(origin, request.host):
                return _refuse(WRONG_ORIGIN)
            from_url = self.token_matches(request.query.get(TOKEN_PARAM))
            if not (from_url or self.token_matches(request.cookies.get(self.cookie_name))):
                return _refuse(NEED_TOKEN)
            response = await handler(request)
            if not response.prepared:  # a websocket has already answered
                response.headers.update(PAGE_HEADERS)
                if from_url:
                    response.set_cookie(self.cookie_name, self.token, path="/", httponly=True,
                                        samesite="Strict", secure=self._secure_cookie)
            return response

        app.middlewares.append(guard)
        return app

    @property
    def _secure_cookie(self) -> bool:
        return self._public_origin is not None and self._public_origin[0] == "https"

    @aiohttp_jinja2.template("index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        # The page talks back to the address the browser used (any tunnel port works without
        # --public-url); a public URL, when given, is what the browser uses instead.
        base = self.explicit_public_url or f"http://{request.host}"
        scheme, _, rest = base.partition(":")
        return {
            "title": self.title,
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "websocket_url": ("wss" if scheme.lower() == "https" else "ws") + ":" + rest + "/ws",
            "static_url": base + "/static/",
        }

    async def on_startup(self, app: web.Application) -> None:
        """textual-serve prints a banner with the URL without its token; `sparkctl serve`
        prints the URL to open instead."""

    def initialize_logging(self) -> None:
        super().initialize_logging()
        logging.getLogger("aiohttp.access").addFilter(_RedactFilter())


class _RedactFilter(logging.Filter):
    """Access-log lines quote the request line, and the first one holds the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        return True


def _refuse(text: str) -> web.Response:
    return web.Response(status=403, text=text, headers=PAGE_HEADERS)
