"""One context per decision (services/bench/context.py, issue 30): the num_ctx every model
of a bench or eval runs at. Pure: the resident contexts are given."""

from __future__ import annotations

from sparkctl.core.names import model_key
from sparkctl.services.bench.context import CONFIG, CONTENDER, LANE, RESIDENT, choose_context

LANES = {"production": "gpt-oss:120b", "fast": "llama3.2:3b"}


def resident(**contexts: int) -> dict[str, int]:
    names = {"prod": "gpt-oss:120b", "fast": "llama3.2:3b", "con": "qwen3:30b-a3b", "other": "gemma3:4b"}
    return {model_key(names[k]): v for k, v in contexts.items()}


def test_the_resident_lane_model_s_context_for_every_model_of_the_pair():
    c = choose_context(["qwen3:30b-a3b", "gpt-oss:120b"], LANES, (), resident(prod=4096), 8192)
    assert (c.num_ctx, c.source, c.lane) == (4096, LANE, "production")
    assert c.note.startswith("num_ctx 4096: lane production's gpt-oss:120b is resident at that context")
    assert "qwen3:30b-a3b runs at it too, like for like" in c.note


def test_the_first_lane_in_the_config_s_order_wins_whatever_the_models_order():
    c = choose_context(["llama3.2:3b", "gpt-oss:120b"], LANES, (), resident(prod=4096, fast=2048), 8192)
    assert (c.num_ctx, c.lane) == (4096, "production")


def test_a_lane_model_not_resident_gives_way_to_one_that_is():
    c = choose_context(["gpt-oss:120b", "llama3.2:3b"], LANES, (), resident(fast=2048), 8192)
    assert (c.num_ctx, c.lane) == (2048, "fast")


def test_a_contender_alone_runs_at_the_context_of_the_lane_model_it_is_compared_with():
    c = choose_context(["qwen3:30b-a3b"], LANES, ("qwen3:30b-a3b",), resident(prod=4096, con=8192), 8192)
    assert (c.num_ctx, c.source, c.lane) == (4096, CONTENDER, "production")
    assert "compares like for like with it" in c.note


def test_a_model_not_marked_contender_alone_keeps_its_resident_context():
    c = choose_context(["gemma3:4b"], LANES, (), resident(prod=4096, other=32768), 8192)
    assert (c.num_ctx, c.source) == (32768, RESIDENT)
    assert "nothing is reloaded" in c.note


def test_otherwise_bench_num_ctx():
    for models, res in ((["gemma3:4b", "qwen3:30b-a3b"], resident(con=4096)),  # one resident, one not
                        (["gpt-oss:120b", "qwen3:30b-a3b"], {}),  # no lane model resident
                        (["gemma3:4b"], {})):
        c = choose_context(models, LANES, (), res, 8192)
        assert (c.num_ctx, c.source, c.note) == (8192, CONFIG, ""), models


def test_names_match_by_ollama_s_rules():
    c = choose_context(["gpt-oss:120b", "qwen3:30b-a3b"], {"production": "library/gpt-oss:120b"}, (),
                       resident(prod=4096), 8192)
    assert c.num_ctx == 4096


def test_a_contender_for_another_lane_runs_at_that_lane_model_s_context():
    """Review of issue 30: a contender marked for lane fast ran at production's context (the
    first resident lane), so its runs never paired with the fast lane model's."""
    c = choose_context(["qwen3:30b-a3b"], LANES, ("qwen3:30b-a3b",), resident(prod=4096, fast=16384), 8192,
                       {"qwen3:30b-a3b": "fast"})
    assert (c.num_ctx, c.source, c.lane, c.model) == (16384, CONTENDER, "fast", "llama3.2:3b")
    assert c.note.startswith("num_ctx 16384: the context lane fast's llama3.2:3b is resident at")


def test_a_contender_whose_lane_model_is_not_resident_does_not_borrow_another_lane_s_context():
    c = choose_context(["qwen3:30b-a3b"], LANES, ("qwen3:30b-a3b",), resident(prod=4096), 8192,
                       {"qwen3:30b-a3b": "fast"})
    assert (c.num_ctx, c.source) == (8192, CONFIG)
    # a mark without a lane (an older state file): the first resident lane, as before
    c = choose_context(["qwen3:30b-a3b"], LANES, ("qwen3:30b-a3b",), resident(prod=4096), 8192, {})
    assert (c.num_ctx, c.lane) == (4096, "production")
