"""Command line: `sparkctl [--config FILE] [--version] [COMMAND ...]`; no command opens the TUI.

Each command group lives in its own module with a ``register(subparsers)`` that builds its
parsers and sets ``handler``. Those modules import only argparse-level things at the top;
heavy imports (textual, ollama, mlflow, pynvml) happen inside the handler that needs them,
so `sparkctl --version` and `--help` stay fast.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING

from sparkctl import __version__
from sparkctl.cli.exitcodes import (  # re-exported: tests and scripts use sparkctl.cli.EXIT_*
    EXIT_BAD_INPUT,
    EXIT_ENGINE_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    CliError,
    ExitCode,
)

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_ENGINE_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REFUSED",
    "EXIT_UNREACHABLE", "CliError", "ExitCode", "COMMAND_MODULES", "build_parser", "main",
]

if TYPE_CHECKING:
    import argparse

# Command groups in the order `sparkctl --help` lists them. One module each under sparkctl/cli/,
# named <group>_cmd: the layer's modules never share a name with a service or a screen.
COMMAND_MODULES = ("status_cmd", "config_cmd", "models_cmd", "bench_cmd", "evals_cmd", "suites_cmd", "runs_cmd",
                   "compare_cmd", "community_cmd", "serve_cmd", "lanes_cmd", "fleet_cmd")


# Two-word commands: `sparkctl eval score FILE` is the parser `eval-score` (argparse cannot
# have `eval MODEL...` and `eval score FILE` under one parser with options in between).
TWO_WORD = {("eval", "score"): "eval-score"}


def _join_two_word(argv: list[str]) -> list[str]:
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--config" else 1  # global options before the command
    if i + 1 < len(argv) and (argv[i], argv[i + 1]) in TWO_WORD:
        return argv[:i] + [TWO_WORD[(argv[i], argv[i + 1])]] + argv[i + 2:]
    return argv


def build_parser() -> argparse.ArgumentParser:
    # argparse is imported here: the dashboard (no command) never builds a parser
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one line, exit 2, like every other bad input
            self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")

    p = _Parser(prog="sparkctl", description="Unified-memory budget, models and tracked benches for local LLMs.")
    p.add_argument("--config", metavar="FILE", help="config file (default: $SPARKCTL_CONFIG, ./sparkctl.toml, ~/.config/sparkctl/sparkctl.toml)")
    p.add_argument("--version", action="version", version=f"sparkctl {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"sparkctl.cli.{name}").register(sub)
    return p


def _load_config(args):
    from sparkctl.config import ConfigError, load_config

    try:
        return load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None


def cmd_tui(args, cfg) -> int:
    pause_gc_until_first_frame()
    from sparkctl.services.factory import make_engine
    from sparkctl.services.prefetch import StatusPrefetch

    # the first engine and host samples start now, while Textual imports (~0.3 s of CPU)
    first = StatusPrefetch(make_engine(cfg))
    from sparkctl.tui.app import make_app

    app = make_app(cfg, engine=first.engine, probes=first.probes, first=first)
    app.run()
    if app.interrupted:  # SIGHUP (ssh dropped) or SIGTERM: stopped like the CLI's bench
        return EXIT_REFUSED if app.restore_failed else EXIT_INTERRUPTED
    # Textual sets return_code to 1 when an unhandled exception ended the app: a crash
    # must not exit 0 (scripts and `make run` see it)
    return app.return_code or EXIT_OK


def pause_gc_until_first_frame() -> None:
    """No garbage collection from here to the dashboard's first frame (SparkApp.first_frame_written
    freezes what was built and collects again). Importing Textual and building the
    dashboard allocate ~100,000 objects that live as long as the app; collecting while they
    are made (~150 young, ~13 middle and one full collection) was ~80 ms of the first
    frame's CPU on a 2-core box, and the full one alone ~35 ms. What start-up leaves
    unreachable (~4,000 objects) is frozen with the rest and never freed: ~1 MB at most."""
    import gc

    gc.disable()


def _engine_origin(cfg, args) -> str:
    """Where the engine's URL came from, when the user did not give it on this command line:
    the fix for "unreachable" is usually there ($OLLAMA_HOST, a config file, or neither)."""
    if cfg is None or getattr(args, "engine_url", None) or getattr(args, "engine", None):
        return ""
    source = cfg.sources.get("engine.host")
    if source is None:
        return "; that is the default URL: set $OLLAMA_HOST or [engine] host if Ollama listens elsewhere"
    if source.startswith("$"):
        return f"; the URL is from {source}"
    return f"; the URL is [engine] host in {source}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--version"], ["-V"]):
        # the fast path: no command module, no argparse tree
        print(f"sparkctl {__version__}")
        return EXIT_OK
    if not argv:
        # the dashboard, the most frequent start: no command module, no argparse (~0.1 s
        # its first frame does not need), no garbage collection before its first frame
        pause_gc_until_first_frame()
        args = SimpleNamespace(command=None, config=None)
    else:
        args = build_parser().parse_args(_join_two_word(argv))  # --help ends here, before any import below
    if getattr(args, "handler", None) is None:
        return _dispatch(args)  # the TUI: Textual owns the terminal
    from sparkctl.cli.terminal import guarded_output

    # what other processes and hosts say reaches the terminal without escape sequences
    with guarded_output():
        return _dispatch(args)


# commands that only look: they never load, unload or repair (DESIGN: views only read)
VIEWS = ("serve", "status", "fleet")


def _dispatch(args) -> int:
    from sparkctl.core.redact import redact_text
    from sparkctl.engines.base import EngineError, EngineUnreachable
    from sparkctl.services.factory import SetupError

    cfg = None
    try:
        # `config --init` writes the file that loading would look for: nothing to load yet
        cfg = None if (args.command == "config" and getattr(args, "init", False)) else _load_config(args)
        handler = getattr(args, "handler", None) or cmd_tui
        if handler is not cmd_tui and args.command not in VIEWS and not getattr(args, "restore", False):
            # a bench that died left models changed: put them back first (`lanes --restore`
            # does it itself; the TUI only shows it, and puts them back when asked (P) or
            # before a bench of its own; `status` and `fleet` are views and only read: status
            # shows the pending repair as a warning naming `sparkctl lanes --restore`, and the
            # fleet runs it on every host)
            from sparkctl.cli.recover_at_start import recover_at_start

            recover_at_start(cfg)
        return int(handler(args, cfg))
    # every message may quote a URL the user wrote: credentials in it are never printed
    except CliError as exc:
        print(f"sparkctl: {redact_text(str(exc))}", file=sys.stderr)
        return exc.code
    except SetupError as exc:
        print(f"sparkctl: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EngineUnreachable as exc:
        where = _engine_origin(cfg, args)
        print(f"sparkctl: engine unreachable: {redact_text(exc.message)}{where}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except EngineError as exc:
        print(f"sparkctl: engine error: {redact_text(exc.message)}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    except KeyboardInterrupt:
        print("sparkctl: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `sparkctl status | head`: the reader went away; not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
