"""CLI commands for models: models, pull, fit, load, unload, rm (filled in by the Models work)."""

from __future__ import annotations


def register(sub) -> None:
    """Add the model subcommands to the CLI; each parser sets `handler=fn(args, cfg) -> int`."""
