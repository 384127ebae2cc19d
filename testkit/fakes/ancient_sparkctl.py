"""A FAKE sparkctl from before `status --json` existed, for the fleet tests: its parser
has a `status` command without --json, so argparse answers as it does for any unknown
option (one usage line, one error line, exit 2). Built with argparse itself, so the words
are argparse's own."""

from __future__ import annotations

import argparse

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="sparkctl")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("status")
    parser.parse_args()  # `status --json`: "unrecognized arguments: --json", exit 2
    print("engine: ollama (text only)")
