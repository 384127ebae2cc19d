"""Deterministic Models-screen scenarios on top of the FAKE Ollama (testkit/fakes/ollama_server.py).

A Spark-like box: production lane gpt-oss:120b resident forever (68 GiB, 100% GPU), the
contender qwen3:8b and a few others on disk, and the server's default context set the
way Ollama sets it on a >= 47 GiB machine (262144, capped at each model's trained
context). Modification times are fixed so tables and snapshots do not drift.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sparkctl.config import Config, parse_config
from testkit.fakes.ollama_server import FakeState, load_scenario, make_model

# In the past on purpose: a model the fake pulls "now" then reads "just now" whatever the
# real date, so snapshots taken after a pull do not drift.
FIXED_NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
DAY_NS = 86_400 * 1_000_000_000

LANES_TOML = '[lanes]\nproduction = "gpt-oss:120b"\nfast = "llama3.2:3b"\n'

# The Spark-like fake loads at 262144 unless asked otherwise (Ollama's default on a >= 47 GiB
# box since 0.15.5) while reporting version 0.12.6, whose default was 4096: to its clients it
# is a 0.12.6 server started with OLLAMA_CONTEXT_LENGTH=262144. sparkctl reads a server's
# settings from its process, which for a fake served from the test's own process is not an
# Ollama process, so the tests state that setting in [engine] (as a user does for a server
# sparkctl cannot read) and go into the [engine] table of every config built on this fake.
SPARK_ENGINE_KEYS = "context_length = 262144\n"


def spark_config(extra: str = "") -> Config:
    return parse_config("[engine]\n" + SPARK_ENGINE_KEYS + LANES_TOML + extra, "test config", env={})


def qwen3_30b():
    return make_model(
        "qwen3:30b-a3b", size_gib=17.3, family="qwen3moe", parameter_size="30.5B",
        capabilities=("completion", "tools", "thinking"), block_count=48, context_length=262144,
        embedding_length=2048, head_count=32, head_count_kv=4, parameter_count=30_532_122_624,
    )


def deepseek_671b():
    return make_model(
        "deepseek-r1:671b", size_gib=376.6, family="deepseek2", parameter_size="671.0B",
        capabilities=("completion", "thinking"), block_count=61, context_length=163840,
        embedding_length=7168, head_count=128, head_count_kv=128, parameter_count=671_026_419_200,
    )


def spark_state(*, spill: bool = False, evict: str | None = None, out_of_memory: bool = False,
                extra_models: bool = True) -> FakeState:
    state = load_scenario(spill=spill, evict=evict, out_of_memory=out_of_memory)
    state.default_num_ctx = 262144  # Ollama's default with >= 47 GiB of GPU memory
    if extra_models:
        state.add_model(qwen3_30b())
        state.add_model(deepseek_671b())
    fixed_ns = int(FIXED_NOW.timestamp()) * 1_000_000_000
    for days, model in enumerate(state.models.values(), start=1):
        model.modified_at_ns = fixed_ns - days * 3 * DAY_NS
    return state


# ---- realistic chat-template headers (testkit/fakes/templates.py) -----------------------------

# A model's own system prompt, as Modelfiles ship them: the words are a paraphrase of the
# long assistant preambles real models carry; only their length matters here.
_SYSTEM_WORDS = ("You are a careful assistant that answers questions about computing, writes clear "
                 "explanations, checks its own reasoning, keeps answers short unless asked otherwise, "
                 "says when it does not know, and follows the formatting the user asks for.").split()


def system_prompt(words: int) -> str:
    """A system prompt of exactly `words` whitespace-separated words."""
    out = [_SYSTEM_WORDS[i % len(_SYSTEM_WORDS)] for i in range(words)]
    return " ".join(out)


def header_model(chat_format: str, header_tokens: int = 100, name: str | None = None):
    """A model whose template puts about `header_tokens` tokens before the user's text:
    the family's fixed markers plus a Modelfile SYSTEM long enough to reach the total.
    chatml (qwen3), llama3 (llama3.1/3.2) and harmony (gpt-oss) render the system prompt
    at different places; see testkit/fakes/templates.py."""
    from testkit.fakes.templates import FORMATS, render

    fmt = FORMATS[chat_format]
    fixed = len(render(fmt, "x", "")[0]) - 1 - len(fmt.user_close + fmt.assistant_open)
    model = make_model(name or f"header-{chat_format}:8b", size_gib=4.9, parameter_size="8.0B",
                       family={"chatml": "qwen3", "llama3": "llama", "harmony": "gptoss"}[chat_format])
    model.chat_format = chat_format
    model.system = system_prompt(max(1, header_tokens - fixed))
    return model


def header_state(chat_format: str, header_tokens: int = 100, *, prefill_tokens_per_s: float = 2000.0,
                 prompt_cache: str = "whole_count") -> FakeState:
    """Only `header_model(...)` on disk; an unpaced decode; a measured prefill speed."""
    state = FakeState(default_num_ctx=8192)
    state.add_model(header_model(chat_format, header_tokens))
    state.prefill_tokens_per_s = prefill_tokens_per_s
    state.prompt_cache = prompt_cache
    return state
