"""Chat templates of the FAKE Ollama (testkit/fakes/ollama_server.py), as the token sequence a
runner evaluates: what a model family's template renders around the system prompt and the
user's text, one fake token per special marker or whitespace-separated word.

Real templates put tens of tokens before the user's text; which of them depend on the
request decides what two "cold" requests still share (see sparkctl/services/bench/coldness.py).
The families follow the structure of the templates Ollama ships (the text is paraphrased,
the order and the fixed/variable split are what matter):

- chatml (Qwen 2.5/3): the system block only when there is a system prompt
  (`<|im_start|>system ... <|im_end|>`), then the user turn, then the assistant marker.
- llama3 (Llama 3.1/3.2): a system header with a fixed knowledge-date line, always
  rendered, the system prompt inside it when there is one.
- harmony (gpt-oss): a fixed system message (model identity, knowledge cutoff, date,
  reasoning level, valid channels) always rendered; the system prompt goes into a
  developer message after it.

`render()` returns (tokens, opening) where opening is how many leading tokens do not depend
on the request at all: the part no nonce can change, which a test compares with what
sparkctl measured.
"""

from __future__ import annotations

from dataclasses import dataclass


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


@dataclass(frozen=True)
class ChatFormat:
    name: str
    always: tuple[str, ...] = ()  # rendered first on every request, system prompt or not
    system_open: tuple[str, ...] = ()  # around the system prompt, only when there is one
    system_close: tuple[str, ...] = ()
    always_close: tuple[str, ...] = ()  # closes `always` (after the system prompt, when inside it)
    user_open: tuple[str, ...] = ()
    user_close: tuple[str, ...] = ()
    assistant_open: tuple[str, ...] = ()


CHATML = ChatFormat(
    "chatml",
    system_open=("<|im_start|>", "system", "\n"), system_close=("<|im_end|>", "\n"),
    user_open=("<|im_start|>", "user", "\n"), user_close=("<|im_end|>", "\n"),
    assistant_open=("<|im_start|>", "assistant", "\n"),
)

LLAMA3 = ChatFormat(
    "llama3",
    always=("<|begin_of_text|>", "<|start_header_id|>", "system", "<|end_header_id|>", "\n\n")
    + _words("Cutting Knowledge Date: December 2023") + ("\n\n",),
    always_close=("<|eot_id|>",),
    user_open=("<|start_header_id|>", "user", "<|end_header_id|>", "\n\n"), user_close=("<|eot_id|>",),
    assistant_open=("<|start_header_id|>", "assistant", "<|end_header_id|>", "\n\n"),
)

HARMONY = ChatFormat(
    "harmony",
    always=("<|start|>", "system", "<|message|>")
    + _words("You are a large language model, trained to be helpful and honest. Knowledge cutoff: "
             "2024-06 Current date: 2025-08-06 Reasoning: medium # Valid channels: analysis, "
             "commentary, final. Channel must be included for every message. Calls to these tools "
             "must go to the commentary channel: 'functions'.")
    + ("<|end|>",),
    system_open=("<|start|>", "developer", "<|message|>", "#", "Instructions", "\n\n"),
    system_close=("<|end|>",),
    user_open=("<|start|>", "user", "<|message|>"), user_close=("<|end|>",),
    assistant_open=("<|start|>", "assistant"),
)

FORMATS = {f.name: f for f in (CHATML, LLAMA3, HARMONY)}


def render(fmt: ChatFormat, system: str, prompt: str) -> tuple[list[tuple[str, str]], int]:
    """(tokens, opening): the rendered prompt as fake tokens, and how many of them come
    before anything the request can change (its system prompt or its text)."""
    tokens: list[tuple[str, str]] = [("tpl", t) for t in fmt.always]
    sys_words = system.split()
    if sys_words:
        tokens += [("tpl", t) for t in fmt.system_open]
        opening = len(tokens)
        tokens += [("sys", w) for w in sys_words]
        tokens += [("tpl", t) for t in fmt.system_close]
    tokens += [("tpl", t) for t in fmt.always_close]
    if not sys_words:
        tokens += [("tpl", t) for t in fmt.user_open]
        opening = len(tokens)
    else:
        tokens += [("tpl", t) for t in fmt.user_open]
    tokens += [("word", w) for w in prompt.split()]
    tokens += [("tpl", t) for t in fmt.user_close + fmt.assistant_open]
    return tokens, opening
