"""The tracking store that the history commands (`runs`, `compare`, `regressions`,
`promote`) read, saying once per command on stderr when MLflow's client has to read it.

sparkctl's own readers answer in a fraction of a second; MLflow's client costs seconds of
`import mlflow` on a small box. When the readers cannot answer (a schema revision they do
not know, workspaces, a filter they do not parse), the command still answers through the
client, and the user learns why it was slow, once, not on every read."""

from __future__ import annotations

import sys

_said: set[str] = set()  # one line per process: a command may open the store more than once


def _say_once(line: str) -> None:
    if line in _said:
        return
    _said.add(line)
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a terminal gone: the answer matters more than the note
        pass


def history_store(cfg):
    from sparkctl.services.factory import make_spool_and_store

    store = make_spool_and_store(cfg)[1]
    store.on_fallback = _say_once
    return store
