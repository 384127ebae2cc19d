"""Tests of the FAKE Ollama itself (testkit/fakes/ollama_server.py), over real HTTP: its prompt
cache, measured durations and chunking must behave like a real server's, or every sparkctl
test built on it proves nothing. Expectations are worked out here by hand from the
documented real behaviour, never by calling the fake's own helpers."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import ollama
import pytest

from testkit.fakes.ollama_server import (
    REALISTIC_CHUNKS,
    FakeOllama,
    realistic_streaming,
)

OVERHEAD = 9  # FakeState.prompt_overhead_tokens: the template's tokens, the same every request


@pytest.fixture
def server(raw_fake: FakeOllama) -> FakeOllama:
    return raw_fake  # tests/integration/conftest.py


def words(n: int, first: str = "alpha") -> str:
    return " ".join([first] + [f"w{i}" for i in range(1, n)])


def stream(server: FakeOllama, path: str = "/api/generate", **body: Any) -> list[dict[str, Any]]:
    """POST a streaming request; every NDJSON line, each with the client's arrival time."""
    body.setdefault("model", "llama3.2:3b")
    lines = []
    with server.http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line:
                obj = json.loads(line)
                obj["_t"] = time.monotonic()
                lines.append(obj)
    assert lines[-1]["done"] is True
    return lines


def final(server: FakeOllama, prompt: str, **body: Any) -> dict[str, Any]:
    return stream(server, prompt=prompt, **body)[-1]


def ps(server: FakeOllama) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in server.http.get("/api/ps").json()["models"]}


# ---------------------------------------------------------------------------- prompt cache


def test_repeat_prompt_whole_count_reports_whole_prompt_but_tiny_prefill(server):
    server.state.prompt_cache = "whole_count"  # the default: 0.12-era runner, 0.30.1+ llama-server
    server.state.prefill_tokens_per_s = 5_000.0
    prompt = words(400)  # 409 tokens with the template: ~82 ms cold, one token's 0.2 ms warm
    cold = final(server, prompt)
    warm = final(server, prompt)
    assert cold["prompt_eval_count"] == warm["prompt_eval_count"] == 400 + OVERHEAD
    assert server.state.last_prefill["llama3.2:3b"] == (408, 1)  # everything cached but the last token
    assert warm["prompt_eval_duration"] * 10 < cold["prompt_eval_duration"]


def test_repeat_prompt_uncached_count_reports_one_token(server):
    server.state.prompt_cache = "uncached_count"  # 0.30.0: llama-server's prompt_n alone
    cold = final(server, words(50))
    warm = final(server, words(50))
    assert cold["prompt_eval_count"] == 50 + OVERHEAD
    assert warm["prompt_eval_count"] == 1


@pytest.mark.parametrize("mode, reported", [("whole_count", 30 + OVERHEAD), ("uncached_count", 30)])
def test_changed_first_word_evaluates_all_but_the_template(server, mode, reported):
    server.state.prompt_cache = mode
    final(server, words(30, first="alpha"))
    second = final(server, words(30, first="beta"))
    assert server.state.last_prefill["llama3.2:3b"] == (OVERHEAD, 30)
    assert second["prompt_eval_count"] == reported


def test_extended_prompt_evaluates_only_the_new_words(server):
    server.state.prompt_cache = "uncached_count"
    base = words(40)
    final(server, base)
    longer = final(server, base + " and twelve more words to read here right now please ok then")
    assert longer["prompt_eval_count"] == 12
    assert server.state.last_prefill["llama3.2:3b"] == (40 + OVERHEAD, 12)


def test_cache_off_evaluates_everything_every_time(server):
    server.state.prompt_cache = "off"
    final(server, words(20))
    final(server, words(20))
    assert server.state.last_prefill["llama3.2:3b"] == (0, 20 + OVERHEAD)


def test_cache_is_per_model(server):
    server.state.prompt_cache = "uncached_count"
    final(server, words(20), model="llama3.2:3b")
    other = final(server, words(20), model="qwen3:8b", think=False)
    assert other["prompt_eval_count"] == 20 + OVERHEAD  # another runner, its own empty cache


def test_prefill_time_is_proportional_to_uncached_tokens(server):
    state = server.state
    state.prefill_tokens_per_s = 10_000.0
    state.jitter_pct = 3.0
    final(server, words(500, first="a"))  # 509 tokens: ~51 ms
    changed = final(server, words(500, first="b"))  # 500 evaluated: ~50 ms
    tail = final(server, words(500, first="b") + " " + words(100, first="c"))  # 100 new: ~10 ms
    assert 0.050 * 0.97 <= changed["prompt_eval_duration"] / 1e9 < 0.050 * 1.5
    assert 0.010 * 0.97 <= tail["prompt_eval_duration"] / 1e9
    assert tail["prompt_eval_duration"] * 3 < changed["prompt_eval_duration"]
    assert tail["prompt_eval_count"] == 600 + OVERHEAD  # whole_count: still the whole prompt


def test_reload_for_a_new_num_ctx_empties_the_cache(server):
    state = server.state
    state.prompt_cache = "uncached_count"
    state.models["llama3.2:3b"].load_s = 0.05
    first = final(server, words(25), options={"num_ctx": 4096})
    same = final(server, words(25), options={"num_ctx": 4096})
    assert ps(server)["llama3.2:3b"]["context_length"] == 4096
    reloaded = final(server, words(25), options={"num_ctx": 8192})
    assert first["load_duration"] >= 0.05e9 and same["load_duration"] < 0.05e9
    assert same["prompt_eval_count"] == 1
    assert reloaded["load_duration"] >= 0.05e9  # a new runner...
    assert reloaded["prompt_eval_count"] == 25 + OVERHEAD  # ...with an empty cache
    assert ps(server)["llama3.2:3b"]["context_length"] == 8192


def test_unload_empties_the_cache(server):
    state = server.state
    state.prompt_cache = "uncached_count"
    final(server, words(25))
    unload = server.http.post("/api/generate", json={"model": "llama3.2:3b", "keep_alive": 0}).json()
    assert unload["done_reason"] == "unload"
    assert "llama3.2:3b" not in ps(server)
    again = final(server, words(25))
    assert again["load_duration"] >= state.models["llama3.2:3b"].load_s * 1e9
    assert again["prompt_eval_count"] == 25 + OVERHEAD


def test_chat_follow_up_reuses_the_conversation_prefix(server):
    server.state.prompt_cache = "uncached_count"
    turn1 = [{"role": "user", "content": words(30)}]
    first = stream(server, "/api/chat", messages=turn1)
    answer = "".join(line["message"]["content"] for line in first[:-1])
    turn2 = turn1 + [{"role": "assistant", "content": answer}, {"role": "user", "content": "and why"}]
    second = stream(server, "/api/chat", messages=turn2)
    # The cache held the first prompt: only the answer's words and the new question are new.
    assert second[-1]["prompt_eval_count"] == len(answer.split()) + 2


# ---------------------------------------------------------------------------- measured durations


def test_eval_duration_is_measured_first_to_last_token_with_jitter(server):
    state = server.state
    state.tokens_per_s = 400.0
    state.jitter_pct = 3.0
    state.response_tokens = [f" t{i}" for i in range(40)]
    lines = stream(server, prompt="go")
    done = lines[-1]
    assert done["eval_count"] == 40
    # 39 decode steps of ~2.5 ms each (the first token comes out of the prefill), not 40/400.
    assert done["eval_duration"] / 1e9 == pytest.approx(39 / 400, rel=0.05)
    assert done["eval_duration"] != int(40 / 400 * 1e9)
    # The client sees the same span between its first and last token.
    client = lines[-2]["_t"] - lines[0]["_t"]
    assert done["eval_duration"] / 1e9 == pytest.approx(client, abs=0.015)
    again = final(server, "go")
    assert again["eval_duration"] != done["eval_duration"]  # a measurement, not a setting


def test_jitter_spreads_the_gaps_between_tokens(server):
    state = server.state
    state.tokens_per_s = 200.0
    state.jitter_pct = 20.0
    state.response_tokens = [f" t{i}" for i in range(25)]
    lines = stream(server, prompt="go")
    gaps = [b["_t"] - a["_t"] for a, b in zip(lines[:-2], lines[1:-1])]
    # 5 ms +/- 20 % uniform: a standard deviation of ~0.58 ms, not a metronome's ~0.
    assert statistics.pstdev(gaps) > 0.0003
    assert statistics.mean(gaps) == pytest.approx(0.005, rel=0.15)


def test_prompt_eval_duration_is_measured_inside_the_time_to_first_token(server):
    server.state.prefill_tokens_per_s = 10_000.0
    final(server, "warm up")
    started = time.monotonic()
    lines = stream(server, prompt=words(300))  # ~31 ms of prefill
    ttft = lines[0]["_t"] - started
    prefill = lines[-1]["prompt_eval_duration"] / 1e9
    assert 0.031 * 0.97 <= prefill <= ttft
    assert lines[-1]["total_duration"] / 1e9 >= prefill + lines[-1]["eval_duration"] / 1e9


# ---------------------------------------------------------------------------- chunking


def test_chunk_plan_groups_tokens_and_sends_empty_chunks(server):
    state = server.state
    state.chunk_plan = (1, 3, 0, 2)
    state.response_tokens = [f"t{i}" for i in range(12)]
    lines = stream(server, prompt="go")
    texts = [line["response"] for line in lines[:-1]]
    # By hand: 1 | 3 | held (empty chunk) | the held one + 2 | 1 | 3 | held | end: flush.
    assert texts == ["t0", "t1t2t3", "", "t4t5t6", "t7", "t8t9t10", "", "t11"]
    assert all("thinking" not in line for line in lines)
    assert lines[-1]["eval_count"] == 12  # tokens, not the 8 chunks


def test_chunk_plan_in_chat_and_non_streaming(server):
    state = server.state
    state.chunk_plan = (2, 0)
    state.response_tokens = ["a", "b", "c", "d", "e"]
    lines = stream(server, "/api/chat", messages=[{"role": "user", "content": "hi"}])
    contents = [line["message"]["content"] for line in lines[:-1]]
    assert contents == ["ab", "", "cde"]  # 2 | c held (empty chunk) | c + 2 more
    whole = server.http.post(
        "/api/chat",
        json={"model": "llama3.2:3b", "messages": [{"role": "user", "content": "hi"}], "stream": False},
    ).json()
    assert whole["message"]["content"] == "abcde" and whole["eval_count"] == 5


@pytest.mark.parametrize("path", ["/api/generate", "/api/chat"])
def test_thinking_and_content_share_the_chunk_where_thinking_ends(server, path):
    state = server.state
    state.thinking_and_content_in_one_chunk = True
    body: dict[str, Any] = {"model": "qwen3:8b"}
    if path == "/api/chat":
        body["messages"] = [{"role": "user", "content": "why is the sky blue"}]
    else:
        body["prompt"] = "why is the sky blue"
    lines = stream(server, path, **body)[:-1]
    parts = [(line.get("thinking") or line.get("message", {}).get("thinking") or "",
              line.get("response", line.get("message", {}).get("content", ""))) for line in lines]
    both = [p for p in parts if p[0] and p[1]]
    assert both == [(".", "The")]  # the last thought and the first answer token, one chunk
    assert "".join(p[0] for p in parts) == "Okay, the user asks about the sky."
    assert "".join(p[1] for p in parts) == "The sky is blue because of Rayleigh scattering."


def test_thinking_and_content_apart_by_default(server):
    lines = stream(server, model="qwen3:8b", prompt="why")[:-1]
    assert not [line for line in lines if line.get("thinking") and line["response"]]


def test_realistic_streaming_through_the_ollama_client(server):
    realistic_streaming(server.state)
    assert server.state.chunk_plan == REALISTIC_CHUNKS
    client = ollama.Client(host=server.url, timeout=10)
    chunks = list(client.chat(model="qwen3:8b", messages=[{"role": "user", "content": "why"}], stream=True))
    done = chunks[-1]
    thought = "".join(c.message.thinking or "" for c in chunks)
    answer = "".join(c.message.content or "" for c in chunks)
    assert thought == "Okay, the user asks about the sky." and answer.startswith("The sky")
    visible = 9 + 9  # thinking + answer tokens of bench_scenario
    assert done.eval_count == visible + 1  # + the end-of-sequence token the runner sampled
    assert len(chunks) - 1 != done.eval_count
    assert any(not (c.message.content or c.message.thinking) for c in chunks[:-1])  # empty chunks
