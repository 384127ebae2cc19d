"""CLI commands for benches: bench, sync."""

from __future__ import annotations


def register(sub) -> None:
    """Add the bench subcommands to the CLI; each parser sets `handler=fn(args, cfg) -> int`."""
