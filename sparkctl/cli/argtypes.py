"""Argument types the command modules share: a context size and a keep-alive, checked by
argparse so a bad value is a one-line usage error (exit 2) before anything runs."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a context of at least 1 token, got {value}")
    from sparkctl.core.limits import MAX_NUM_CTX, count_text

    if value > MAX_NUM_CTX:
        raise argparse.ArgumentTypeError(f"expected a context of at most {MAX_NUM_CTX} tokens, got {count_text(value)}")
    return value


def duration(text: str) -> str:
    from sparkctl.core.keepalive import HINT, parse_keep_alive

    try:
        parse_keep_alive(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {HINT}, got {text!r}") from None
    return text.strip()
