"""The engine protocol: what sparkctl needs from an inference server, and its errors/events.

Adapters (ollama.py, openai_compat.py) turn each server's wire format into these types so
the services above never see HTTP or a client library's exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol, runtime_checkable

from sparkctl.core.snapshots import LocalModel, ResidentModel
from sparkctl.core.termtext import safe_text


class EngineError(Exception):
    """The engine answered with an error. `status` is the HTTP status, or -1 in-band."""

    def __init__(self, message: str, status: int = -1) -> None:
        # the engine's own words end up on a terminal and in the TUI: no escape sequences
        message = safe_text(message)
        super().__init__(message)
        self.message = message
        self.status = status


class EngineUnreachable(EngineError):
    """No answer at all: connection refused, DNS, timeout on connect or read."""


class EngineStalled(EngineUnreachable):
    """A stream sent nothing for the read timeout: the engine may be busy (a queue, a long
    prefill), not gone. An eval scores the item DNF instead of ending the run."""


class ModelNotFound(EngineError):
    """The engine does not know the model (404 `model 'x' not found`)."""


@dataclass(frozen=True)
class ShowInfo:
    """The parts of /api/show that sparkctl uses."""

    name: str
    details: dict[str, Any] = field(default_factory=dict)
    model_info: dict[str, Any] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    parameters: str = ""
    modified_at: str | None = None
    # The model's own system prompt (Modelfile SYSTEM) and chat template, where the engine
    # tells them: the bench's cold prefill puts its nonce where the template renders first.
    system: str = ""
    template: str = ""
    # A draft model shipped with the model (Ollama's Modelfile DRAFT, a layer of media type
    # application/vnd.ollama.image.draft): its path, or "" when none is declared.
    draft: str = ""
    # Where the weights are (Ollama's Modelfile FROM blob, llama-server's model_path): ties
    # the model to the runner process that serves it.
    model_path: str = ""


@dataclass(frozen=True)
class TokenEvent:
    """A piece of streamed output. `thinking` marks reasoning text kept apart from the answer."""

    text: str
    thinking: bool = False


@dataclass(frozen=True)
class DoneEvent:
    """The final chunk of a generation, with the engine's own timings (nanoseconds)."""

    done_reason: str | None
    total_duration_ns: int = 0
    load_duration_ns: int = 0
    prompt_eval_count: int = 0
    prompt_eval_duration_ns: int = 0
    eval_count: int = 0
    eval_duration_ns: int = 0
    raw: dict[str, Any] = field(default_factory=dict)
    # Prompt tokens served from the engine's cache, where it says so (llama-server's
    # timings.cache_n, OpenAI usage.prompt_tokens_details.cached_tokens); None when it does
    # not (Ollama). prompt_eval_count is then the whole prompt and prompt_eval_duration
    # covers only the uncached part.
    prompt_cached_count: int | None = None
    # The token ids of the prompt and what was generated, where the engine returns them
    # (Ollama's /api/generate `context`): two prompts' ids show exactly what they share.
    context_ids: tuple[int, ...] | None = None
    # Speculative decoding, where the response says it (llama-server's timings.draft_n and
    # draft_n_accepted): tokens the draft proposed and how many the target accepted.
    draft_tokens: int | None = None
    draft_accepted: int | None = None


@dataclass(frozen=True)
class PullEvent:
    """One line of a pull's progress stream."""

    status: str
    digest: str | None = None
    total: int | None = None
    completed: int | None = None

    def __post_init__(self) -> None:  # the engine's (or the registry's) words, shown as they come
        object.__setattr__(self, "status", safe_text(self.status))
        if self.digest is not None:
            object.__setattr__(self, "digest", safe_text(self.digest))


StreamEvent = TokenEvent | DoneEvent


@runtime_checkable
class Engine(Protocol):
    kind: str
    host: str

    async def version(self) -> str: ...

    async def ps(self) -> list[ResidentModel]: ...

    async def tags(self) -> list[LocalModel]: ...

    async def show(self, model: str) -> ShowInfo: ...

    def generate(
        self,
        model: str,
        prompt: str,
        *,
        options: dict[str, Any] | None = None,
        keep_alive: float | str | None = None,
        think: bool | None = None,
    ) -> AsyncIterator[StreamEvent]: ...

    async def close(self) -> None: ...
