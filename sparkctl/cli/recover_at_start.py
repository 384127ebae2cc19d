"""At every CLI start: put back what a dead bench changed (services/bench/recovery.py).

Costs one directory listing when there is nothing to do, so `status --json` keeps its
budget; only a journal left behind imports the engine and does the work."""

from __future__ import annotations

import sys


def recover_at_start(cfg) -> None:
    """Say on stderr what was put back (stdout stays the command's, e.g. JSON). Never fails
    the command: a recovery that cannot run is a warning, and the journal stays."""
    from sparkctl import paths

    if cfg is None or not paths.residency_journals():
        return
    import asyncio

    from sparkctl.cli.running import emit
    from sparkctl.core.redact import redact_text
    from sparkctl.services.bench.recovery import recover_residency

    try:
        report = asyncio.run(recover_residency(cfg))
    except Exception as exc:  # never let a repair attempt stop the command the user asked for
        emit(redact_text(f"sparkctl: WARNING: could not put back what a dead bench changed: {exc}"), sys.stderr)
        return
    for line in report.lines:
        emit(f"sparkctl: {redact_text(line)}", sys.stderr)
