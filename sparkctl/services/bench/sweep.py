"""Workload sweeps: model x profile x context depth x concurrency, one MLflow run per cell.

Built on BenchRunner rather than beside it: every cell is a BenchRunner (`CellRunner`) that
shares the sweep's preflight, lock, GPU sampler and lane restore, so each cell keeps the
single bench's guards (placement, free memory, throttling, cache policy, DNF, foreign load)
and its record. What a sweep adds:
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

MLflow grouping: one run per cell, grouped by tags (`sweep.id`, `sweep.cell`,
`sweep.profile`, `sweep.depth`, `sweep.concurrency`) rather than parent/child runs. A cell
run is a complete bench run that compares like with like on its own (Runs screen, compare,
regressions need no parent), the spool replays each record independently (a parent's run
id would not exist yet when a child is spooled offline), and `tags.sweep.id = '...'` in
MLflow's search or UI gives the whole sweep.
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
from sparkctl.services.bench.lanes import LaneRestore
from sparkctl.services.bench.residency import ResidencyGuard
from sparkctl.services.bench.wrapup import finish_shielded
from sparkctl.services.bench.lock import BenchLock
from sparkctl.services.bench.recovery import repair_before
from sparkctl.services.bench.profiles import Profile
from sparkctl.services.bench.runner import (
    BenchRefused, BenchRunner, BenchSettings, ModelRun, Notice, Phase, RepResult, end_residency,
)
from sparkctl.services.bench.sampler import GpuSampler

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

    @property
    def results(self) -> list[CellResult]:
        return [c.result for c in self.cells if c.result is not None]

    @property
    def runs(self) -> list[ModelRun]:
        return [c.run for c in self.cells]


class CellRunner(BenchRunner):
    """One cell: the parent sweep's preflight state, its own prompt (depth + profile),
    num_predict, format and concurrency."""

    def __init__(self, parent: BenchRunner, settings: BenchSettings, cell: Cell, profile: Profile,
                 sweep_id: str, slo: Slo | None, depth_target: int, baseline_prompt_tokens: int | None) -> None:
        super().__init__(parent.cfg, parent.engine, parent.probes, settings, sink=parent._sink,
                         recorder=None, journal=parent.journal)
        for name in ("engine_version", "_shows", "_digests", "_sizes", "_ctx", "_ctx_note",
                     "_ctx_requested", "_sampler", "_windows", "_start_ms", "residency", "_openings", "_identity",
                     "_runner", "_runner_said"):
            setattr(self, name, getattr(parent, name))
        self._spec.runner = parent._spec.runner  # the runners the sweep located, read around each cell
        self.host_facts = dict(parent.host_facts)
        self.cell = cell
        self.profile = profile
        self.sweep_id = sweep_id
        self.slo = slo
        self.depth_target = depth_target
        self.baseline_prompt_tokens = baseline_prompt_tokens
        # keyed by the request's index in the cell (unique; survives the journal's deep copy)
        self.chunks: dict[int, list[float]] = {}  # index -> chunk arrival times
        self.rounds: dict[int, int] = {}  # index -> round
        self.queued_ids: set[int] = set()
        self.num_parallel = ""
        # requests in flight together: an engine's counters are read around the cell, not each request
        self._spec.per_rep = cell.concurrency == 1

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
            "profile_prompt_tokens": self.baseline_prompt_tokens if not c.depth else "",
        }.items()})
        record.tags.update({
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
                 ctx_explicit: bool = False) -> None:
        self.cfg = cfg
        self.engine = _TimedEngine(engine)
        self.probes = probes
        self.s = settings
        self.profiles = {p.name: p for p in profiles}
        self.depths = depths
        self.concurrencies = concurrencies
        self.slo = slo
        self._sink = sink or (lambda ev: None)
        self.recorder = recorder
        self.journal = journal
        self.ctx_explicit = ctx_explicit
        self.sweep_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
        self.result = SweepResult(self.sweep_id, slo=slo)
        self.base: BenchRunner | None = None

    def sink(self, ev: Any) -> None:
        try:
            self._sink(ev)
        except Exception:
            self._sink = lambda ev: None

    def context_needed(self) -> int:
        """The context the deepest cell needs, with prompts counted at 3 characters a token
        (an overestimate for English; the engine's count is checked after)."""
        return max(context_needed(max(self.depths), len(p.prompt) // 3 + 1, p.num_predict)
                   for p in self.profiles.values())

    async def run(self, models: list[str]) -> SweepResult:
        models = list(dict.fromkeys(models))
        lock = BenchLock(self.engine.host, models)
        await lock.acquire(self.s.wait, lambda text: self.sink(Notice(text)))
        try:
            await repair_before(self.cfg, self.engine, lambda text: self.sink(Notice(text)), lock_held=True)
            await self._run_locked(models)
        finally:
            lock.release()
        return self.result

    async def _run_locked(self, models: list[str]) -> None:
        need = self.context_needed()
        s = self.s
        if self.ctx_explicit and s.num_ctx < need:
            raise BenchRefused(f"depth {max(self.depths)} needs num_ctx >= {need} (depth + prompt + num_predict); "
                               f"--ctx is {s.num_ctx}")
        if s.num_ctx < need:
            s = replace(s, num_ctx=round_ctx(need), ctx_explicit=True, ctx_why="for the sweep")
            self.sink(Phase(f"num_ctx {s.num_ctx} for depth {max(self.depths)} (fixed for the whole sweep)"))
        base = BenchRunner(self.cfg, self.engine, self.probes, s, sink=self._sink, journal=self.journal)
        self.base = base
        base._start_ms = int(time.time() * 1000)
        shows = await base.preflight(models)
        for m in models:
            trained = _trained_ctx(shows[m].model_info)
            ctx = base.num_ctx(m)
            if trained and need > trained:
                raise BenchRefused(f"depth {max(self.depths)} needs {need} tokens of context; {m} was trained "
                                   f"for {trained}")
            if ctx < need:
                raise BenchRefused(f"depth {max(self.depths)} needs {need} tokens of context; {m} runs at "
                                   f"num_ctx {ctx}" + (" (the server's context per slot: restart it with a larger -c)"
                                                       if getattr(self.engine, "fixed_context", False) else
                                                       " (pass --ctx to reload it larger)"))
        self.result.num_parallel = await asyncio.to_thread(_num_parallel, self.engine, self.cfg, base.engine_version)
        base.residency = ResidencyGuard(self.cfg, self.engine, models, kind="sweep", mode=s.mode,
                                        keep_loaded=s.keep_loaded)
        await base.residency.begin(base.num_ctx, lambda text: self.sink(Notice(text)))
        outcome = "FINISHED"
        try:
            if s.mode == "solo":
                await base._unload_others(models)
            base._sampler = GpuSampler(base.gpu_reader()).start()
            await self._cells(base, models)
        except (asyncio.CancelledError, KeyboardInterrupt):
            outcome = "KILLED"
            raise
        except BaseException:
            outcome = "FAILED"
            raise
        finally:
            await finish_shielded(self._wrap_up(base, models, outcome),
                                  lambda text: self.sink(Notice(text)), what="the cells")

    async def _calibrate(self, base: BenchRunner, model: str) -> tuple[float, dict[str, int | None]]:
        """Chars per token of the depth text and each profile's own prompt tokens, from the
        engine's prompt_eval_count (num_predict 1 requests, cold)."""
        s1 = replace(base.s, num_predict=1, warmup=0, reps=1)
        counts: dict[str, int | None] = {}

        async def count(prompt: str) -> int | None:
            probe = BenchRunner(self.cfg, self.engine, self.probes, replace(s1, prompt=prompt))
            for name in ("engine_version", "_shows", "_ctx", "_windows", "residency"):
                setattr(probe, name, getattr(base, name))
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

    async def _cells(self, base: BenchRunner, models: list[str]) -> None:
        cells = plan(models, list(self.profiles), self.depths, self.concurrencies)
        if self.s.mode == "solo":  # each model alone: all its cells, then the next model's
            cells.sort(key=lambda c: models.index(c.model))
        calib: dict[str, tuple[float, dict[str, int | None]]] = {}
        warmed: set[str] = set()
        for cell in cells:
            m = cell.model
            if self.s.mode == "solo" and m not in warmed:
                for other in models:
                    if other != m:
                        await base._unload_if_resident(other)
            prof = self.profiles[cell.profile]
            setup = ModelRun(m, show=base._shows[m], num_ctx=base.num_ctx(m))
            if m not in warmed:
                self.sink(Phase(base.load_phase(m)))
                await base.check_placement(setup, m, before=True)
                await base.read_identity(m)  # first: a runner that counts cached tokens makes probes needless
                await base.measure_opening(m, counted_per_request=False)  # cells of several requests at once
                if base.s.warmup:
                    wr = CellRunner(base, replace(base.s, prompt=prof.prompt, num_predict=prof.num_predict),
                                    cell, prof, self.sweep_id, None, 0, None)
                    for w in range(base.s.warmup):
                        self.sink(Phase(f"{m}: warm-up {w + 1}/{base.s.warmup}"))
                        await wr.run_rep(m, -1 - w, True)
                calib[m] = await self._calibrate(base, m)
                await base._idle_check(setup)
                warmed.add(m)
            cpt, counts = calib[m]
            depth_text = depthtext.text_for_tokens(cell.depth, cpt)
            prompt = depthtext.assemble(depth_text, prof.prompt)
            cs = replace(base.s, prompt=prompt, num_predict=prof.num_predict, warmup=0)
            baseline = counts.get(cell.profile)
            cr = CellRunner(base, cs, cell, prof, self.sweep_id, self.slo, cell.depth,
                            baseline + _assembly_overhead(cpt) if (baseline and cell.depth) else baseline)
            cr.num_parallel = self.result.num_parallel
            run = ModelRun(m, show=base._shows[m], num_ctx=base.num_ctx(m), ctx_note=base._ctx_note.get(m, ""))
            run.flags.extend(f for f in setup.flags if f.startswith("foreign load"))  # the idle check
            cr.lane_restore = None
            cr._start_ms = int(time.time() * 1000)  # each cell its own span, not the sweep's
            self.result.cells.append(CellRun(cell, prof, cr, run, cell.depth))
            self.sink(Phase(f"{m} {cell.key}: loading/checking placement"))
            await cr.check_placement(run, m, before=True)
            spec_start = await cr._spec.read(m)
            k = cell.concurrency
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
                await cr._journal(run)
            spec_end = await cr._spec.read(m)
            if spec_start is not None and spec_end is not None and spec_end.drafted is not None:
                run.spec_total = spec_end.minus(spec_start)
            await cr.check_placement(run, m, before=False)
            run.completed = True
            self.result.cells[-1].end_ms = int(time.time() * 1000)

    async def _wrap_up(self, base: BenchRunner, models: list[str], outcome: str) -> None:
        sampler = base._sampler
        if sampler is not None:
            sampler.stop()
        end_ms = int(time.time() * 1000)
        lane_restore = await end_residency(base.residency, self.sink)
        self.result.lane_restore = lane_restore
        self.result.identity = dict(base._identity)
        self.result.gpu = base.host_facts.get("gpu.name", "")
        for c in self.result.cells:
            cr, run = c.runner, c.run
            cr.lane_restore = lane_restore
            if outcome != "FINISHED" and not run.completed:
                run.status = outcome
            cr._finish(run, sampler)
            samples = cr.samples(run)
            run.flags.extend(cr.cell_flags(run, samples))
            st = cell_stats(samples, self.slo)
            st.extra.update({k: v for k, v in run.summary.items() if k in SPEC_CELL_KEYS})
            run_id = None
            if self.recorder is not None and (run.reps or run.status != "FINISHED"):
                record = cr.to_record(run, cr._start_ms, c.end_ms or end_ms, sampler)
                self.sink(Phase(f"recording the run of {run.model} {c.cell.key}…"))
                res = await asyncio.to_thread(self.recorder, record)
                if res is not None:
                    run.sync_message, run.run_id = res.message, res.run_id
                    run.not_saved = bool(getattr(res, "lost", False))
                    run_id = res.run_id
            c.result = CellResult(c.cell, st, run_id=run_id, depth_tokens=cr.measured_depth(run),
                                  roofline_pct=run.summary.get("roofline_pct"), flags=tuple(run.invalid + run.flags),
                                  prompt_tokens=cr.baseline_prompt_tokens if not c.cell.depth else None,
                                  num_predict=c.profile.num_predict)
        # the Markdown's pp<N> names the profile prompt's tokens: give every depth of a row the same N
        prompt_tokens = {(r.cell.model, r.cell.profile): r.prompt_tokens for r in self.result.results if r.prompt_tokens}
        for c in self.result.cells:
            if c.result is not None and c.result.prompt_tokens is None:
                c.result = replace(c.result, prompt_tokens=prompt_tokens.get((c.cell.model, c.cell.profile))
                                   or c.runner.baseline_prompt_tokens)


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
