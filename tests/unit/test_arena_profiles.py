"""Spark Arena's published profiles (issue 31 point 4) as sparkctl holds them, against the
profile files as published (spark-arena/recipe-registry, benchmarking/spark-arena-v1.yaml and
the current spark-arena-v2.yaml), written here and parsed: the grid, runs and the schedule,
cell for cell; v1 stays readable by either name."""

from __future__ import annotations

import yaml

from sparkctl.core import arena
from tests.arena_profiles import PUBLISHED_V1, PUBLISHED_V2


def test_v2_is_the_published_grid_and_schedule():
    pub = yaml.safe_load(PUBLISHED_V2)
    v2 = arena.by_name("arena-v2")
    assert v2 is arena.by_name("@official/spark-arena-v2") is arena.by_name("spark-arena-v2")
    assert v2.args() == pub["args"]
    assert v2.cells == [(c["depth"], c["concurrency"]) for c in pub["schedule"]]
    assert arena.check_schedule(v2) == [] and len(v2.cells) == 28


def test_v1_stays_readable_in_grid_order_without_runs():
    pub = yaml.safe_load(PUBLISHED_V1)
    v1 = arena.by_name("@official/spark-arena-v1")
    assert v1 is arena.by_name("arena-v1") and v1.args() == pub["args"] and v1.runs is None
    assert v1.cells == [(d, c) for d in pub["args"]["depth"] for c in pub["args"]["concurrency"]]


def test_a_broken_schedule_is_named():
    bad = arena.ArenaProfile("x", "@x", (0, 4096), 2048, 128, (1, 2), True, 3, ((0, 1), (0, 1), (4096, 3)))
    assert arena.check_schedule(bad) == ["d0 c1 is scheduled twice", "d4096 c3 is not in the grid",
                                         "d0 c2 is never scheduled", "d4096 c1 is never scheduled",
                                         "d4096 c2 is never scheduled"]
    assert arena.by_name("prose") is None


def test_the_copied_profiles_name_their_source_commit_and_licence_and_hold_no_copied_comment():
    """Review of issue 31: the profiles' values are Spark Arena's (MIT): both places that hold
    them say where from, at which commit, under which licence and whose copyright; the
    published files' comments are not copied (sparkctl says it in its own words)."""
    import tests.arena_profiles as published

    for module in (arena, published):
        doc = " ".join(module.__doc__.split())
        for fact in ("https://github.com/spark-arena/recipe-registry", "commit 7aff4a2", "MIT License",
                     "Copyright (c) 2026 Spark-Arena.com"):
            assert fact in doc, (module.__name__, fact)
    for text in (PUBLISHED_V1, PUBLISHED_V2):
        assert [line for line in text.splitlines() if line.lstrip().startswith("#")] == []
