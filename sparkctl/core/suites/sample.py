"""Which items of a suite a run asks: a deterministic sample by seed.

The order is hash-based, not ``random``: each id is ranked by SHA-256 of ``"<seed>:<id>"``
(UTF-8) and the ``n`` lowest ranks are taken. Python only promises ``random.random()``'s
sequence across versions, not ``sample``/``shuffle``; a hash depends on nothing but the ids
and the seed, so the same ids, ``n`` and seed give the same sample on every Python and
machine, and whatever order the ids come in. Two consequences worth knowing:

- the sample is nested: for one seed, the items of ``n=50`` are among those of ``n=100``;
- the ids chosen do not depend on the other ids in the suite (adding an item to the suite
  can push an item out of a sample, never reshuffle it).

The result keeps the suite's own order (the order of ``all_ids``), so a run reads like the
suite file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def _rank(seed: int, item_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{item_id}".encode()).digest()


def sample_ids(all_ids: Sequence[str], n: int | None, seed: int) -> list[str]:
    """``n`` of ``all_ids`` picked by ``seed``, in the order of ``all_ids``; ``n=None``: all of them."""
    ids = list(all_ids)
    if len(set(ids)) != len(ids):
        dup = next(i for k, i in enumerate(ids) if i in ids[:k])
        raise ValueError(f"suite item ids must be unique; {dup!r} appears more than once")
    if n is None:
        return ids
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int or None, not {type(n).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if n < 1:
        raise ValueError(f"the number of items must be at least 1, not {n}")
    if n > len(ids):
        raise ValueError(f"asked for {n} items but the suite has only {len(ids)}")
    chosen = set(sorted(range(len(ids)), key=lambda k: _rank(seed, ids[k]))[:n])
    return [item for k, item in enumerate(ids) if k in chosen]
