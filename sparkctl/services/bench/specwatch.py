"""The bench's view of speculative decoding: each repetition's drafted and accepted tokens
(from the response where the engine puts them there, else from its counters read before and
after the request), the run's totals, and the tags that say where the figures came from.

Counters (vLLM) are read around each request only while requests run one at a time; a
sweep cell with several requests in flight reads them around the whole cell instead
(`per_rep = False`), since a request's difference would hold its neighbours' drafts too.
"""

from __future__ import annotations

from typing import Any

from sparkctl.core import specdec as core
from sparkctl.engines import specdec
from sparkctl.engines.base import DoneEvent, EngineError, ShowInfo


class SpecWatch:
    def __init__(self, engine: Any, runner: Any = None) -> None:
        self.engine = engine
        self.per_rep = True
        self._reads = callable(getattr(engine, "spec_counters", None))
        # Ollama: its llama-server runner's /metrics (services/runners.RunnerWatch), where on
        self.runner = runner
        self.runner_counted: set[str] = set()  # models whose figures came from their runner

    async def read(self, model: str) -> core.SpecCounts | None:
        """The engine's cumulative figures now (None where it keeps none)."""
        return (await self.read_full(model))[0]

    async def read_full(self, model: str) -> tuple[core.SpecCounts | None, Any]:
        """(speculative figures, the runner's whole /metrics reading or None): one read for
        both the draft counters and the prompt-cache counter."""
        if self.runner is not None and self.runner.metrics_on(model):
            from sparkctl.services.runners import spec_counts

            counters = await self.runner.counters(model)
            spec = spec_counts(counters)
            if spec is not None:
                self.runner_counted.add(model)
            return spec, counters
        if not self._reads:
            return None, None
        try:
            return await self.engine.spec_counters(model), None
        except EngineError:
            return None, None  # the figures are extra: a failed read never fails the repetition

    def rep(self, done: DoneEvent | None, before: core.SpecCounts | None,
            after: core.SpecCounts | None) -> core.SpecCounts | None:
        """One repetition's figures: the response's own, else the counters' difference,
        else SGLang's server-wide accept length as it stood after the request."""
        own = specdec.from_done(done) if done is not None else None
        if own is not None:
            return own
        if after is None:
            return None
        if after.drafted is None and after.accepted is None:
            return after  # an accept length only (SGLang): not a counter to difference
        if before is None:
            return None
        return after.minus(before)

    def tags(self, show: ShowInfo | None, summary: dict[str, float], model: str = "") -> dict[str, str]:
        kind = getattr(self.engine, "kind", "")
        tags: dict[str, str] = {}
        if kind == "ollama":
            from sparkctl.services import runners

            tags["spec.draft"] = specdec.ollama_draft(show)
            model = model or (show.name if show is not None else "")
            facts = self.runner.facts(model) if self.runner is not None and model else None
            if facts is not None and facts.spec_type:
                tags["spec.draft"] = f"runner --spec-type {facts.spec_type}" + (
                    f", --spec-draft-n-max {facts.draft_n_max}" if facts.draft_n_max is not None else "")
            if model in self.runner_counted:
                reported = any(k.startswith("spec_") for k in summary)
                tags["spec.source"] = runners.SPEC_SOURCE if reported else f"none reported ({runners.SPEC_SOURCE})"
                tags["spec.active"] = "true" if summary.get("spec_draft_tokens_total") else "false"
                return tags
            why = specdec.OLLAMA_NOT_EXPOSED
            if facts is not None and facts.spec_type and not facts.metrics_endpoint:
                why += "; " + runners.METRICS_OFF
            tags["spec.acceptance"] = why
            tags["spec.source"] = "none (" + why + ")"
            return tags
        source = getattr(self.engine, "spec_source", "") or "none"
        reported = any(k.startswith("spec_") for k in summary)
        tags["spec.source"] = source if reported else f"none reported ({source})" if source != "none" else "none"
        tags["spec.active"] = "true" if (summary.get("spec_draft_tokens_total") or summary.get("spec_accept_len_total")) \
            else "false"
        return tags
