"""Themes as data: TOML files shipped in sparkctl.themes plus the user's theme dir.

A theme file holds Textual's theme colours and a colour per lane and budget part; the
extra colours become theme variables (`$lane-production`, `$budget-cache`, ...) so TCSS
and the budget bar read them the same way. A bad file is skipped with a reason, never fatal.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

THEME_KEYS = (
    "primary", "secondary", "accent", "warning", "error", "success",
    "background", "surface", "panel", "foreground",
)
DEFAULT_LANES = {"production": "#76B900", "fast": "#4A90D9", "contender": "#C678DD", "other": "#8A8F98"}
DEFAULT_BUDGET = {"other": "#5C6370", "cache": "#3B4252", "free": "#23292F", "reserve": "#E5484D"}


def theme_from_toml(text: str, origin: str) -> Theme:
    from sparkctl.core.safeload import Unparsable, load_toml

    try:
        data = load_toml(text, max_bytes=1 << 20)  # a theme is a few hundred bytes
    except Unparsable as exc:
        raise ValueError(f"{origin}: {exc}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{origin}: missing 'name'")
    if "primary" not in data:
        raise ValueError(f"{origin}: missing 'primary'")
    kwargs = {}
    for key in THEME_KEYS:
        if key in data:
            try:
                Color.parse(data[key])
            except (ColorParseError, TypeError):
                raise ValueError(f"{origin}: {key}: not a colour: {data[key]!r}") from None
            kwargs[key] = data[key]
    variables = {}
    for group, defaults in (("lanes", DEFAULT_LANES), ("budget", DEFAULT_BUDGET)):
        table = {**defaults, **data.get(group, {})}
        for part, colour in table.items():
            try:
                Color.parse(colour)
            except (ColorParseError, TypeError):
                raise ValueError(f"{origin}: [{group}] {part}: not a colour: {colour!r}") from None
            variables[f"{'lane' if group == 'lanes' else 'budget'}-{part}"] = colour
    return Theme(name=name, dark=bool(data.get("dark", True)), variables=variables, **kwargs)


def load_themes(user_dir: Path | None) -> tuple[list[Theme], list[str]]:
    """All themes that parse, and one line per file that did not."""
    themes: list[Theme] = []
    problems: list[str] = []
    sources: list[tuple[str, str]] = []
    # the shipped themes' folder, found from its package (installed as files, as the TCSS
    # beside the screens is): importlib.resources and zipfile, ~3 ms of the dashboard's start
    import sparkctl.themes

    for folder in sparkctl.themes.__path__:
        for entry in sorted(Path(folder).glob("*.toml"), key=lambda e: e.name):
            sources.append((entry.read_text(encoding="utf-8"), f"themes/{entry.name}"))
    if user_dir is not None and user_dir.is_dir():
        for path in sorted(user_dir.glob("*.toml")):
            try:
                sources.append((path.read_text(encoding="utf-8"), str(path)))
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: unreadable ({exc})")
    for text, origin in sources:
        try:
            themes.append(theme_from_toml(text, origin))
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{origin}: invalid TOML: {exc}")
        except ValueError as exc:
            problems.append(str(exc))
    return themes, problems
