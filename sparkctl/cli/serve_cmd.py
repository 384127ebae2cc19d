"""`sparkctl serve`: the TUI in a web browser, through textual-serve.

Each browser tab runs its own `sparkctl` process (with this one's --config) behind a
websocket. Whoever drives that websocket drives the TUI, which loads, unloads and deletes
models, so the server (sparkctl.web.server) wants the per-launch token printed here and
the page's own Origin, and listens on loopback unless --host says otherwise. Reach it from
a laptop over ssh: `ssh -L 8000:127.0.0.1:8000 spark`, then open the printed URL.
"""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_OK, CliError


def register(sub) -> None:
    s = sub.add_parser("serve", help="serve the TUI to a web browser (loopback only unless --host says otherwise)",
                       description="Serve the TUI with textual-serve, locked with a token that changes at "
                                   "every launch. Over ssh: `ssh -L 8000:127.0.0.1:8000 HOST`, then open the "
                                   "URL it prints (http://127.0.0.1:8000/?token=...) on your machine.")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    s.add_argument("--public-url", metavar="URL",
                   help="the URL the browser uses when it is not loopback (a proxy, a host name); the page "
                        "connects back there and only that origin may open the websocket")
    s.set_defaults(handler=cmd_serve)


def app_command(config: str | None) -> str:
    """The shell command each browser session runs: this Python, this config."""
    import shlex

    parts = [sys.executable, "-m", "sparkctl.cli"]
    if config:
        from pathlib import Path

        parts += ["--config", str(Path(config).resolve())]
    return " ".join(shlex.quote(p) for p in parts)


def cmd_serve(args, cfg) -> int:
    if not 0 < args.port < 65536:
        raise CliError(f"--port must be 1-65535, not {args.port}", EXIT_BAD_INPUT)
    try:
        from sparkctl.web.server import LockedServer, is_loopback_name, origin_of
    except ImportError:
        raise CliError("textual-serve is not installed (pip install textual-serve)", EXIT_BAD_INPUT) from None
    if args.public_url is not None and origin_of(args.public_url) is None:
        raise CliError(f"--public-url must be an http:// or https:// URL, not {args.public_url!r}", EXIT_BAD_INPUT)
    if not is_loopback_name(args.host):
        print(f"sparkctl: WARNING: serving on {args.host}:{args.port}: whoever gets the URL (over plain "
              "HTTP its token can be read on the way) controls the models (load, unload, delete) and sees "
              "your runs; prefer an ssh tunnel to 127.0.0.1", file=sys.stderr)
    server = LockedServer(app_command(args.config), host=args.host, port=args.port, title="sparkctl",
                          public_url=args.public_url)
    print(f"sparkctl: serving the TUI at {server.url} (Ctrl-C stops; the token changes at every launch)",
          file=sys.stderr, flush=True)
    try:
        server.serve()
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise CliError(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", EXIT_BAD_INPUT) from None
    return EXIT_OK
