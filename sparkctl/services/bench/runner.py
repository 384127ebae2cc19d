"""BenchRunner: a fixed-prompt, repeated, guarded decode benchmark of one or more models.

Timing and counting happen here, not in a widget: the runner stamps every streamed piece
with the client clock, batches what it reports to the UI (every ~50 ms) and keeps the
engine's own figures from the final chunk beside the client's. Each model's run becomes a
RunRecord that is spooled, then written to MLflow, from a worker thread; every finished
repetition is journaled to the spool first, so a crash loses at most the one in flight.

Hygiene (DESIGN.md "Bench hygiene"): each measured request pays its whole prefill unless
the user asked for a warm cache (core.prefill) and load the bench cannot explain is flagged.
What every measurement shares (one per engine, lane models noted before and put back after,
the GPU sampler, engine identity, recording) is the MeasurementSession's (session.py).
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
from dataclasses import replace
from typing import Any, Callable

from sparkctl.config import Config
from sparkctl.core import depthtext, genai, guards, model_shape, prefill, specdec
from sparkctl.core.engine_identity import version_at_least
from sparkctl.core.gpu import is_throttled
from sparkctl.core.keepalive import parse_keep_alive
from sparkctl.core.names import model_key
from sparkctl.core.redact import redact_text
from sparkctl.core.roofline import active_params, bits_per_weight_from_quant, bits_per_weight_from_size, roofline
from sparkctl.core.stats import is_stable, interleave, summarize
from sparkctl.core.workload import WorkloadIdentity
from sparkctl.engines.base import DoneEvent, EngineError, EngineUnreachable, ShowInfo, TokenEvent
from sparkctl.services.bench import coldness
from sparkctl.services.bench.events import BenchFinished, Live, Phase, RepDone, RepStarted, Sink
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.services.bench.results import ModelRun, RepResult
from sparkctl.services.bench.sampler import GpuSampler
from sparkctl.services.bench.session import MeasurementSession, model_names
from sparkctl.services.bench.settings import BenchRefused, BenchSettings
from sparkctl.services.bench.specwatch import SpecWatch

UI_BATCH_S = 0.05
# Server time not spent loading, prefilling or decoding: waiting behind another request.
QUEUE_WAIT_FLOOR_S = 0.5
QUEUE_WAIT_SHARE = 0.10

# Flags that make a run's numbers not comparable: they count against guard.valid.
INVALIDATING = ("reload detected", "prompt truncated", "GPU throttled", "foreign load",
                "lane restore failed")


class BenchRunner:
    """One bench of one or more models: its requests, its figures and its records. What every
    measurement shares (lock, preflight, residency, sampler, identity, recording) is its
    MeasurementSession's (session.py); a sweep's cells are BenchRunners on the sweep's session."""

    def __init__(self, cfg: Config, engine: Any, probes: Any, settings: BenchSettings,
                 sink: Sink | None = None, recorder: Callable[[Any], Any] | None = None,
                 journal: Callable[[Any], Any] | None = None, *, session: MeasurementSession | None = None,
                 per_request_counters: bool = True) -> None:
        """`session`: run on a measurement that is already under way (a sweep's cell, a probe),
        with `settings` as this runner's own (its prompt, num_predict); else the bench opens its
        own session. `per_request_counters`: read the engine's counters (speculative decoding,
        Ollama's runner) around each request; off where requests run several at once."""
        own = session is None
        self.session = session or MeasurementSession(cfg, engine, probes, settings, kind="bench", sink=sink,
                                                      recorder=recorder, journal=journal)
        self.cfg = self.session.cfg
        self.engine = self.session.engine
        self.probes = self.session.probes
        self._settings = None if own else settings  # None: the session's (the preflight may change its context)
        self._facts: dict[str, str] | None = None  # None: the session's host facts
        self.interrupted: RepResult | None = None
        self.start_ms: int | None = None  # None: the session's start
        self._nonce = self.session.nonce if own else secrets.token_hex(3)
        self._requests: dict[str, int] = {}  # per model: requests sent, for the preamble
        self._journal_failed = False
        self._spec = SpecWatch(self.engine, self.session.runners if self.session.runners.active else None)
        self._spec.per_rep = per_request_counters
        self._acceptance: dict[str, float] = {}  # per model: the last repetition's acceptance, for the live view

    @property
    def s(self) -> BenchSettings:
        return self.session.settings if self._settings is None else self._settings

    @property
    def host_facts(self) -> dict[str, str]:
        """The host facts this runner's records carry (a sweep's cell keeps its own copy)."""
        return self.session.host_facts if self._facts is None else self._facts

    @host_facts.setter
    def host_facts(self, facts: dict[str, str]) -> None:
        self._facts = facts

    @property
    def engine_version(self) -> str:
        return self.session.engine_version

    @property
    def residency(self):
        return self.session.residency

    @property
    def lane_restore(self) -> LaneRestore | None:
        return self.session.lane_restore

    @property
    def began_ms(self) -> int:
        return self.session.start_ms if self.start_ms is None else self.start_ms

    def sink(self, ev: Any) -> None:
        self.session.sink(ev)

    @property
    def cold_by_request(self) -> bool:
        return self.session.cold_by_request

    def keep_alive(self, model: str) -> Any:
        return self.session.keep_alive(model)

    def num_ctx(self, model: str) -> int:
        return self.session.num_ctx(model)

    def think_for(self, model: str) -> bool | None:
        return self.session.think_for(model)

    def nonce_position(self, model: str) -> str:
        return self.session.nonce_position(model)

    def options(self, model: str) -> dict[str, Any]:
        opts = dict(self.s.options, num_ctx=self.num_ctx(model))
        if self.s.cache == prefill.WARM and getattr(self.engine, "kind", "") == "llama.cpp":
            opts["cache_prompt"] = True
        return opts

    async def preflight(self, models: list[str]) -> dict[str, ShowInfo]:
        return await self.session.preflight(models)

    async def check_placement(self, run: ModelRun, model: str, before: bool) -> None:
        await self.session.check_placement(run, model, before, facts=self.host_facts)

    async def spec_counters(self, model: str) -> specdec.SpecCounts | None:
        """The engine's cumulative speculative-decoding figures now (a sweep reads them around a cell)."""
        return await self._spec.read(model)


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
                                                      self.session.model_system(model))
        return prompt, added, system


    # ---- one repetition ---------------------------------------------------------------------

    async def run_rep(self, model: str, index: int, warmup: bool) -> RepResult:
        r = RepResult(model, index, warmup)
        prompt, r.preamble, system = self._prompt(model)
        before_ps = await self._others_expiry(model)
        spec_before, counters_before = await self._spec.read_full(model) if self._spec.per_rep else (None, None)
        # no /metrics: the runner's /slots tells the request's cache count while it runs
        peek_cache = (self._spec.per_rep and counters_before is None and self.session.runners.slots_on(model))
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
                            peek = asyncio.ensure_future(self.session.runners.cache_n_now(model))
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
        if not cancelled:
            await self.session.sample_once()
        end = time.perf_counter()
        flush(end)
        r.wall_s = end - t_send
        r.window = (t_send, end)
        self.session.add_window(r.window)
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
            r.prompt_evaluated = coldness.evaluated_tokens(done, self.session.opening(model))
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
        r.cached_counted_apart = not version_at_least(self.session.engine_version, (0, 30, 1))
        r.prompt_evaluated = evaluated_tokens(done.prompt_eval_count, cache_n, self.session.engine_version)
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
        """Bench `models` (ModelNames, parsed where they entered; a plain str is taken as given)."""
        models = model_names(models)
        async with self.session.locked(models):
            return await self._run_locked(models)

    async def _run_locked(self, models: list[str]) -> list[ModelRun]:
        session = self.session
        session.start_ms = int(time.time() * 1000)
        await session.preflight(models)
        runs = {m: session.new_run(m) for m in models}

        async def measure() -> None:
            if self.s.mode == "solo":
                # Solo: each model alone in memory, one after another. Interleaving would
                # reload a model before every repetition.
                for m in models:
                    for other in models:
                        if other != m:
                            await session.unload_if_resident(other)
                    await self._bench_models([m], runs)
            else:
                await self._bench_models(models, runs)

        def refused(exc: BenchRefused) -> None:
            for run in runs.values():
                if not run.completed:
                    run.refused = str(exc)
                    run.invalid.append(f"refused: {exc}")

        await session.guarded(models, measure, lambda outcome, end_ms: self._wrap_up(runs, outcome, end_ms),
                              on_refused=refused, ended=lambda: self.sink(BenchFinished(list(runs.values()))))
        return list(runs.values())

    async def _wrap_up(self, runs: dict[str, ModelRun], outcome: str, end_ms: int) -> None:
        sampler = self.session.sampler
        for run in runs.values():
            if outcome != "FINISHED" and not run.completed:
                run.status = outcome  # a model that finished before the failure keeps its run
            self.finish(run, sampler)
        for run in runs.values():
            if run.reps or run.status != "FINISHED":
                if self.session.recorder is not None:
                    await self.session.record(self.to_record(run, self.began_ms, end_ms, sampler), into=run,
                                              what=run.model)

    async def journal_run(self, run: ModelRun) -> None:
        """The run so far (status KILLED until it ends) into the spool, fsynced."""
        if self._journal_failed:
            return

        def build():
            # the run as it would be recorded if the process died now: summary and flags included
            snap = copy.deepcopy(run)
            snap.status = "KILLED"
            self.finish(snap, self.session.sampler)
            return self.to_record(snap, self.began_ms, int(time.time() * 1000), self.session.sampler,
                                  status="KILLED")

        self._journal_failed = not await self.session.write_journal(build)

    async def _bench_models(self, models: list[str], runs: dict[str, ModelRun]) -> None:
        """Load and check each model, warm each up, then the interleaved repetitions."""
        for m in models:
            self.sink(Phase(self.session.load_phase(m)))
            await self.check_placement(runs[m], m, before=True)
            await self.session.idle_check(runs[m])
            await self.session.read_identity(m)  # first: Ollama's runner, if read, makes the opening's probes needless
            await self.session.measure_opening(m)
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
            await self.journal_run(runs[m])
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

    def judge_prefill(self, run: ModelRun) -> None:
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

    def finish(self, run: ModelRun, sampler: GpuSampler | None) -> None:
        """The run's flags and summary from its repetitions (at its end, and for each journal)."""
        reps = run.reps
        if run.status == "FINISHED" and (not reps or all(r.error or r.dnf for r in reps)):
            # nothing was measured (every repetition an error, or past the ceiling with no
            # engine figures): not a result to compare
            run.status = "FAILED"
            if reps and all(r.dnf for r in reps):
                run.flags.append(f"nothing measured: all {len(reps)} repetition(s) were DNF; the run is FAILED")
        self.judge_prefill(run)
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
                busy = sampler.busy_outside(self.session.windows, mine[0][0], mine[-1][1])
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
        opening = self.session.opening(run.model)
        if opening is not None and opening.method.startswith(coldness.METHOD_RUNNER):
            counted = sorted(r.runner_cached for r in run.reps if r.runner_cached is not None)
            if counted:  # what every cold request reused: the template's opening, as the runner counted it
                opening = replace(opening, tokens=counted[len(counted) // 2])
                self.session.set_opening(run.model, opening)
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
            size = self.session.size(run.model)
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
        opening = self.session.opening(run.model)
        not_ignored = [f for f in run.flags if f not in run.invalid]
        session = self.session
        tags = {
            **session.engine_tags(),
            **session.model_tags(run.model),
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
        tags.update(session.runner_tags(run.model))
        if session.runners.per_request_cache(run.model):
            tags["bench.prompt_cache_count"] = session.runners.per_request_cache(run.model)
        if run.show is not None:
            tags.update(model_shape.shape(run.show.model_info, details.get("quantization_level", "")))
        if run.residency:
            tags["guard.residency"] = run.residency
        tags.update(session.workload_tags(self.workload(run)))
        if run.ctx_note:
            # where the one context of this decision came from (services/bench/context.py)
            tags["bench.num_ctx_source"] = session.context.source if session.context is not None else "resident"
            tags["bench.num_ctx_note"] = run.ctx_note
        tags.update(session.build_tags())
        if session.ctx_requested is not None:
            tags["bench.num_ctx_requested"] = str(session.ctx_requested)
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
