"""Workload sweeps: model x profile x context depth x concurrency, one MLflow run per cell.

Built on BenchRunner rather than beside it: every cell is a BenchRunner (`CellRunner`) on the
sweep's MeasurementSession (session.py: its preflight, lock, GPU sampler and lane restore), so
each cell keeps the single bench's guards (placement, free memory, throttling, cache policy,
DNF, foreign load) and its record. What a sweep adds:
- concurrency: a cell runs `reps` rounds of K requests sent at once; the runner's
  run_rep is reused as is, K at a time;
- per-chunk arrival times for inter-token latency, taken by a thin engine wrapper
  (`_TimedEngine`) that stamps each streamed chunk for the request in flight (a
  contextvar names that request, so K concurrent streams do not mix);
- depth: the depth text (core.depthtext), sized from a calibration on the engine's own
  prompt_eval_count and checked per cell from the same count;
- queueing: a request whose server time holds a wait no load, prefill or decode explains
  (Ollama: a request past OLLAMA_NUM_PARALLEL waits for a slot) is counted as queued, and
  a round whose decode windows never overlap on the client's clock ran one at a time; both
  are recorded, not flagged as foreign load (the waits are the sweep's own requests).

MLflow grouping: one run per cell, each a child of the sweep's own run (kind `sweep`: what it
asked, the cells in their run order, how many finished), as AIPerf groups a sweep; the cells
also keep their tags (`sweep.id`, `sweep.cell`, `sweep.profile`, `sweep.depth`,
`sweep.concurrency`, `sweep.order`). A cell run is a complete bench run that compares like with
like on its own (Runs screen, compare, regressions need no parent). The sweep's run is written
first, once every cell's status is final; the spool replays each record alone, so a cell
written before its sweep's run names that run by record id (`sparkctl.parent_record_id`) and
the store resolves it, making a placeholder the sweep's record fills (tracking/store.py).
A published grid (`--profile arena-v2`) brings its own cell order (`schedule`), kept exactly.
"""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from sparkctl.core import depthtext, latency, prefill
from sparkctl.core.latency import Slo
from sparkctl.core.sweep import Cell, CellResult, RequestSample, cell_stats, context_needed, plan, round_ctx
from sparkctl.core.workload import WorkloadIdentity, sha256_text
from sparkctl.engines.base import TokenEvent
from sparkctl.services.bench.events import Phase
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.services.bench.profiles import Profile
from sparkctl.services.bench.results import ModelRun, RepResult
from sparkctl.services.bench.runner import BenchRunner
from sparkctl.services.bench.session import MeasurementSession, model_names
from sparkctl.services.bench.settings import BenchRefused, BenchSettings
from sparkctl.tracking.record import RunRecord, new_record_id

_CHUNKS: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("sweep_chunks", default=None)
_FORMAT: contextvars.ContextVar[Any] = contextvars.ContextVar("sweep_format", default=None)

CALIBRATION_CHARS = 6000  # ~1.5k tokens of depth text: enough to measure chars per token
QUEUED_FLAG = "queued:"
SPEC_CELL_KEYS = ("spec_acceptance_pct_total", "spec_accept_len_total")  # shown in the matrix, per profile


class _TimedEngine:
    """The engine, with every streamed chunk of a request stamped (client clock) into the
    list the request's task set in _CHUNKS, and a profile's structured-output format added."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def generate(self, model: str, prompt: str, **kw: Any):
        fmt = _FORMAT.get()
        if fmt is not None:
            kw["format"] = fmt
        stream = self._engine.generate(model, prompt, **kw)
        sink = _CHUNKS.get()
        return stream if sink is None else _stamped(stream, sink)


async def _stamped(stream, sink: list[float]):
    try:
        async for ev in stream:
            if isinstance(ev, TokenEvent) and ev.text:
                sink.append(time.perf_counter())
            yield ev
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass
class CellRun:
    cell: Cell
    profile: Profile
    runner: "CellRunner"
    run: ModelRun
    depth_target: int
    result: CellResult | None = None
    end_ms: int | None = None  # when its last round ended (None: it did not finish)


@dataclass
class SweepResult:
    sweep_id: str
    cells: list[CellRun] = field(default_factory=list)
    slo: Slo | None = None
    num_parallel: str = ""
    lane_restore: LaneRestore | None = None
    identity: dict[str, dict[str, str]] = field(default_factory=dict)  # per model: engine.* tags (runner, build, flash attention)
    gpu: str = ""  # the GPU's name, as the host probe read it
    parent_run_id: str | None = None  # the sweep's own MLflow run (its cells are its children)

    @property
    def results(self) -> list[CellResult]:
        return [c.result for c in self.cells if c.result is not None]

    @property
    def runs(self) -> list[ModelRun]:
        return [c.run for c in self.cells]


class CellRunner(BenchRunner):
    """One cell: a BenchRunner on the sweep's session (its preflight state), with its own
    prompt (depth + profile), num_predict, format and concurrency."""

    def __init__(self, session: MeasurementSession, settings: BenchSettings, cell: Cell, profile: Profile,
                 sweep_id: str, slo: Slo | None, depth_target: int, baseline_prompt_tokens: int | None,
                 parent_record_id: str = "", order: int | None = None) -> None:
        # requests in flight together: an engine's counters are read around the cell, not each request
        super().__init__(session.cfg, session.engine, session.probes, settings, session=session,
                         per_request_counters=cell.concurrency == 1)
        self.host_facts = dict(session.host_facts)
        self.cell = cell
        self.profile = profile
        self.sweep_id = sweep_id
        self.parent_record_id = parent_record_id  # the sweep's own run: this cell's MLflow parent
        self.order = order  # the cell's place in the sweep's run order (0 first)
        self.slo = slo
        self.depth_target = depth_target
        self.baseline_prompt_tokens = baseline_prompt_tokens
        # keyed by the request's index in the cell (unique; survives the journal's deep copy)
        self.chunks: dict[int, list[float]] = {}  # index -> chunk arrival times
        self.rounds: dict[int, int] = {}  # index -> round
        self.queued_ids: set[int] = set()
        self.num_parallel = ""

    async def run_rep(self, model: str, index: int, warmup: bool, round_no: int = 0) -> RepResult:
        times: list[float] = []
        t1 = _CHUNKS.set(times)
        t2 = _FORMAT.set(self.profile.format)
        try:
            r = await super().run_rep(model, index, warmup)
        finally:
            _CHUNKS.reset(t1)
            _FORMAT.reset(t2)
        self.chunks[r.index] = times
        self.rounds[r.index] = round_no
        if r.foreign.startswith("the engine spent") and self.cell.concurrency > 1:
            # the wait was behind the sweep's own requests: queueing, not foreign load
            r.foreign = ""
        if latency.queued(r.queue_wait_s, r.total_s):
            self.queued_ids.add(r.index)
        return r

    def judge_prefill(self, run: ModelRun) -> None:
        if self.profile.context_load:
            # llama-benchy's prefix caching: the context is in the cache on purpose (loaded just
            # before, and kept from cell to cell, never reset), and each request prefills its
            # fresh pp text. The counts cannot say more: an engine counts the served tokens or
            # not by version, and no cold request is left to compare times with. Said, not judged.
            for r in run.warmups:  # the context loads: served partly by the cache the last cell left
                r.prefill_cached = True
                r.cache_note = "context load (prefix caching): the cache is kept from cell to cell"
            for r in run.reps:
                r.prefill_cached = bool(self.cell.depth)
                r.cache_note = ("context loaded before the cell (prefix caching, llama-benchy's method)"
                                if self.cell.depth else "depth 0: nothing to cache, the pp text is fresh")
            return
        super().judge_prefill(run)

    # ---- what the cell measured -------------------------------------------------------------

    def workload(self, run: ModelRun) -> WorkloadIdentity:
        """A cell's identity: its coordinates, and the profile prompt's sha256 (the depth text
        in front of it is sized per model from its own tokenizer, so the whole prompt's hash
        would keep two models' cells from ever pairing)."""
        c = self.cell
        return WorkloadIdentity.bench(prompt_sha256=sha256_text(self.profile.prompt), num_ctx=self.num_ctx(run.model),
                                      num_predict=self.s.num_predict, think=self.s.think, cache_policy=self.s.cache,
                                      profile=c.profile, depth=c.depth, concurrency=c.concurrency)

    def samples(self, run: ModelRun) -> list[RequestSample]:
        out = []
        for r in run.reps:
            t_first, t_last = r.decode_window if r.decode_window else (None, None)
            sent, ended = r.window if r.window else (0.0, r.wall_s)
            chunks = self.chunks.get(r.index, [])
            cold = not r.prefill_cached or self.s.cache == prefill.WARM
            out.append(RequestSample(
                round=self.rounds.get(r.index, 0), sent=sent, ended=ended,
                ttft_s=r.ttft_s if cold else None,
                tpot_s=latency.tpot(t_first, t_last, r.eval_count),
                decode_tps=r.engine_decode_tps, prefill_tps=r.prefill_tps if cold else None,
                eval_count=r.eval_count, chunk_gaps_s=tuple(latency.gaps(chunks)),
                finished=not (r.dnf or r.error), queued=r.index in self.queued_ids,
                prompt_eval_count=r.prompt_eval_count,
            ))
        return out

    def measured_depth(self, run: ModelRun) -> int | None:
        if self.profile.context_load:
            # prefix caching on purpose: an engine counts what its cache served or not, by version,
            # so no count says the depth (the calibration sized it, as for every cell)
            return None
        counts = [r.prompt_eval_count for r in run.reps if r.prompt_eval_count and not r.prefill_cached]
        if not counts or self.baseline_prompt_tokens is None:
            return None
        return max(counts) - self.baseline_prompt_tokens

    def cell_flags(self, run: ModelRun, samples: list[RequestSample]) -> list[str]:
        flags = []
        if self.depth_target:
            why = depthtext.depth_check(self.depth_target, self.measured_depth(run))
            if why:
                flags.append(why)
        k = self.cell.concurrency
        q = sum(s.queued for s in samples)
        if k > 1:
            rounds: dict[int, list[RequestSample]] = {}
            for s in samples:
                rounds.setdefault(s.round, []).append(s)
            overlap = [latency.parallel_seen([s.sent for s in rs],
                                             [s.sent + s.ttft_s if s.ttft_s is not None else None for s in rs],
                                             [s.ended for s in rs]) for rs in rounds.values()]
            seen = max(overlap) if overlap else 0
            np = f" ({self.num_parallel})" if self.num_parallel else ""
            if q or seen == 1:
                flags.append(f"{QUEUED_FLAG} {q} of {len(samples)} request(s) waited for a slot{np}; at most "
                             f"{seen} of {k} decoded at the same time: requests queued rather than ran in parallel")
            elif seen and seen < k:
                flags.append(f"partly parallel: at most {seen} of {k} requests decoded at the same time{np} "
                             "(the others were still prefilling or already done)")
        return flags

    def to_record(self, run: ModelRun, start_ms: int, end_ms: int, sampler, status: str | None = None):
        record = super().to_record(run, start_ms, end_ms, sampler, status=status)
        samples = self.samples(run)
        st = cell_stats(samples, self.slo)
        c = self.cell
        record.run_name = f"{run.model} {c.key} @ {self.engine.kind} {self.engine_version}"
        record.params.update({k: str(v) for k, v in {
            "profile": c.profile, "depth_tokens": c.depth, "concurrency": c.concurrency,
            "requests_per_round": c.concurrency, "rounds": self.s.reps, "format": self.profile.format_text,
            "slo": self.slo.text() if self.slo else "none",
            "profile_prompt_tokens": (self.profile.pp_tokens or "") if self.profile.pp_tokens
            else self.baseline_prompt_tokens if not c.depth else "",
        }.items()})
        if self.profile.pp_tokens:
            record.params["pp_tokens"] = str(self.profile.pp_tokens)  # llama-benchy's pp, fresh per request
            record.params["context_load"] = str(self.profile.context_load).lower()
        # a child of the sweep's own run; only that run goes under --mlflow-parent-run-id
        record.tags.pop("sparkctl.parent_run_id", None)
        record.tags.update({
            "sparkctl.parent_record_id": self.parent_record_id,
            "sweep.order": "" if self.order is None else str(self.order),
            "sweep.id": self.sweep_id, "sweep.cell": c.key, "sweep.profile": c.profile,
            "sweep.depth": str(c.depth), "sweep.concurrency": str(c.concurrency),
            "engine.num_parallel": self.num_parallel or "n/a",
            "bench.queued": str(st.queued),
        })
        depth = self.measured_depth(run)
        metrics = st.metrics()
        if depth is not None:
            metrics["depth_tokens_measured"] = float(depth)
        if st.throughput_tps and run.summary.get("roofline_ceiling_tps"):
            metrics["roofline_aggregate_pct"] = 100.0 * st.throughput_tps / run.summary["roofline_ceiling_tps"]
        record.summary_metrics.update(metrics)
        record.step_metrics["queued"] = [1.0 if r.index in self.queued_ids else 0.0 for r in run.reps]
        record.step_metrics["tpot_s"] = [s.tpot_s for s in samples]
        record.artifacts["chunk_times.json"] = [
            {"rep": r.index, "round": self.rounds.get(r.index, 0),
             "t_s": [round(t - r.window[0], 6) for t in self.chunks.get(r.index, [])] if r.window else []}
            for r in run.reps]
        return record


class SweepRunner:
    def __init__(self, cfg, engine, probes, settings: BenchSettings, profiles: list[Profile], depths: list[int],
                 concurrencies: list[int], slo: Slo | None = None, sink=None, recorder=None, journal=None,
                 schedule: list[tuple[int, int]] | None = None,
                 grid: str = "") -> None:
        # a published order of (depth, concurrency) cells, kept exactly (Spark Arena's), and
        # the name of the published grid it comes from ("arena-v2"); None/"": the own order
        self.schedule = schedule
        self.grid = grid
        self.parent_record_id = new_record_id()
        # what every cell shares: lock, preflight, residency, sampler, identity, recording
        self.session = MeasurementSession(cfg, _TimedEngine(engine), probes, settings, kind="sweep", sink=sink,
                                          recorder=recorder, journal=journal)
        self.cfg = cfg
        self.engine = self.session.engine
        self.profiles = {p.name: p for p in profiles}
        self.depths = depths
        self.concurrencies = concurrencies
        self.slo = slo
        self.sweep_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
        self.result = SweepResult(self.sweep_id, slo=slo)

    @property
    def s(self) -> BenchSettings:
        return self.session.settings

    @property
    def engine_version(self) -> str:
        """The engine's version as the preflight read it ("" before the sweep began)."""
        return self.session.engine_version if self.session.start_ms else ""

    def sink(self, ev: Any) -> None:
        self.session.sink(ev)

    def parent_record(self, models: list[str], outcome: str, end_ms: int) -> RunRecord:
        """The sweep's own MLflow run: what it asked, the cells in the order they ran (or were
        to run), how many finished; its cells are written as its children."""
        return _sweep_parent(self, models, outcome, end_ms)

    def context_needed(self) -> int:
        """The context the deepest cell needs, with prompts counted at 3 characters a token
        (an overestimate for English; the engine's count is checked after)."""
        # a pp profile's fresh text is sized from the calibration: 10% for its error
        return max(context_needed(max(self.depths), len(p.prompt) // 3 + 1 + int(p.pp_tokens * 1.1), p.num_predict)
                   for p in self.profiles.values())

    async def run(self, models: list[str]) -> SweepResult:
        models = model_names(models)
        async with self.session.locked(models):
            await self._run_locked(models)
        return self.result

    async def _run_locked(self, models: list[str]) -> None:
        need = self.context_needed()
        s = self.s
        if s.ctx_explicit and s.num_ctx < need:
            raise BenchRefused(f"depth {max(self.depths)} needs num_ctx >= {need} (depth + prompt + num_predict); "
                               f"--ctx is {s.num_ctx}")
        if s.num_ctx < need:
            s = replace(s, num_ctx=round_ctx(need), ctx_explicit=True, ctx_why="for the sweep")
            self.sink(Phase(f"num_ctx {s.num_ctx} for depth {max(self.depths)} (fixed for the whole sweep)"))
        session = self.session
        session.settings = s
        session.start_ms = int(time.time() * 1000)
        shows = await session.preflight(models)
        for m in models:
            trained = _trained_ctx(shows[m].model_info)
            ctx = session.num_ctx(m)
            if trained and need > trained:
                raise BenchRefused(f"depth {max(self.depths)} needs {need} tokens of context; {m} was trained "
                                   f"for {trained}")
            if ctx < need:
                raise BenchRefused(f"depth {max(self.depths)} needs {need} tokens of context; {m} runs at "
                                   f"num_ctx {ctx}" + (" (the server's context per slot: restart it with a larger -c)"
                                                       if getattr(self.engine, "fixed_context", False) else
                                                       " (pass --ctx to reload it larger)"))
        self.result.num_parallel = await asyncio.to_thread(_num_parallel, self.engine, self.cfg,
                                                           session.engine_version)
        await session.guarded(models, lambda: self._cells(models),
                              lambda outcome, end_ms: self._wrap_up(models, outcome, end_ms), what="the cells")

    async def _calibrate(self, model: str) -> tuple[float, dict[str, int | None]]:
        """Chars per token of the depth text and each profile's own prompt tokens, from the
        engine's prompt_eval_count (num_predict 1 requests, cold)."""
        s1 = replace(self.s, num_predict=1, warmup=0, reps=1)
        counts: dict[str, int | None] = {}

        async def count(prompt: str) -> int | None:
            # a request of the sweep's (its keep-alive, its context), counted and nothing else
            probe = BenchRunner(self.cfg, self.engine, self.session.probes, replace(s1, prompt=prompt),
                                session=self.session, per_request_counters=False)
            r = await probe.run_rep(model, -99, True)
            return r.prompt_eval_count if not (r.error or r.dnf) else None

        for name, p in self.profiles.items():
            counts[name] = await count(p.prompt)
        cpt = depthtext.DEFAULT_CHARS_PER_TOKEN
        if any(self.depths):
            first = next(iter(self.profiles.values()))
            sample = depthtext.depth_text(CALIBRATION_CHARS, seed=1)
            with_sample = await count(depthtext.assemble(sample, first.prompt))
            measured = depthtext.chars_per_token(len(depthtext.assemble(sample, first.prompt)) - len(first.prompt),
                                                 with_sample, counts[first.name])
            if measured:
                cpt = measured
                self.sink(Phase(f"{model}: depth text at {cpt:.2f} characters per token (engine's count)"))
            else:
                self.sink(Phase(f"{model}: could not calibrate the depth text; assuming {cpt:g} characters a token"))
        return cpt, counts

    async def _cells(self, models: list[str]) -> None:
        session = self.session
        cells = plan(models, list(self.profiles), self.depths, self.concurrencies, self.schedule)
        if self.s.mode == "solo":  # each model alone: all its cells, then the next model's
            cells.sort(key=lambda c: models.index(c.model))
        self.order = cells
        calib: dict[str, tuple[float, dict[str, int | None]]] = {}
        warmed: set[str] = set()
        for cell in cells:
            m = cell.model
            if self.s.mode == "solo" and m not in warmed:
                for other in models:
                    if other != m:
                        await session.unload_if_resident(other)
            prof = self.profiles[cell.profile]
            setup = session.new_run(m, with_ctx_note=False)
            if m not in warmed:
                self.sink(Phase(session.load_phase(m)))
                await session.check_placement(setup, m, before=True)
                await session.read_identity(m)  # first: a runner that counts cached tokens makes probes needless
                await session.measure_opening(m, counted_per_request=False)  # cells of several requests at once
                if self.s.warmup:
                    wr = CellRunner(session, replace(self.s, prompt=prof.prompt, num_predict=prof.num_predict),
                                    cell, prof, self.sweep_id, None, 0, None, self.parent_record_id)
                    for w in range(self.s.warmup):
                        self.sink(Phase(f"{m}: warm-up {w + 1}/{self.s.warmup}"))
                        await wr.run_rep(m, -1 - w, True)
                calib[m] = await self._calibrate(m)
                await session.idle_check(setup)
                warmed.add(m)
            cpt, counts = calib[m]
            depth_text = depthtext.text_for_tokens(cell.depth, cpt)
            prompt = depthtext.assemble(depth_text, prof.prompt)
            cs = replace(self.s, prompt=prompt, num_predict=prof.num_predict, warmup=0,
                         follow_up_chars=int(prof.pp_tokens * cpt) if prof.pp_tokens else 0)
            baseline = counts.get(cell.profile)
            if baseline and prof.pp_tokens:
                baseline += prof.pp_tokens  # each request's fresh pp text is prompt, not depth
            cr = CellRunner(session, cs, cell, prof, self.sweep_id, self.slo, cell.depth,
                            baseline + _assembly_overhead(cpt) if (baseline and cell.depth) else baseline,
                            self.parent_record_id, order=len(self.result.cells))
            cr.num_parallel = self.result.num_parallel
            run = session.new_run(m)
            run.flags.extend(f for f in setup.flags if f.startswith("foreign load"))  # the idle check
            cr.start_ms = int(time.time() * 1000)  # each cell its own span, not the sweep's
            self.result.cells.append(CellRun(cell, prof, cr, run, cell.depth))
            self.sink(Phase(f"{m} {cell.key}: loading/checking placement"))
            await cr.check_placement(run, m, before=True)
            k = cell.concurrency
            if prof.context_load and cs.cache == prefill.WARM and cell.depth:
                # llama-benchy's prefix caching: each slot's context loaded first, not measured
                self.sink(Phase(f"{m} {cell.key}: loading the context ({k} request(s), not measured)"))
                loads = await asyncio.gather(*(cr.run_rep(m, -1000 - j, True) for j in range(k)))
                run.warmups.extend(loads)  # the cold reference the cache check judges the measured ones by
            spec_start = await cr.spec_counters(m)
            for rnd in range(cs.reps):
                self.sink(Phase(f"{m} {cell.key}: round {rnd + 1}/{cs.reps}, {k} request(s) at once"))
                tasks = [asyncio.ensure_future(cr.run_rep(m, rnd * k + j, False, rnd)) for j in range(k)]
                try:
                    done = await asyncio.gather(*tasks)
                except BaseException:
                    for t in tasks:
                        t.cancel()
                    finished = await asyncio.gather(*tasks, return_exceptions=True)
                    run.reps.extend(r for r in finished if isinstance(r, RepResult))
                    if cr.interrupted is not None and cr.interrupted not in run.reps:
                        run.reps.append(cr.interrupted)
                    raise
                run.reps.extend(done)
                await cr.journal_run(run)
            spec_end = await cr.spec_counters(m)
            if spec_start is not None and spec_end is not None and spec_end.drafted is not None:
                run.spec_total = spec_end.minus(spec_start)
            await cr.check_placement(run, m, before=False)
            run.completed = True
            self.result.cells[-1].end_ms = int(time.time() * 1000)

    async def _wrap_up(self, models: list[str], outcome: str, end_ms: int) -> None:
        session = self.session
        sampler = session.sampler
        self.result.lane_restore = session.lane_restore
        self.result.identity = session.identities()
        self.result.gpu = session.host_facts.get("gpu.name", "")
        finished = []
        for c in self.result.cells:
            cr, run = c.runner, c.run
            if outcome != "FINISHED" and not run.completed:
                run.status = outcome
            cr.finish(run, sampler)
            samples = cr.samples(run)
            run.flags.extend(cr.cell_flags(run, samples))
            st = cell_stats(samples, self.slo)
            st.extra.update({k: v for k, v in run.summary.items() if k in SPEC_CELL_KEYS})
            finished.append((c, st))
        if session.recorder is not None and self.result.cells:
            # the sweep's own run first (the statuses are final now): its cells are its children
            res = await session.record(self.parent_record(models, outcome, end_ms))
            if res is not None:
                self.result.parent_run_id = res.run_id
        for c, st in finished:
            cr, run = c.runner, c.run
            run_id = None
            if session.recorder is not None and (run.reps or run.status != "FINISHED"):
                res = await session.record(cr.to_record(run, cr.began_ms, c.end_ms or end_ms, sampler), into=run,
                                           what=f"{run.model} {c.cell.key}")
                if res is not None:
                    run_id = res.run_id
            c.result = CellResult(c.cell, st, run_id=run_id, depth_tokens=cr.measured_depth(run),
                                  roofline_pct=run.summary.get("roofline_pct"), flags=tuple(run.invalid + run.flags),
                                  prompt_tokens=c.profile.pp_tokens or (cr.baseline_prompt_tokens
                                                                        if not c.cell.depth else None),
                                  num_predict=c.profile.num_predict)
        # the Markdown's pp<N> names the profile prompt's tokens: give every depth of a row the same N
        prompt_tokens = {(r.cell.model, r.cell.profile): r.prompt_tokens for r in self.result.results if r.prompt_tokens}
        for c in self.result.cells:
            if c.result is not None and c.result.prompt_tokens is None:
                c.result = replace(c.result, prompt_tokens=prompt_tokens.get((c.cell.model, c.cell.profile))
                                   or c.runner.baseline_prompt_tokens)


def _sweep_parent(runner: "SweepRunner", models: list[str], outcome: str, end_ms: int) -> RunRecord:
    from sparkctl import __version__
    from sparkctl.core.workload import SWEEP

    s, session = runner.s, runner.session
    cells = runner.result.cells
    planned = getattr(runner, "order", None) or [c.cell for c in cells]
    ran = {(c.cell.model, c.cell.key): c for c in cells}
    order = []
    for i, cell in enumerate(planned):
        c = ran.get((cell.model, cell.key))
        order.append({"order": i, "model": cell.model, "cell": cell.key, "profile": cell.profile, "depth": cell.depth,
                      "concurrency": cell.concurrency, "status": c.run.status if c is not None else "not run"})
    params = {
        "models": ",".join(models), "profiles": ",".join(runner.profiles), "depths": ",".join(map(str, runner.depths)),
        "concurrency": ",".join(map(str, runner.concurrencies)), "reps": s.reps, "cache_policy": s.cache,
        "num_predict": ",".join(str(p.num_predict) for p in runner.profiles.values()),
        "grid": runner.grid or "own", "cells_planned": len(planned),
        "schedule": ";".join(f"{d}/{k}" for d, k in runner.schedule) if runner.schedule else "grid order",
    }
    pp = {p.pp_tokens for p in runner.profiles.values() if p.pp_tokens}
    if pp:
        params["pp_tokens"] = ",".join(map(str, sorted(pp)))
    tags = {
        "sparkctl.version": __version__, "sparkctl.kind": SWEEP, "sweep.id": runner.sweep_id,
        "sweep.grid": runner.grid, "engine.kind": session.engine.kind, "engine.version": session.engine_version,
        "model.name": models[0] if len(models) == 1 else ", ".join(models), **session.host_facts,
        **WorkloadIdentity(SWEEP).to_tags(),
    }
    if s.parent_run_id:
        tags["sparkctl.parent_run_id"] = s.parent_run_id
    statuses = [c.run.status for c in cells]
    summary = {"cells_planned": float(len(planned)), "cells_run": float(len(cells)),
               "cells_finished": float(statuses.count("FINISHED")),
               "cells_failed": float(statuses.count("FAILED")), "cells_killed": float(statuses.count("KILLED"))}
    return RunRecord(experiment=runner.cfg.tracking.experiment,
                     run_name=f"sweep {runner.sweep_id}" + (f" ({runner.grid})" if runner.grid else ""),
                     status=outcome if outcome in ("FINISHED", "FAILED", "KILLED") else "FAILED",
                     start_ms=session.start_ms or end_ms, end_ms=end_ms, params=params, tags=tags,
                     summary_metrics=summary, artifacts={"sweep_order.json": order},
                     record_id=runner.parent_record_id)


def _assembly_overhead(cpt: float) -> int:
    """Tokens the depth's framing adds around the text ("Background notes ...", the rule)."""
    framing = len(depthtext.assemble("x", "")) - 1
    return int(round(framing / cpt))


def _trained_ctx(info: dict) -> int | None:
    arch = info.get("general.architecture")
    v = info.get(f"{arch}.context_length") if arch else None
    if isinstance(v, int) and v > 0:
        return v
    v = info.get("context_length_train")
    return v if isinstance(v, int) and v > 0 else None


def _num_parallel(engine: Any, cfg: Any = None, version: str | None = None) -> str:
    """The engine's parallel slots and where that came from: llama-server's slot count from
    its /props identity; Ollama's OLLAMA_NUM_PARALLEL from its server's settings (the one
    reader, services/engine_settings.py: its process, its unit, else stated or assumed,
    said so); '' for other engines. Blocking: call from a thread."""
    identity = getattr(engine, "identity", None)
    if callable(identity):
        try:
            slots = identity().get("engine.total_slots")
        except Exception:
            slots = None
        if slots:
            return f"{slots} slot(s)"
    if getattr(engine, "kind", "") != "ollama":
        return ""
    from sparkctl.services.engine_settings import read_engine_settings

    s = read_engine_settings(cfg, engine.host, version).num_parallel
    return f"{s.value} ({s.source})"
