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
    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    # Shown, never saved: credentials in [tracking] uri, [engine] host, [engines.*] url
    # (user:token@, ?api_key=) print as ***.
    if args.init:
        return cmd_init(args)
    print(f"# source: {cfg.source}")
    if cfg.source == "built-in defaults":
        from sparkctl import paths

        print(f"# no config file: `sparkctl config --init` writes the documented default to {paths.user_config_file()}")
    if cfg.state_file:
        from pathlib import Path

        what = "layered over it" if Path(cfg.state_file).is_file() else "layered over it once written"
        print(f"# {what}: {cfg.state_file} (sparkctl's own file: promotions, rollbacks, the theme)")
    for note in cfg.notes:
        print(f"# note: {note}")
    print(render_with_sources(redact_config_dict(to_toml_dict(cfg)), cfg.sources), end="")
    return EXIT_OK


def render_with_sources(data: dict, sources: dict[str, str]) -> str:
    """TOML of the effective config, each key followed by `# <file>` when a file set it
    (keys without a comment are built-in defaults)."""
    import tomli_w

    lines: list[str] = []

    def table(header: str, values: dict, prefix: str) -> None:
        lines.append(f"[{header}]")
        for key, value in values.items():
            if isinstance(value, dict):
                continue
            text = tomli_w.dumps({key: value}).rstrip("\n")
            src = sources.get(f"{prefix}{key}")
            lines.append(f"{text}  # {src}" if src and "\n" not in text else text)
        lines.append("")
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{header}.{_key(key)}", value, f"{prefix}{key}.")

    for name, values in data.items():
        table(_key(name), values, f"{name}.")
    return "\n".join(lines)


def _key(name: str) -> str:
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace('"', '\\"') + '"'
