"""`sparkctl config`: the effective configuration and where it came from."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_OK


def register(sub) -> None:
    c = sub.add_parser("config", help="print the effective configuration and where it came from")
    c.set_defaults(handler=cmd_config)


def cmd_config(args, cfg) -> int:
    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    # Shown, never saved: credentials in [tracking] uri, [engine] host, [engines.*] url
    # (user:token@, ?api_key=) print as ***.
    print(f"# source: {cfg.source}")
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
