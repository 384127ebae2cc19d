"""`sparkctl config`: the effective configuration and where it came from."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, CliError


def register(sub) -> None:
    c = sub.add_parser("config", help="print the effective configuration and where it came from; --init writes the documented default")
    c.add_argument("--init", action="store_true",
                   help="write the documented default config to the user config file (or --config FILE); "
                        "never overwrites")
    c.set_defaults(handler=cmd_config)


def default_config_text() -> str:
    """The documented default (the repo's sparkctl.toml, shipped in the package)."""
    from importlib.resources import files

    return files("sparkctl.defaults").joinpath("sparkctl.toml").read_text(encoding="utf-8")


def cmd_init(args) -> int:
    from pathlib import Path

    from sparkctl import paths

    target = Path(args.config) if args.config else paths.user_config_file()
    if target.exists():
        raise CliError(f"{target}: already exists; not overwritten (edit it, or move it away first)", EXIT_REFUSED)
    try:
        paths.atomic_write_text(target, default_config_text())
    except OSError as exc:
        raise CliError(f"{target}: cannot write ({exc.strerror})", EXIT_BAD_INPUT) from None
    print(f"wrote the documented default config to {target}")
    return EXIT_OK


def cmd_config(args, cfg) -> int:
    if args.init:
        return cmd_init(args)
    # Shown, never saved: credentials in [tracking] uri, [engine] host, [engines.*] url
    # (user:token@, ?api_key=) print as ***.
    from sparkctl.services.config_text import render_config

    print(render_config(cfg), end="")
    return EXIT_OK
