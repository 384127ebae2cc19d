"""Command line: `sparkctl [--config FILE] [--version] [COMMAND ...]`; no command opens the TUI.

Heavy imports (textual, ollama, mlflow, pynvml) happen inside the command that needs them,
so `sparkctl --version` and `--help` stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys

from sparkctl import __version__

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4
EXIT_ENGINE_ERROR = 5


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sparkctl", description="Unified-memory budget, models and tracked benches for local LLMs.")
    p.add_argument("--config", metavar="FILE", help="config file (default: $SPARKCTL_CONFIG, ./sparkctl.toml, ~/.config/sparkctl/sparkctl.toml)")
    p.add_argument("--version", action="version", version=f"sparkctl {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("status", help="engine, resident models, memory budget and GPU, as text or JSON")
    s.add_argument("--json", action="store_true", help="one JSON object (keys in README)")

    sub.add_parser("config", help="print the effective configuration and where it came from")

    from sparkctl import cli_bench, cli_models

    cli_models.register(sub)
    cli_bench.register(sub)
    from sparkctl import cli_decide, cli_runs

    cli_runs.register(sub)
    cli_decide.register(sub)
    return p


def _load_config(args):
    from sparkctl.config import ConfigError, load_config

    try:
        return load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None


def cmd_status(args, cfg) -> int:
    import asyncio
    import json

    from sparkctl.services.factory import make_engine, make_probes
    from sparkctl.services.status import collect_status, report_to_dict

    async def go():
        engine = make_engine(cfg)
        try:
            return await collect_status(cfg, engine, make_probes())
        finally:
            await engine.close()

    report = asyncio.run(go())
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2))
    else:
        from sparkctl.textreport import render_status

        print(render_status(report))
    if not report.engine.reachable:
        return EXIT_UNREACHABLE
    # the engine answered, with an error (HTTP 500...): reachable but failing
    return EXIT_ENGINE_ERROR if report.engine.error else EXIT_OK


def cmd_config(args, cfg) -> int:
    import tomli_w

    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    # Shown, never saved: credentials in [tracking] uri, [engine] host, [engines.*] url
    # (user:token@, ?api_key=) print as ***.
    print(f"# source: {cfg.source}")
    print(tomli_w.dumps(redact_config_dict(to_toml_dict(cfg))), end="")
    return EXIT_OK


def cmd_tui(args, cfg) -> int:
    from sparkctl.tui.app import make_app

    make_app(cfg).run()
    return EXIT_OK


COMMANDS = {
    "status": cmd_status,
    "config": cmd_config,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)  # --version and --help end here, before any import below
    from sparkctl.core.redact import redact_text
    from sparkctl.engines.base import EngineError, EngineUnreachable
    from sparkctl.services.factory import SetupError

    try:
        cfg = _load_config(args)
        handler = getattr(args, "handler", None) or COMMANDS.get(args.command, cmd_tui)
        return handler(args, cfg)
    # every message may quote a URL the user wrote: credentials in it are never printed
    except CliError as exc:
        print(f"sparkctl: {redact_text(str(exc))}", file=sys.stderr)
        return exc.code
    except SetupError as exc:
        print(f"sparkctl: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EngineUnreachable as exc:
        print(f"sparkctl: engine unreachable: {redact_text(exc.message)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except EngineError as exc:
        print(f"sparkctl: engine error: {redact_text(exc.message)}", file=sys.stderr)
        return EXIT_ENGINE_ERROR
    except KeyboardInterrupt:
        print("sparkctl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `sparkctl status | head`: the reader went away; not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    # `python -m sparkctl.cli`: run the imported module's main, so that CliError raised by
    # the command modules (which import sparkctl.cli) is the class main() catches
    from sparkctl import cli as _cli

    sys.exit(_cli.main())
