"""The llama-server runner beside each resident Ollama model: found, read, and shown.

Ollama >= 0.30 serves a GGUF model from an upstream llama-server child on a loopback port
(core/runner_facts.py). Its /props, /slots and /metrics tell what Ollama's API hides: the
runner's context per slot and its slots, its build, each request's prompt-cache count and,
where /metrics is on, the speculative-decoding counters. A runner is tied to its model by
the weights: its `--model` is the blob that /api/show's Modelfile names on its FROM line
(/api/ps's `digest` is the manifest's, not the blob's).

Two users:
- `RunnerWatch` (a bench or an eval, async): one runner per benched model, read around each
  request;
- `ResidentRunners` (the dashboard's engine sampling thread, blocking): the runners of the
  resident models, read again only when the resident set changes.
Where no runner can be read (a remote engine, another user's process under hidepid, Ollama
before 0.30, a model on the MLX runner) the reason is kept and said once; everything else
behaves as before.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkctl.core import runner_facts as rf
from sparkctl.core.engine_identity import version_at_least
from sparkctl.core.specdec import SpecCounts

# what the runner's numbers mean for a run, said in its tags
SPEC_SOURCE = ("Ollama's llama-server runner /metrics (spec_decode_num_draft_tokens, "
               "spec_decode_num_accepted_tokens), differenced around each request")
METRICS_OFF = ("Ollama starts its llama-server runners without --metrics: set LLAMA_ARG_ENDPOINT_METRICS=1 in "
               "the Ollama server's environment (its runners inherit it) to have acceptance read")
CACHE_FROM_METRICS = "runner /metrics llamacpp:prompt_tokens_cached_total, differenced around the request"
CACHE_FROM_SLOTS = "runner /slots n_prompt_tokens_cache of the processing slot, read at the first token"
RETRY_S = 10.0  # a runner still loading (its /props not answering yet) is read again this much later


def match(launches: Sequence[rf.RunnerLaunch], model_path: str) -> rf.RunnerLaunch | None:
    """The runner whose --model is `model_path` (the same file, however the path is spelt)."""
    if not model_path:
        return None
    for launch in launches:
        if launch.model == model_path:
            return launch
    real = os.path.realpath(model_path)
    for launch in launches:
        if launch.model and os.path.realpath(launch.model) == real:
            return launch
    return None


def read_facts(launch: rf.RunnerLaunch) -> rf.RunnerFacts:
    """The runner's facts: its command line and /props (blocking, short timeout)."""
    from sparkctl.probes.ollama_runner import RunnerReadError, get_json

    if launch.port is None:
        return rf.facts(launch, None, "no --port on its command line")
    try:
        return rf.facts(launch, get_json(launch.port, "/props"))
    except RunnerReadError as exc:
        return rf.facts(launch, None, str(exc))


def spec_counts(c: rf.RunnerCounters | None) -> SpecCounts | None:
    """A /metrics reading as the bench's speculative figures (None: the runner counts none,
    it was started without a draft)."""
    if c is None or c.draft_tokens is None:
        return None
    return SpecCounts(drafted=c.draft_tokens, accepted=c.accepted, drafts=c.drafts)


@dataclass
class _Located:
    launch: rf.RunnerLaunch
    facts: rf.RunnerFacts


class RunnerWatch:
    """The runners of the models a bench or an eval runs (Ollama only; `active` is False for
    every other engine, whose own API already says these things)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.active = getattr(engine, "kind", "") == "ollama"
        self._found: dict[str, _Located] = {}
        self.notes: dict[str, str] = {}  # model -> why its runner is not read

    def facts(self, model: str) -> rf.RunnerFacts | None:
        found = self._found.get(model)
        return found.facts if found else None

    async def locate(self, model: str, model_path: str) -> rf.RunnerFacts | None:
        """Find and read the runner serving `model` (loaded already); None with `notes[model]`
        set when there is none to read."""
        if not self.active:
            return None
        from sparkctl.probes.ollama_runner import scan

        found = await asyncio.to_thread(scan, self.engine.host)
        launch = match(found.launches, model_path)
        if launch is None:
            if found.note:
                self.notes[model] = found.note
            elif not model_path:
                self.notes[model] = "the engine did not say where the model's weights are (/api/show FROM)"
            else:
                self.notes[model] = f"no llama-server runner has --model {model_path}"
            return None
        facts = await asyncio.to_thread(read_facts, launch)
        self._found[model] = _Located(launch, facts)
        return facts

    def tags(self, model: str) -> dict[str, str]:
        found = self._found.get(model)
        if found is not None:
            return found.facts.tags()
        if self.active and model in self.notes:
            return {"runner.note": f"runner not read: {self.notes[model]}"}
        return {}

    def metrics_on(self, model: str) -> bool:
        found = self._found.get(model)
        return bool(found and found.facts.metrics_endpoint)

    def slots_on(self, model: str) -> bool:
        found = self._found.get(model)
        return bool(found and found.facts.slots_endpoint is not False and found.launch.port)

    async def counters(self, model: str) -> rf.RunnerCounters | None:
        """The runner's cumulative counters now (None without /metrics, or when unreadable:
        figures are extra, a failed read never fails the request)."""
        if not self.metrics_on(model):
            return None
        from sparkctl.probes.ollama_runner import RunnerReadError, read_metrics

        port = self._found[model].launch.port
        try:
            text = await asyncio.to_thread(read_metrics, port)
        except RunnerReadError:
            return None
        return None if text is None else rf.parse_metrics(text)

    async def cache_n_now(self, model: str) -> int | None:
        """The prompt-cache count of the request the runner is processing now (/slots)."""
        if not self.slots_on(model):
            return None
        return rf.processing_cache_n(await self._slots(model))

    async def sampling(self, model: str) -> tuple[int, dict[str, Any]] | None:
        """(task id, sampling) the runner's newest request ran with (/slots)."""
        if not self.slots_on(model):
            return None
        return rf.recent_sampling(await self._slots(model))

    async def _slots(self, model: str) -> Any:
        from sparkctl.probes.ollama_runner import RunnerReadError, get_json

        try:
            return await asyncio.to_thread(get_json, self._found[model].launch.port, "/slots")
        except RunnerReadError:
            return None

    def per_request_cache(self, model: str) -> str:
        """How each request's prompt-cache count is read ("" when it is not)."""
        if self.metrics_on(model):
            return CACHE_FROM_METRICS
        if self.slots_on(model):
            return CACHE_FROM_SLOTS
        return ""


def evaluated_tokens(prompt_eval_count: int, cache_n: int, engine_version: str) -> int:
    """Prompt tokens the runner evaluated: Ollama reports cache_n + prompt_n as its
    prompt_eval_count from 0.30.1 (llamaServerTimings.promptEvalCount), prompt_n alone in 0.30.0."""
    if version_at_least(engine_version, (0, 30, 1)):
        return max(0, prompt_eval_count - cache_n)
    return prompt_eval_count


# ---- the dashboard -----------------------------------------------------------------------


class ResidentRunners:
    """The runners of the resident models, for the dashboard: read in the engine's sampling
    thread, again only when the set of resident models (name, digest, context) changes, or a
    little later when a runner was still loading. The weights path of each model is asked
    once per digest (/api/show)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._key: tuple | None = None
        self._paths: dict[tuple[str, str], str] = {}
        self.facts: dict[str, rf.RunnerFacts] = {}
        self.note = ""  # why none is shown, when the engine is on this machine
        self.local = False
        self._retry_at: float | None = None

    def refresh(self, resident: Sequence[Any]) -> bool:
        """Read the runners again if the resident set changed; True when what is shown changed."""
        key = tuple(sorted((m.name, m.digest, m.context_length) for m in resident))
        if key == self._key and (self._retry_at is None or time.monotonic() < self._retry_at):
            return False
        self._key = key
        before = (dict(self.facts), self.note)
        self.facts, self.note = self._read(resident)
        loading = any(f.build is None and f.note for f in self.facts.values())
        self._retry_at = time.monotonic() + RETRY_S if loading else None
        return (self.facts, self.note) != before

    def _read(self, resident: Sequence[Any]) -> tuple[dict[str, rf.RunnerFacts], str]:
        if getattr(self.engine, "kind", "") != "ollama" or not resident:
            return {}, ""
        from sparkctl.engines.base import EngineError
        from sparkctl.probes.ollama_runner import scan

        found = scan(self.engine.host)
        self.local = found.local
        if not found.launches:
            return {}, found.note
        path_of = getattr(self.engine, "model_path_blocking", None)
        out: dict[str, rf.RunnerFacts] = {}
        for m in resident:
            key = (m.name, m.digest)
            if key not in self._paths and callable(path_of):
                try:
                    self._paths[key] = path_of(m.name)
                except EngineError:
                    continue  # asked again when the resident set next changes
            launch = match(found.launches, self._paths.get(key, ""))
            if launch is None and len(found.launches) == 1 and len(resident) == 1:
                launch = found.launches[0]  # one model, one runner: nothing else it could be
            if launch is not None:
                out[m.name] = read_facts(launch)
        missing = [m.name for m in resident if m.name not in out]
        note = f"no llama-server runner found for {', '.join(missing)}" if missing and out else ""
        return out, note
