"""BenchRunner: a fixed-prompt, repeated, guarded decode benchmark of one or more models.

Timing and counting happen here, not in a widget: the runner stamps every streamed piece
with the client clock, batches what it reports to the UI (every ~50 ms) and keeps the
engine's own figures from the final chunk beside the client's. Each model's run becomes a
RunRecord that is spooled, then written to MLflow, from a worker thread; every finished
repetition is journaled to the spool first, so a crash loses at most the one in flight.

Hygiene (DESIGN.md "Bench hygiene"): each measured request pays its whole prefill unless
the user asked for a warm cache (core.prefill), lane models are noted before and put back
after (lanes.py), one bench runs per engine (lock.py), and load the bench cannot explain
is flagged.
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
from dataclasses import replace
from typing import Any, Callable

from sparkctl import __version__
from sparkctl.config import Config
from sparkctl.core import depthtext, genai, guards, model_shape, prefill, specdec
from sparkctl.core.budget import build_budget
from sparkctl.core.engine_identity import version_at_least
from sparkctl.core.gpu import is_throttled
from sparkctl.core.keepalive import parse_keep_alive
from sparkctl.core.names import model_key
from sparkctl.core.placement import placement
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.roofline import active_params, bits_per_weight_from_quant, bits_per_weight_from_size, roofline
from sparkctl.core.snapshots import GIB, MemInfo, ResidentModel, Unavailable
from sparkctl.core.stats import is_stable, interleave, summarize
from sparkctl.core.workload import WorkloadIdentity
from sparkctl.engines.base import DoneEvent, EngineError, EngineUnreachable, ModelNotFound, ShowInfo, TokenEvent
from sparkctl.services.bench import coldness, engineid
from sparkctl.services.bench.lanes import LaneRestore
from sparkctl.services.bench.residency import ResidencyGuard
from sparkctl.services.bench.lock import BenchLock
from sparkctl.services.bench.recovery import repair_before
from sparkctl.services.bench.sampler import GpuSampler
from sparkctl.services.bench.specwatch import SpecWatch
from sparkctl.services.bench.wrapup import finish_shielded
from sparkctl.services.bench.events import BenchFinished, Live, Notice, Phase, RepDone, RepStarted, Sink
from sparkctl.services.bench.results import ModelRun, RepResult
from sparkctl.services.bench.settings import BenchRefused, BenchSettings
from sparkctl.services.runners import RunnerWatch

UI_BATCH_S = 0.05
# Server time not spent loading, prefilling or decoding: waiting behind another request.
QUEUE_WAIT_FLOOR_S = 0.5
QUEUE_WAIT_SHARE = 0.10

# Flags that make a run's numbers not comparable: they count against guard.valid.
INVALIDATING = ("reload detected", "prompt truncated", "GPU throttled", "foreign load",
                "lane restore failed")


class BenchRunner:
    def __init__(self, cfg: Config, engine: Any, probes: Any, settings: BenchSettings,
                 sink: Sink | None = None, recorder: Callable[[Any], Any] | None = None,
                 journal: Callable[[Any], Any] | None = None) -> None:
        self.cfg = cfg
        self.engine = engine
        self.probes = probes
        self.s = settings
        self._sink = sink or (lambda ev: None)
        self.recorder = recorder  # blocking: RunRecord -> SyncResult; run via to_thread
        self.journal = journal  # blocking: RunRecord (so far) -> None; run via to_thread
        self.engine_version = "unknown"
        self.host_facts: dict[str, str] = {}
        self._shows: dict[str, ShowInfo] = {}
        self.interrupted: RepResult | None = None
        self._digests: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._ctx_requested: int | None = None  # set when the server's context replaced ours
        self._ctx: dict[str, int] = {}  # per model: the bench's num_ctx, or its resident one
        self._ctx_note: dict[str, str] = {}
        self._nonce = secrets.token_hex(3)
        self._requests: dict[str, int] = {}  # per model: requests sent, for the preamble
        self.lane_restore: LaneRestore | None = None
        self.residency: ResidencyGuard | None = None  # what was resident before, put back after
        self._sampler: GpuSampler | None = None
        self._start_ms = 0
        self._journal_failed = False
        self._windows: list[tuple[float, float]] = []  # every request of the bench, all models
        self._openings: dict[str, coldness.Opening] = {}  # per model: the template opening cold requests share
        # Ollama's llama-server runner beside each benched model (services/runners.py)
        self._runner = RunnerWatch(engine)
        self._spec = SpecWatch(engine, self._runner if self._runner.active else None)
        self._runner_said: set[str] = set()  # why a runner is not read: said once per bench
        self._identity: dict[str, dict[str, str]] = {}  # per model: runner, its build, flash attention, KV cache
        self._acceptance: dict[str, float] = {}  # per model: the last repetition's acceptance, for the live view

    def sink(self, ev: Any) -> None:
        """Report to the UI. A UI that fails (a dead terminal after an ssh hang-up raises
        EIO) must never change what the bench does or records."""
        try:
            self._sink(ev)
        except Exception:
            self._sink = lambda ev: None

    @property
    def cold_by_request(self) -> bool:
        """Whether cold prefill is obtained by changing the prompt's start (every engine but
        llama-server, where the adapter turns its prompt cache off instead)."""
        return getattr(self.engine, "kind", "") != "llama.cpp"

    def keep_alive(self, model: str) -> Any:
        """A model that was resident before the bench gets no keep_alive (Ollama keeps its
        session); one the bench loads gets the bench's."""
        wire = self.s.keep_alive_wire
        return wire if self.residency is None else self.residency.keep_alive(model, wire)

    def num_ctx(self, model: str) -> int:
        return self._ctx.get(model, self.s.num_ctx)

    def options(self, model: str) -> dict[str, Any]:
        opts = dict(self.s.options, num_ctx=self.num_ctx(model))
        if self.s.cache == prefill.WARM and getattr(self.engine, "kind", "") == "llama.cpp":
            opts["cache_prompt"] = True
        return opts

    # ---- preflight -------------------------------------------------------------------------

    async def preflight(self, models: list[str]) -> dict[str, ShowInfo]:
        self.sink(Phase("checking the engine"))
        self.engine_version = await self.engine.version()
        shows = {}
        for m in models:
            shows[m] = await self.engine.show(m)
        self._shows = shows
        if getattr(self.engine, "fixed_context", False):
            # OpenAI-compatible servers fix the context at start: record theirs, not ours.
            ctx = next((sh.model_info.get("server.n_ctx") for sh in shows.values()
                        if isinstance(sh.model_info.get("server.n_ctx"), int)), None)
            if ctx and ctx != self.s.num_ctx:
                self._ctx_requested = self.s.num_ctx
                self.s = replace(self.s, num_ctx=ctx)
        elif getattr(self.engine, "reports_placement", True) and not self.s.ctx_explicit:
            # A resident model benched at its own context is not reloaded (a reload would
            # change a lane model the user's router relies on).
            resident = {model_key(r.name): r for r in await self.engine.ps()}
            for m in models:
                rm = resident.get(model_key(m))
                if rm is not None and rm.context_length and rm.context_length != self.s.num_ctx:
                    self._ctx[m] = rm.context_length
                    self._ctx_note[m] = (
                        f"num_ctx {rm.context_length}: {m} is resident at that context, so the bench "
                        f"uses it instead of {self.s.num_ctx} to avoid a reload (--ctx forces one)")
                    # said before any request, even when output is piped: the context is part
                    # of what the run measures (a run at another context is not comparable)
                    self.sink(Notice(self._ctx_note[m]))
            if len({self.num_ctx(m) for m in models}) > 1:
                at = ", ".join(f"{m} at {self.num_ctx(m)}" for m in models)
                self.sink(Notice(f"contexts differ ({at}): these runs will not compare like for like; "
                                 f"--ctx N benches every model at one context"))
        try:
            for lm in await self.engine.tags():
                for m in models:
                    if model_key(lm.name) == model_key(m):
                        self._sizes[m] = lm.size
                        self._digests.setdefault(m, lm.digest)
        except EngineError:
            pass  # sizes only refine the roofline; the bench does not need them
        host = await asyncio.to_thread(self.probes.read)
        self.host_facts = _host_tags(host)
        if isinstance(host.meminfo, MemInfo):
            resident = await self.engine.ps()
            budget = build_budget(host.meminfo, host.gpu, resident, self.cfg.lane_of,
                                  self.cfg.budget.reserve_gib, self.cfg.budget.warn_gib)
            self.host_facts["guard.available_gib"] = f"{budget.available / GIB:.2f}"
            if budget.available <= budget.reserve:
                raise BenchRefused(
                    f"available memory {budget.available / GIB:.1f} GiB is at or below the "
                    f"{budget.reserve / GIB:.1f} GiB reserve; unload a model first"
                )
            self._budget = budget
        if self.engine.kind == "ollama" and self.s.mode == "beside":
            await self._check_fit(models)
        return shows

    async def _check_fit(self, models: list[str]) -> None:
        """The Models screen's load guard, before the bench loads anything: a model that does
        not fit, or fits only by evicting a lane model, is refused (a Spark that runs out of
        unified memory can freeze). Solo mode unloads the others first, so it is skipped."""
        from sparkctl.services.models import fit_check, refusal_reason

        resident = {model_key(r.name): r for r in await self.engine.ps()}
        for m in models:
            have = resident.get(model_key(m))
            if have is not None and have.context_length == self.num_ctx(m):
                continue  # already loaded as the bench will use it
            self.sink(Phase(f"checking that {m} fits at num_ctx {self.num_ctx(m)}"))
            fit = await fit_check(self.cfg, self.engine, self.probes, m, num_ctx=self.num_ctx(m))
            reason = refusal_reason(fit)
            if reason:
                raise BenchRefused(f"{reason}; unload something, lower --ctx, or use --solo")

    def think_for(self, model: str) -> bool | None:
        """Only name `think` for models that can: Ollama answers 400 to think on others."""
        show = self._shows.get(model)
        if show is None or "thinking" not in show.capabilities:
            return None
        return self.s.think

    def _prompt(self, model: str) -> tuple[str, str, str | None]:
        """(prompt to send, what was added to the fixed body, system prompt to send or None)
        for the model's next request."""
        k = self._requests.get(model, 0)
        self._requests[model] = k + 1
        body = self.s.prompt
        if self.s.cache == prefill.WARM:
            full = prefill.warm_prompt(body, self._nonce, k)
            if self.s.follow_up_chars:
                # llama-benchy's pp after a cached context: fresh text, different for every request
                full += "\n\n" + depthtext.depth_text(self.s.follow_up_chars, seed=1 + k)
            return full, full[len(body):], None
        prompt, system, added = coldness.cold_request(body, self._nonce, k, self.nonce_position(model),
                                                      self._model_system(model))
        return prompt, added, system

    def _model_system(self, model: str) -> str:
        show = self._shows.get(model)
        return show.system if show is not None else ""

    def nonce_position(self, model: str) -> str:
        if not self.cold_by_request:
            return coldness.NONCE_NONE
        return coldness.nonce_position(getattr(self.engine, "kind", ""), self._model_system(model))

    async def measure_opening(self, model: str, counted_per_request: bool = True) -> None:
        """Two minimal probes: the template opening every cold request of `model` shares.
        Not needed where Ollama's runner counts each request's reused tokens and every request
        runs alone (`counted_per_request`; a sweep's concurrent cells cannot tell whose count
        is whose, so a sweep still probes)."""
        if self.s.cache != prefill.COLD:
            return
        how = self._runner.per_request_cache(model) if counted_per_request else ""
        if how:
            # Ollama >= 0.30: the runner counts each request's reused tokens itself; no probes
            self._openings[model] = coldness.Opening(
                None, f"{coldness.METHOD_RUNNER}: {how}",
                counts_shared=version_at_least(self.engine_version, (0, 30, 1)))
            self.sink(Phase(f"cold prefill of {model}: the runner counts each request's cached tokens ({how})"))
            return
        opts = dict(self.options(model), num_predict=1)
        if getattr(self.engine, "kind", "") == "llama.cpp":
            opts["cache_prompt"] = True  # the probes must reuse what they share, to show it

        ceiling = self.s.timeout_s

        async def send(prompt: str, system: str | None):
            # sent like a repetition (run_rep): the same options and keep-alive, so the
            # probes change nothing a repetition would not; and bounded like one, by the
            # per-request ceiling (an engine that stalls mid-probe must not hold the bench)
            async def one():
                done = None
                stream = self.engine.generate(model, prompt, options=opts, keep_alive=self.keep_alive(model),
                                              think=self.think_for(model), **coldness.request_kwargs(system))
                try:
                    async for ev in stream:
                        if isinstance(ev, DoneEvent):
                            done = ev
                finally:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await aclose()
                return done

            return await asyncio.wait_for(one(), timeout=ceiling)

        ids = getattr(self.engine, "prompt_token_ids", None)
        token_ids = (lambda p, sy: asyncio.wait_for(ids(model, p, sy), timeout=ceiling)) if callable(ids) else None
        try:
            opening = await coldness.measure_opening(self.nonce_position(model), self._model_system(model),
                                                     self._nonce, send, token_ids)
        except EngineError as exc:
            opening = coldness.Opening(None, f"not measured: {redact_text(exc.message)}")
        except asyncio.TimeoutError:
            opening = coldness.Opening(None, f"not measured: the engine did not answer a probe within the "
                                             f"{ceiling:g} s per-request ceiling")
        self._openings[model] = opening
        self.sink(Phase(coldness.describe(opening, self.nonce_position(model))))

    async def read_identity(self, model: str) -> None:
        """The runner serving `model` (once it is loaded), its build, flash attention, KV cache."""
        try:
            self._identity[model] = await engineid.read_identity(self.engine, model, self._shows.get(model),
                                                                 self.engine_version, self.cfg)
        except EngineError as exc:
            self._identity[model] = {"engine.identity_error": redact_text(exc.message)}
        await self.locate_runner(model)

    async def locate_runner(self, model: str) -> None:
        """Ollama: the llama-server runner serving `model`, read once it is loaded; why not,
        said once per bench (everything then works as without it)."""
        if not self._runner.active or self._runner.facts(model) is not None:
            return
        show = self._shows.get(model)
        facts = await self._runner.locate(model, show.model_path if show is not None else "")
        if facts is not None:
            self.sink(Phase(f"{model}'s runner: {facts.short()}"))
            return
        note = self._runner.notes.get(model, "")
        if note and note not in self._runner_said:
            self._runner_said.add(note)
            self.sink(Phase(f"runner not read ({note}): speculative acceptance and prompt-cache counts as "
                            "Ollama's API gives them"))

    # ---- one repetition ---------------------------------------------------------------------

    async def run_rep(self, model: str, index: int, warmup: bool) -> RepResult:
        r = RepResult(model, index, warmup)
        prompt, r.preamble, system = self._prompt(model)
        before_ps = await self._others_expiry(model)
        spec_before, counters_before = await self._spec.read_full(model) if self._spec.per_rep else (None, None)
        # no /metrics: the runner's /slots tells the request's cache count while it runs
        peek_cache = (self._spec.per_rep and counters_before is None and self._runner.slots_on(model))
        peek: asyncio.Future | None = None
        stream = self.engine.generate(model, prompt, options=self.options(model),
                                      keep_alive=self.keep_alive(model), think=self.think_for(model),
                                      **coldness.request_kwargs(system))
        t_send = time.perf_counter()
        t_first = t_last = None
        answer: list[str] = []
        thinking: list[str] = []
        pend_a: list[str] = []
        pend_t: list[str] = []
        last_flush = t_send
        done: DoneEvent | None = None

        async def consume() -> None:
            nonlocal t_first, t_last, done, peek
            async for ev in stream:
                now = time.perf_counter()
                if isinstance(ev, TokenEvent):
                    if not ev.text:
                        continue
                    if t_first is None:
                        t_first = now
                        if peek_cache:
                            peek = asyncio.ensure_future(self._runner.cache_n_now(model))
                    t_last = now
                    r.client_tokens += 1
                    if ev.thinking:
                        r.thinking_tokens += 1
                        thinking.append(ev.text)
                        pend_t.append(ev.text)
                    else:
                        answer.append(ev.text)
                        pend_a.append(ev.text)
                    if now - last_flush >= UI_BATCH_S:
                        flush(now)
                elif isinstance(ev, DoneEvent):
                    done = ev

        def flush(now: float) -> None:
            nonlocal last_flush
            last_flush = now
            self.sink(Live(model, "".join(pend_a), "".join(pend_t), r.client_tokens, now - t_send,
                           None if t_first is None else t_first - t_send, _client_tps(r.client_tokens, t_first, t_last),
                           self._acceptance.get(model)))
            pend_a.clear()
            pend_t.clear()

        cancelled = False
        try:
            await asyncio.wait_for(consume(), timeout=self.s.timeout_s)
        except asyncio.CancelledError:
            # stopped by the user or a signal: keep what streamed, marked, then stop
            cancelled = True
            r.error = "interrupted"
            r.done_reason = "interrupted"
        except asyncio.TimeoutError:
            r.dnf = True
            r.done_reason = "dnf"
        except EngineError as exc:
            r.error = redact_text(exc.message)
            r.done_reason = "error"
            if isinstance(exc, EngineUnreachable):
                if peek is not None:
                    peek.cancel()
                raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass
        if self._sampler is not None and not cancelled:
            await asyncio.to_thread(self._sampler.sample_once)
        end = time.perf_counter()
        flush(end)
        r.wall_s = end - t_send
        r.window = (t_send, end)
        self._windows.append(r.window)
        r.output = "".join(answer)
        r.thinking = "".join(thinking)
        r.ttft_s = None if t_first is None else t_first - t_send
        r.client_decode_tps = _client_tps(r.client_tokens, t_first, t_last)
        r.client_decode_basis = "streamed chunks"
        if t_first is not None and t_last is not None:
            r.decode_window = (t_first, t_last)
        if done is not None:
            r.raw_final = done.raw
            r.done_reason = done.done_reason
            r.eval_count = done.eval_count
            r.prompt_eval_count = done.prompt_eval_count
            r.prompt_eval_duration_ns = done.prompt_eval_duration_ns or None
            if done.eval_duration_ns > 0:
                r.engine_decode_tps = done.eval_count / done.eval_duration_ns * 1e9
            if done.eval_count and t_first is not None and t_last is not None and t_last > t_first:
                # A chunk may carry several tokens or none: count the engine's tokens over the
                # client's first-to-last window rather than chunks.
                r.client_decode_tps = (done.eval_count - 1) / (t_last - t_first)
                r.client_decode_basis = "engine eval_count"
            r.prompt_cached_tokens = done.prompt_cached_count
            # the duration covers only what was evaluated: count only that (coldness.py)
            r.prompt_evaluated = coldness.evaluated_tokens(done, self._openings.get(model))
            if done.prompt_eval_duration_ns > 0 and r.prompt_evaluated > 0:
                r.prefill_tps = r.prompt_evaluated / done.prompt_eval_duration_ns * 1e9
            # Ollama omits a zero load_duration (0 is a measurement); other engines never send it
            r.load_s = done.load_duration_ns / 1e9 if (done.load_duration_ns or self.engine.kind == "ollama") else None
            r.total_s = done.total_duration_ns / 1e9 if done.total_duration_ns else None
            r.reload = (not warmup) and guards.reload_detected(
                done.load_duration_ns, int(self.s.reload_threshold_s * 1e9))
            if done.total_duration_ns:
                explained = done.load_duration_ns + done.prompt_eval_duration_ns + done.eval_duration_ns
                wait = (done.total_duration_ns - explained) / 1e9
                r.queue_wait_s = max(0.0, wait)
                if wait > max(QUEUE_WAIT_FLOOR_S, QUEUE_WAIT_SHARE * done.total_duration_ns / 1e9):
                    r.foreign = (f"the engine spent {wait:.1f} s of the request neither loading, "
                                 "prefilling nor decoding (queued behind another request)")
        elif r.dnf or cancelled:
            r.eval_count = r.client_tokens
        if not cancelled:
            spec_after, counters_after = await self._spec.read_full(model) if self._spec.per_rep else (None, None)
            r.spec = self._spec.rep(done, spec_before, spec_after)
            if r.spec is not None and r.spec.acceptance is not None:
                self._acceptance[model] = r.spec.acceptance * 100
            await self._runner_cache(r, done, counters_before, counters_after, peek)
        elif peek is not None:
            peek.cancel()
        if not cancelled and not r.foreign:
            moved = await self._others_moved(before_ps)
            if moved:
                r.foreign = f"another client used the engine during this request ({moved})"
        if cancelled:
            self.interrupted = r
            raise asyncio.CancelledError
        return r

    async def _runner_cache(self, r: RepResult, done: DoneEvent | None, before: Any, after: Any,
                            peek: asyncio.Future | None) -> None:
        """The request's prompt-cache count from Ollama's runner (its /metrics counter
        differenced, else its /slots read at the first token), and what that makes of the
        evaluated prompt tokens and the prefill rate."""
        cache_n = None
        if before is not None and after is not None:
            delta = after.minus(before)
            cache_n = delta.prompt_cached
            r.spec_per_pos = delta.accepted_per_pos
        elif peek is not None:
            try:
                cache_n = await peek
            except Exception:  # an extra figure: a failed read changes nothing else
                cache_n = None
        if cache_n is None or done is None or not done.prompt_eval_count:
            return
        from sparkctl.services.runners import evaluated_tokens

        r.prompt_cached_tokens = r.runner_cached = cache_n
        r.cached_counted_apart = not version_at_least(self.engine_version, (0, 30, 1))
        r.prompt_evaluated = evaluated_tokens(done.prompt_eval_count, cache_n, self.engine_version)
        if done.prompt_eval_duration_ns > 0 and r.prompt_evaluated > 0:
            r.prefill_tps = r.prompt_evaluated / done.prompt_eval_duration_ns * 1e9

    async def _others_expiry(self, model: str) -> dict[str, Any] | None:
        """Expiry of every other resident model: Ollama moves a model's expiry when one of
        its requests ends, so a change during ours means someone else was served."""
        if self.engine.kind != "ollama":
            return None
        try:
            resident = await self.engine.ps()
        except EngineError:
            return None
        me = model_key(model)
        return {r.name: r.expires_at for r in resident if model_key(r.name) != me}

    async def _others_moved(self, before: dict[str, Any] | None, skip: set[str] | None = None) -> str:
        if before is None:
            return ""
        try:
            now = {r.name: r.expires_at for r in await self.engine.ps()}
        except EngineError:
            return ""
        mine = {model_key(m) for m in self._requests} | (skip or set())
        moved = []
        for name, t in now.items():
            if model_key(name) in mine:
                continue
            if name not in before:
                moved.append(f"{name} was loaded")
            elif t and before[name] and (t - before[name]).total_seconds() > 0.01:
                moved.append(f"{name} served a request")
        return ", ".join(moved)

    # ---- the whole bench --------------------------------------------------------------------

    async def run(self, models: list[str]) -> list[ModelRun]:
        models = list(dict.fromkeys(models))
        lock = BenchLock(self.engine.host, models)
        await lock.acquire(self.s.wait, lambda text: self.sink(Notice(text)))
        try:
            # what a dead bench left changed is put back before this one looks at what is resident
            await repair_before(self.cfg, self.engine, lambda text: self.sink(Notice(text)), lock_held=True)
            return await self._run_locked(models)
        finally:
            lock.release()

    async def _run_locked(self, models: list[str]) -> list[ModelRun]:
        self._start_ms = int(time.time() * 1000)
        shows = await self.preflight(models)
        runs = {m: ModelRun(m, show=shows[m], num_ctx=self.num_ctx(m), ctx_note=self._ctx_note.get(m, ""))
                for m in models}
        self.residency = ResidencyGuard(self.cfg, self.engine, models, mode=self.s.mode,
                                        keep_loaded=self.s.keep_loaded)
        await self.residency.begin(self.num_ctx, lambda text: self.sink(Notice(text)))
        outcome = "FINISHED"
        try:
            if self.s.mode == "solo":
                await self._unload_others(models)
            self._sampler = GpuSampler(self.gpu_reader()).start()
            if self.s.mode == "solo":
                # Solo: each model alone in memory, one after another. Interleaving would
                # reload a model before every repetition.
                for m in models:
                    for other in models:
                        if other != m:
                            await self._unload_if_resident(other)
                    await self._bench_models([m], runs)
            else:
                await self._bench_models(models, runs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            outcome = "KILLED"
            raise
        except BenchRefused as exc:
            outcome = "FAILED"  # MLflow has no "refused" status: the run says it in its guard tags
            for run in runs.values():
                if not run.completed:
                    run.refused = str(exc)
                    run.invalid.append(f"refused: {exc}")
            raise
        except BaseException:
            outcome = "FAILED"
            raise
        finally:
            # The wrap-up (lanes back, runs recorded) runs as its own task: a second Ctrl-C,
            # SIGHUP or Escape while it runs must not leave production unloaded or a run
            # unrecorded. Further cancellations wait for it.
            wrap_up = await finish_shielded(self._wrap_up(models, runs, outcome),
                                            lambda text: self.sink(Notice(text)))
            # every ending (finished, stopped, failed) shows the runs as recorded: a stopped
            # bench's finished repetitions belong on the screen, not only in MLflow
            if outcome != "FAILED" and not wrap_up.cancelled() and wrap_up.exception() is None:
                self.sink(BenchFinished(list(runs.values())))
        return list(runs.values())

    async def _wrap_up(self, models: list[str], runs: dict[str, "ModelRun"], outcome: str) -> None:
        sampler = self._sampler
        if sampler is not None:
            sampler.stop()
        end_ms = int(time.time() * 1000)
        # Residency first (the journal already holds every finished repetition), so the
        # runs can say whether the engine was left as it was found.
        self.lane_restore = await end_residency(self.residency, self.sink)
        for run in runs.values():
            if outcome != "FINISHED" and not run.completed:
                run.status = outcome  # a model that finished before the failure keeps its run
            self._finish(run, sampler)
        if self.recorder is not None:
            for run in runs.values():
                if run.reps or run.status != "FINISHED":
                    record = self.to_record(run, self._start_ms, end_ms, sampler)
                    result = await asyncio.to_thread(self.recorder, record)
                    if result is not None:
                        run.sync_message = result.message
                        run.run_id = result.run_id
                        run.not_saved = bool(getattr(result, "lost", False))

    async def _journal(self, run: ModelRun) -> None:
        """The run so far (status KILLED until it ends) into the spool, fsynced."""
        if self.journal is None or self._journal_failed:
            return
        try:
            # the run as it would be recorded if the process died now: summary and flags included
            snap = copy.deepcopy(run)
            snap.status = "KILLED"
            self._finish(snap, self._sampler)
            record = self.to_record(snap, self._start_ms, int(time.time() * 1000), self._sampler,
                                    status="KILLED")
            await asyncio.to_thread(self.journal, record)
        except Exception as exc:  # a full disk must not end the bench; say so once
            self._journal_failed = True
            self.sink(Phase(f"journal not written ({exc}); a crash would lose this run"))

    async def _bench_models(self, models: list[str], runs: dict[str, ModelRun]) -> None:
        """Load and check each model, warm each up, then the interleaved repetitions."""
        for m in models:
            self.sink(Phase(f"loading {m}"))
            await self.check_placement(runs[m], m, before=True)
            await self._idle_check(runs[m])
            await self.read_identity(m)  # first: Ollama's runner, if read, makes the opening's probes needless
            await self.measure_opening(m)
        # Other models' expiries from here to the first measured request: one that moves was
        # serving someone else while ours loaded and warmed up (a shared engine).
        bench_keys = {model_key(m) for m in models}
        settled = await self._others_expiry(*models[:1]) if models else None
        if settled is not None:
            settled = {k: v for k, v in settled.items() if model_key(k) not in bench_keys}
        for m in models:
            warmups = self.s.warmup
            if self.s.cache == prefill.WARM:
                warmups = max(1, warmups)  # the first request fills the cache the reps reuse
            for w in range(warmups):
                self.sink(RepStarted(m, -1 - w, True, warmups))
                res = await self.run_rep(m, -1 - w, True)
                runs[m].warmups.append(res)
                self.sink(RepDone(res))
        busy = await self._others_moved(settled, skip=bench_keys)
        if busy:
            for m in models:
                runs[m].flags.append(f"engine busy before the repetitions: another client was served ({busy})")
        until = bool(self.s.until_resolved) and len(models) == 2
        total = self.s.until_resolved if until else self.s.reps
        for m, i in interleave(models, total):
            self.sink(RepStarted(m, i, False, total))
            try:
                res = await self.run_rep(m, i, False)
            except asyncio.CancelledError:
                if self.interrupted is not None:  # the partial repetition goes in the KILLED run
                    runs[m].reps.append(self.interrupted)
                raise
            runs[m].reps.append(res)
            self.sink(RepDone(res))
            await self._journal(runs[m])
            # --until-resolved checks after every round, whatever its ceiling is
            if until and m == models[-1] and self._resolved(runs[models[0]], runs[models[1]], total):
                break
        for m in models:
            await self.check_placement(runs[m], m, before=False)
            runs[m].completed = True

    def _resolved(self, a: ModelRun, b: ModelRun, max_reps: int) -> bool:
        """--until-resolved: after each round, whether the decode difference is settled."""
        from sparkctl.core.compare import until_resolved

        def values(run: ModelRun) -> list[float]:
            return [r.engine_decode_tps for r in run.reps if r.engine_decode_tps and not r.error and not r.dnf]

        why = until_resolved(values(a), values(b), width_pct=2.0, max_reps=max_reps)
        if why is None:
            return False
        for run in (a, b):
            run.flags.append(f"until-resolved: {why} after {len(run.reps)} repetition(s)")
        self.sink(Phase(f"{why} after {len(b.reps)} repetitions each"))
        return True

    async def _idle_check(self, run: ModelRun) -> None:
        """Before a model's repetitions: is anything else using the GPU? NVML's utilization
        averages over ~1 s, so it is read after a pause with no request of ours."""
        gpu_probe = getattr(self.probes, "gpu_probe", None)
        if gpu_probe is None or self._sampler is None:
            return
        from sparkctl.services.bench.sampler import NVML_AVERAGING_S

        await asyncio.sleep(NVML_AVERAGING_S)
        try:
            report = await asyncio.to_thread(self.gpu_reader())
        except Exception:
            return
        sample = self._sampler.aggregate(report)
        util = sample.get("util_pct") if sample else None
        if util is not None and util >= 20.0:
            run.flags.append(f"foreign load: the GPU was {util:.0f}% busy before {run.model}'s "
                             "repetitions, with no request of the bench running")

    def gpu_reader(self):
        """Only the GPU for the 0.5 s sampler when the probes can (not /proc as well)."""
        gpu_probe = getattr(self.probes, "gpu_probe", None)
        if gpu_probe is not None and hasattr(gpu_probe, "read"):
            return gpu_probe.read
        return lambda: self.probes.read().gpu

    async def _unload_if_resident(self, model: str) -> None:
        # the residency journal already names every model solo unloads (ResidencyGuard.begin)
        if any(model_key(r.name) == model_key(model) for r in await self.engine.ps()):
            self.sink(Phase(f"solo: unloading {model}"))
            await self.engine.unload(model)

    async def _unload_others(self, models: list[str]) -> set[str]:
        want = {model_key(m) for m in models}
        gone = set()
        for rm in await self.engine.ps():
            if model_key(rm.name) not in want:
                self.sink(Phase(f"solo: unloading {rm.name}"))
                await self.engine.unload(rm.name)
                gone.add(model_key(rm.name))
        return gone

    async def check_placement(self, run: ModelRun, model: str, before: bool) -> None:
        if not getattr(self.engine, "reports_placement", True):
            await self._unverified_placement(run, model, before)
            return
        if before:
            await self.engine.load(model, keep_alive=self.keep_alive(model),
                                   options={"num_ctx": self.num_ctx(model)})
            await self._engine_gpus()
        resident = {model_key(r.name): r for r in await self.engine.ps()}
        rm: ResidentModel | None = resident.get(model_key(model))
        label = placement(rm.size, rm.size_vram).label if rm else "not resident"
        if rm is not None and rm.digest:
            self._digests[model] = rm.digest
        if before:
            run.placement_before = label
        else:
            run.placement_after = label
        if rm is not None and rm.size:
            run.resident_bytes = rm.size
        if rm is None or label != "100% GPU":
            msg = f"{model} placement {'before' if before else 'after'} the run: {label}"
            if before and not self.s.allow_cpu:
                raise BenchRefused(f"{msg}; the bench needs 100% GPU (use --allow-cpu to run it marked invalid)")
            run.invalid.append(msg)

    async def _engine_gpus(self) -> None:
        """The GPUs a local Ollama's runner processes use, so power, clocks and foreign load
        are read there and not on GPUs that serve other jobs (a multi-GPU box)."""
        if self._sampler is None:
            return
        from sparkctl.probes.listeners import listener_pid, process_tree

        pid = await asyncio.to_thread(listener_pid, self.engine.host)
        if pid is None:
            return
        pids = await asyncio.to_thread(process_tree, pid)
        report = await asyncio.to_thread(self.gpu_reader())
        used = {g.index for g in report.gpus if isinstance(g.processes, tuple)
                and any(p.pid in pids and p.used_bytes for p in g.processes)}
        if used:
            self._sampler.indices = (self._sampler.indices or set()) | used
            self.host_facts["guard.engine_gpus"] = ",".join(str(i) for i in sorted(self._sampler.indices))

    async def _unverified_placement(self, run: ModelRun, model: str, before: bool) -> None:
        """Engines that cannot say where the weights sit (llama-server, vLLM, SGLang): check
        the model is served, record placement as unknown and flag it; neither refuse the run
        nor claim a GPU placement nobody saw."""
        label = f"unknown ({self.engine.kind} does not report placement)"
        if before:  # the engine's load() checks that the model is served and raises if not
            await self.engine.load(model, keep_alive=self.keep_alive(model),
                                   options={"num_ctx": self.num_ctx(model)})
            evidence = await self._nvml_evidence(model)
            if evidence:
                label += f"; {evidence}"
        else:
            try:
                await self.engine.show(model)
            except ModelNotFound:
                label = "not served"
        if before:
            run.placement_before = label
            run.flags.append(f"placement not verified: {self.engine.kind} does not report where the weights are")
        else:
            run.placement_after = label
        if label == "not served":
            run.invalid.append(f"{model} is no longer served by {redact_uri(self.engine.host)} after the run")

    async def _nvml_evidence(self, model: str) -> str:
        """What NVML says about a local engine's process: evidence, not a placement claim
        (a partly offloaded model with a large KV cache can hold as much GPU memory)."""
        from sparkctl.probes.listeners import listener_pid

        pid = await asyncio.to_thread(listener_pid, self.engine.host)
        if pid is None:
            return ""
        host = await asyncio.to_thread(self.probes.read)
        readable = [g for g in host.gpu.gpus if isinstance(g.processes, tuple)]
        if not readable:
            return ""  # no GPU, or NVML cannot list processes: no evidence either way
        for g in readable:
            for proc in g.processes:
                if proc.pid == pid and proc.used_bytes:
                    size = self._sizes.get(model) or 0
                    self.host_facts["guard.engine_pid"] = str(pid)
                    self.host_facts["guard.engine_gpu_bytes"] = str(proc.used_bytes)
                    if self._sampler is not None:  # energy and clocks from the engine's GPUs only
                        self._sampler.indices = {x.index for x in readable
                                                 if any(p.pid == pid for p in x.processes)}
                    of = f" for a {size / GIB:.2f} GiB model" if size else ""
                    return f"NVML: pid {pid} holds {proc.used_bytes / GIB:.2f} GiB on GPU {g.index}{of}"
        self.host_facts["guard.engine_pid"] = str(pid)
        self.host_facts["guard.engine_gpu_bytes"] = "0"
        return f"NVML: pid {pid} holds no GPU memory"

    def _judge_prefill(self, run: ModelRun) -> None:
        """Mark the requests served from the prompt cache, from the engine's own counts."""
        requests = run.warmups + run.reps
        verdicts = prefill.judge([prefill.PrefillSample(
            (r.prompt_eval_count or 0) + (r.prompt_cached_tokens or 0) if r.cached_counted_apart else r.prompt_eval_count,
            r.prompt_eval_duration_ns, r.prompt_cached_tokens) for r in requests])
        for r, v in zip(requests, verdicts):
            r.prefill_cached = v.cached
            r.prompt_cached_tokens = v.cached_tokens
            r.cache_note = v.reason
        measured = [r for r in run.reps if r.prefill_cached is not None]
        if self.s.cache == prefill.COLD:
            hits = [r for r in run.reps if r.prefill_cached]
            if hits:
                run.flags.append(
                    f"prefill cached: {len(hits)} of {len(run.reps)} repetition(s) were served from the "
                    f"prompt cache ({hits[0].cache_note}); left out of the prefill and TTFT figures")
        else:
            misses = [r for r in measured if r.prefill_cached is False]
            if misses:
                run.flags.append(f"cache warm requested, but {len(misses)} repetition(s) evaluated the "
                                 "whole prompt")

    def _finish(self, run: ModelRun, sampler: GpuSampler | None) -> None:
        reps = run.reps
        if run.status == "FINISHED" and (not reps or all(r.error or r.dnf for r in reps)):
            # nothing was measured (every repetition an error, or past the ceiling with no
            # engine figures): not a result to compare
            run.status = "FAILED"
            if reps and all(r.dnf for r in reps):
                run.flags.append(f"nothing measured: all {len(reps)} repetition(s) were DNF; the run is FAILED")
        self._judge_prefill(run)
        if any(r.reload for r in reps):
            run.flags.append("reload detected after warm-up")
        ctx = self.num_ctx(run.model)
        cut = [r for r in run.warmups + reps if not r.prefill_cached
               and guards.prompt_looks_truncated(r.prompt_eval_count, len(self.s.prompt), ctx)]
        if cut:
            run.flags.append(
                f"prompt truncated: the engine evaluated {cut[0].prompt_eval_count} prompt tokens for a "
                f"{len(self.s.prompt)}-character prompt at num_ctx {ctx}")
        foreign = [r for r in reps if r.foreign]
        if foreign:
            run.flags.append(f"foreign load during {len(foreign)} repetition(s): {foreign[0].foreign}")
        if sampler is not None and reps:
            mine = [r.window for r in reps if r.window]
            if mine:
                # every request of the bench (other models', warm-ups) is the bench's own load
                busy = sampler.busy_outside(self._windows, mine[0][0], mine[-1][1])
                if busy:
                    run.flags.append(f"foreign load: the GPU was up to {max(u for _, u in busy):.0f}% busy "
                                     "between repetitions, while no request of the bench ran")
        if any(r.dnf for r in reps):
            run.flags.append(f"{sum(r.dnf for r in reps)} repetition(s) did not finish within {self.s.timeout_s:g} s")
        if any(r.error for r in reps):
            run.flags.append(f"{sum(bool(r.error) for r in reps)} repetition(s) failed")
        if self.lane_restore is not None and self.lane_restore.failed:
            run.flags.append("lane restore failed: " + "; ".join(self.lane_restore.failed))
        if self.lane_restore is not None:
            run.lane_restore = self.lane_restore.tag()
            run.residency = self.lane_restore.residency_tag()
        summ: dict[str, float] = {}
        ok = [r for r in reps if not r.dnf and not r.error]
        # Prefill and TTFT only from requests that paid their whole prefill (cold policy).
        cold = [r for r in ok if not r.prefill_cached]
        for key in ("engine_decode_tps", "client_decode_tps", "prefill_tps", "ttft_s", "load_s"):
            pool = ok
            if key in ("prefill_tps", "ttft_s"):
                pool = [] if (key == "prefill_tps" and self.s.cache == prefill.WARM) else (
                    ok if self.s.cache == prefill.WARM else cold)
            s = summarize(getattr(r, key) for r in pool)
            short = key.replace("engine_", "")
            if s.n:
                summ[f"{short}_median"] = s.median
                summ[f"{short}_min"] = s.min
                summ[f"{short}_max"] = s.max
                if s.cv_pct is not None:
                    summ[f"{short}_cv_pct"] = s.cv_pct
        summ["dnf_count"] = float(sum(r.dnf for r in reps))
        summ["prefill_cached_count"] = float(sum(bool(r.prefill_cached) for r in reps))
        summ["foreign_load_count"] = float(len(foreign))
        summ.update(specdec.summary([r.spec for r in ok], run.spec_total))
        positions = [r.spec_per_pos for r in ok if r.spec_per_pos]
        for k in range(max((len(p) for p in positions), default=0)):
            summ[f"spec_accepted_pos{k}_total"] = float(sum(p[k] for p in positions if k < len(p)))
        opening = self._openings.get(run.model)
        if opening is not None and opening.method.startswith(coldness.METHOD_RUNNER):
            counted = sorted(r.runner_cached for r in run.reps if r.runner_cached is not None)
            if counted:  # what every cold request reused: the template's opening, as the runner counted it
                opening = replace(opening, tokens=counted[len(counted) // 2])
                self._openings[run.model] = opening
        if opening is not None and opening.tokens is not None:
            summ["shared_prefix_tokens"] = float(opening.tokens)
        elif opening is not None and self.engine.kind == "ollama" and summ.get("prefill_tps_median"):
            run.flags.append("prefill rate may count the template's shared opening as evaluated: "
                             + opening.method)
        if run.resident_bytes:
            summ["resident_gib"] = run.resident_bytes / 2**30
        cv = summ.get("decode_tps_cv_pct")
        run.stable = bool(cv is not None and is_stable(cv))
        if sampler is not None:
            gs = sampler.summary(_windows(run))
            if gs["throttle_reasons"] and is_throttled(tuple(gs["throttle_reasons"])):
                run.flags.append("GPU throttled during the run: " + ", ".join(gs["throttle_reasons"]))
            if gs["power"]:
                summ["gpu_power_w_mean"] = gs["power"][2]
            if gs["sm_clock"]:
                summ["gpu_sm_clock_mhz_min"] = gs["sm_clock"][0]
            if gs["temperature"]:
                summ["gpu_temperature_c_max"] = gs["temperature"][1]
            if gs["util"]:
                summ["gpu_util_pct_mean"] = gs["util"][2]
            joules, tokens = 0.0, 0
            for r in reps:
                if r.decode_window and r.eval_count:
                    e = guards.energy(sampler.power_series(), r.decode_window, r.eval_count)
                    if e is not None:
                        joules += e.joules
                        tokens += r.eval_count
                        r.joules_per_token = e.joules / r.eval_count
            if joules > 0 and tokens:
                summ["joules_per_token"] = joules / tokens
                summ["tokens_per_joule"] = tokens / joules
        rl = self._roofline(run, summ.get("decode_tps_median"))
        if rl is not None:
            summ["roofline_ceiling_tps"] = rl.ceiling_tps
            if rl.pct_of_ceiling is not None:
                summ["roofline_pct"] = rl.pct_of_ceiling
                if rl.pct_of_ceiling > 100:
                    # faster than memory bandwidth allows: the model facts behind the ceiling
                    # (parameter count, quantization, bandwidth) do not describe what ran
                    run.flags.append(
                        f"decode at {rl.pct_of_ceiling:.0f}% of the roofline ceiling: check the model's "
                        "parameter count/quantization and [bench] bandwidth_gbps")
        # guard.valid: placement problems and the flags that make numbers incomparable
        for flag in run.flags:
            if flag.startswith(INVALIDATING) and flag not in run.invalid:
                run.invalid.append(flag)
        run.summary = summ

    def _roofline(self, run: ModelRun, measured: float | None):
        if run.show is None:
            return None
        info = run.show.model_info
        total_params = info.get("general.parameter_count")
        params = active_params(info, total_params)
        quant = run.show.details.get("quantization_level", "")
        bits = bits_per_weight_from_quant(quant)
        if bits is None and total_params:
            size = self._sizes.get(run.model)
            bits = bits_per_weight_from_size(size, total_params) if size else None
        if not params or not bits:
            return None
        return roofline(measured, params, bits, self.s.bandwidth_gbps * 1e9)

    # ---- the record for MLflow --------------------------------------------------------------

    def workload(self, run: ModelRun) -> WorkloadIdentity:
        """What this run measured (core.workload): recorded with it, and what every comparison
        matches on. The context is the one the model really ran at."""
        s = self.s
        return WorkloadIdentity.bench(prompt_sha256=s.prompt_sha256, num_ctx=self.num_ctx(run.model),
                                      num_predict=s.num_predict, think=s.think, cache_policy=s.cache)

    def to_record(self, run: ModelRun, start_ms: int, end_ms: int, sampler: GpuSampler | None,
                  status: str | None = None):
        from sparkctl.tracking.record import RunRecord

        s = self.s
        details = run.show.details if run.show else {}
        ka = parse_keep_alive(s.keep_alive)
        params = {
            "model": run.model, "prompt_sha256": s.prompt_sha256, "prompt_chars": len(s.prompt),
            "num_predict": s.num_predict, "temperature": s.temperature, "seed": s.seed,
            "num_ctx": self.num_ctx(run.model), "warmup": s.warmup, "reps": s.reps, "timeout_s": s.timeout_s,
            "mode": s.mode, "keep_alive": ka.wire, "think": s.think,
            "bandwidth_gbps": s.bandwidth_gbps,
            "cache_policy": s.cache,
            "until_resolved_max_reps": s.until_resolved,
            "cache_method": ("cache_prompt=false (llama-server)" if not self.cold_by_request and s.cache == prefill.COLD
                             else prefill.PREAMBLE_FORMAT if s.cache == prefill.COLD else prefill.FOLLOW_UP_FORMAT),
        }
        opening = self._openings.get(run.model)
        not_ignored = [f for f in run.flags if f not in run.invalid]
        tags = {
            "sparkctl.version": __version__,
            "engine.kind": self.engine.kind, "engine.version": self.engine_version,
            "engine.host": redact_uri(self.engine.host),
            "model.name": run.model,
            "model.key": model_key(run.model),  # 'qwen3' and 'qwen3:latest' alike, for exact filters
            "model.digest": self._digests.get(run.model, ""),
            "model.quantization": details.get("quantization_level", ""),
            "model.parameter_size": details.get("parameter_size", ""),
            "model.family": details.get("family", ""),
            "guard.mode": s.mode,
            "guard.cache_policy": s.cache,
            "guard.placement_before": run.placement_before,
            "guard.placement_after": run.placement_after,
            "guard.valid": str(not run.invalid).lower(),
            "guard.invalid_reasons": "; ".join(run.invalid),
            "guard.flags": "; ".join(run.flags),
            "guard.flags_not_invalidating": "; ".join(not_ignored),
            "guard.reload_detected": str(any(r.reload for r in run.reps)).lower(),
            "guard.prefill_cached": str(any(r.prefill_cached for r in run.reps)).lower(),
            "guard.foreign_load": str(any(f.startswith("foreign load") for f in run.flags)).lower(),
            "guard.stable": str(run.stable).lower(),
            "guard.client_decode_basis": ", ".join(sorted({r.client_decode_basis for r in run.reps if r.client_decode_basis})),
            **self.host_facts,
        }
        if run.refused:
            tags["guard.refused"] = run.refused
        if run.lane_restore:
            tags["guard.lane_restore"] = run.lane_restore
        if opening is not None:
            tags.update(opening.tags(self.nonce_position(run.model)))
        tags.update(self._identity.get(run.model, {}))
        tags.update(self._runner.tags(run.model))
        if self._runner.per_request_cache(run.model):
            tags["bench.prompt_cache_count"] = self._runner.per_request_cache(run.model)
        if run.show is not None:
            tags.update(model_shape.shape(run.show.model_info, details.get("quantization_level", "")))
        if run.residency:
            tags["guard.residency"] = run.residency
        identity = self.workload(run)
        tags.update(identity.to_tags())
        tags["sparkctl.kind"] = identity.kind
        if run.ctx_note:
            tags["bench.num_ctx_source"] = "resident"
            tags["bench.num_ctx_note"] = run.ctx_note
        engine_identity = getattr(self.engine, "identity", None)
        if callable(engine_identity):
            # e.g. engine.build: a comparison must never mix engine builds by accident
            tags.update({k: str(v) for k, v in engine_identity().items()})
        if self._ctx_requested is not None:
            tags["bench.num_ctx_requested"] = str(self._ctx_requested)
            tags["bench.num_ctx_source"] = "server"
        if sampler is not None:
            gs = sampler.summary(_windows(run))
            tags["gpu.throttle_reasons"] = ",".join(gs["throttle_reasons"]) or "none"
            tags["gpu.samples"] = str(gs["n"])
        step_keys = ("ttft_s", "client_decode_tps", "engine_decode_tps", "prefill_tps", "load_s",
                     "total_s", "wall_s", "eval_count", "prompt_eval_count", "client_tokens",
                     "thinking_tokens", "queue_wait_s", "prompt_cached_tokens", "joules_per_token",
                     "prompt_evaluated")
        step_metrics = {k: [_f(getattr(r, k)) for r in run.reps] for k in step_keys}
        step_metrics["dnf"] = [1.0 if r.dnf else 0.0 for r in run.reps]
        step_metrics["error"] = [1.0 if r.error else 0.0 for r in run.reps]  # left out of the summary, as DNF
        step_metrics["reload"] = [1.0 if r.reload else 0.0 for r in run.reps]
        step_metrics["prefill_cached"] = [None if r.prefill_cached is None else float(r.prefill_cached)
                                          for r in run.reps]
        step_metrics["foreign_load"] = [1.0 if r.foreign else 0.0 for r in run.reps]
        step_metrics.update(specdec.step_metrics([r.spec for r in run.reps]))
        tags.update(self._spec.tags(run.show, run.summary, run.model))
        artifacts = {
            "outputs.json": [
                {"rep": r.index, "output": r.output, "thinking": r.thinking, "done_reason": r.done_reason,
                 "dnf": r.dnf, "error": r.error, "prompt_added": r.preamble,
                 "prefill_cached": r.prefill_cached, "cache_note": r.cache_note, "foreign": r.foreign}
                for r in run.reps
            ],
            "final_chunks.json": [r.raw_final for r in run.warmups + run.reps],
            "prompt.txt": s.prompt,
        }
        if sampler is not None:
            mine = sampler.within(_windows(run))  # this model's requests only, not the others'
            t0 = mine[0][0] if mine else 0.0
            artifacts["gpu_samples.json"] = [{"t_s": round(t - t0, 3), **v} for t, v in mine]
        if s.parent_run_id:
            tags["sparkctl.parent_run_id"] = s.parent_run_id  # the store makes it mlflow.parentRunId
        # the same requests under OpenTelemetry's GenAI names, as AIPerf logs them (core/genai.py)
        figures = self.genai_requests(run)
        step_metrics.update(genai.live_series(figures))
        return RunRecord(
            experiment=self.cfg.tracking.experiment,
            run_name=f"{run.model} @ {self.engine.kind} {self.engine_version}",
            status=status or run.status, start_ms=start_ms, end_ms=end_ms, params=params, tags=tags,
            step_metrics=step_metrics, summary_metrics={**run.summary, **genai.summary(figures)},
            artifacts=artifacts, record_id=run.record_id,
        )

    def genai_requests(self, run: ModelRun) -> list[genai.RequestFigures]:
        """Each measured request in the GenAI conventions' terms, by repetition (a DNF or a
        failed request measures nothing). Time to first chunk follows the summary's rule: under
        the cold policy a request served from the prompt cache has none."""
        out = []
        for r in run.reps:
            if r.dnf or r.error:
                out.append(genai.RequestFigures())
                continue
            cached = bool(r.prefill_cached) and self.s.cache == prefill.COLD
            tpoc = None
            if r.decode_window and r.client_tokens > 1:
                tpoc = (r.decode_window[1] - r.decode_window[0]) / (r.client_tokens - 1)
            out.append(genai.RequestFigures(ttfc_s=None if cached else r.ttft_s, tpoc_s=tpoc, duration_s=r.wall_s,
                                            output_tokens=r.eval_count, input_tokens=r.prompt_eval_count))
        return out


async def end_residency(guard: ResidencyGuard | None, sink: Sink) -> LaneRestore:
    """The end of every tracked run: put back what the guard borrowed, each error loud."""
    if guard is None:
        return LaneRestore()
    out = await guard.end(lambda text: sink(Phase(text)))
    for line in out.errors():
        sink(Notice(line))
    for line in out.summary():
        sink(Phase(line))
    return out


def _windows(run: ModelRun) -> list[tuple[float, float]]:
    """The time spans of one model's measured requests, for its share of the GPU samples."""
    return [r.window for r in run.reps if r.window is not None]


def _f(x: Any) -> float | None:
    return None if x is None else float(x)


def _client_tps(tokens: int, t_first: float | None, t_last: float | None) -> float | None:
    """Tokens after the first over the time between first and last: the client's decode rate."""
    if t_first is None or t_last is None or tokens < 2 or t_last <= t_first:
        return None
    return (tokens - 1) / (t_last - t_first)


def _host_tags(host) -> dict[str, str]:
    tags = {"host.name": host.hostname}
    gpu = host.gpu
    if gpu.gpus:
        g = gpu.gpus[0]
        tags["gpu.name"] = str(g.name) if not isinstance(g.name, Unavailable) else "n/a"
        tags["gpu.driver"] = str(g.driver) if not isinstance(g.driver, Unavailable) else "n/a"
        tags["gpu.unified_memory"] = str(g.unified_memory).lower()
    else:
        tags["gpu.name"] = f"none ({gpu.unavailable.reason})" if gpu.unavailable else "none"
    if isinstance(host.meminfo, MemInfo):
        tags["host.mem_total_gib"] = f"{host.meminfo.total / GIB:.1f}"
        tags["host.mem_available_gib"] = f"{host.meminfo.available / GIB:.1f}"
    return tags
