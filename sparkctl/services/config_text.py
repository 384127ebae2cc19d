"""The effective configuration as TOML, each value followed by the file that set it:
`sparkctl config` and the TUI's Config view."""

from __future__ import annotations


def render_config(cfg) -> str:
    """The effective config as TOML, each value followed by the file that set it; where
    the config came from and sparkctl's own layered file first. Credentials show as ***."""
    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    out: list[str] = []
    out.append(f"# source: {cfg.source}")
    if cfg.source == "built-in defaults":
        from sparkctl import paths

        out.append(f"# no config file: `sparkctl config --init` writes the documented default to {paths.user_config_file()}")
    if cfg.state_file:
        from pathlib import Path

        what = "layered over it" if Path(cfg.state_file).is_file() else "layered over it once written"
        out.append(f"# {what}: {cfg.state_file} (sparkctl's own file: promotions, rollbacks, the theme)")
    for note in cfg.notes:
        out.append(f"# note: {note}")
    return "\n".join(out) + "\n" + render_with_sources(redact_config_dict(to_toml_dict(cfg)), cfg.sources)


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
