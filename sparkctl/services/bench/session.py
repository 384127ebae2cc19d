"""MeasurementSession: what every measurement on one engine shares (a bench, a sweep and its
cells, an eval).

A measurement borrows an engine for a while and must give it back as it found it. Whatever
kind it is, it does the same things around its own requests, and does them here:
- the bench lock (one measurement per engine, lock.py) and the repair of what a dead one
  left (recovery.py), before it looks at what is resident: ``locked``;
- the preflight: the engine's version, each model's /api/show, its context (a resident model
  keeps its own), its size and digest, the host's facts, the memory reserve and the fit;
- the residency journal and guard (residency_guard.py): what was resident is written down before
  anything is touched and put back at the end, on every exit path, as its own task that a
  second Ctrl-C cannot stop (``guarded``);
- the GPU sampler (sampler.py), started with the requests and stopped at the end;
- placement checks, the idle check, solo unloads;
- coldness (coldness.py: the template opening every cold request shares) and engine identity
  (engineid.py, and Ollama's llama-server runner beside each model, services/runners.py);
- the tags every record of it carries (engine, model, host, identity, the workload's
  identity, core/workload.py) and recording: the spool journal of a run in flight and the
  finished record.

The runners (runner.py's BenchRunner, sweep.py's cells, evals/runner.py) keep only what is
theirs: their requests, their figures and their record's own fields. They reach all of the
above through this class's public methods and attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import replace
from typing import Any, AsyncIterator, Awaitable, Callable

from sparkctl import __version__
from sparkctl.config import Config
from sparkctl.core import prefill
from sparkctl.core.budget import build_budget
from sparkctl.core.engine_identity import version_at_least
from sparkctl.core.names import ModelName, model_key
from sparkctl.core.placement import placement
from sparkctl.core.redact import redact_text, redact_uri
from sparkctl.core.snapshots import GIB, MemInfo, ResidentModel, Unavailable
from sparkctl.core.workload import WorkloadIdentity
from sparkctl.engines.base import DoneEvent, EngineError, ModelNotFound, ShowInfo
from sparkctl.services.bench import coldness, engineid
from sparkctl.services.bench.events import ContextChosen, Notice, Phase, Sink
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.services.bench.lock import BenchLock
from sparkctl.services.bench.recovery import repair_before
from sparkctl.services.bench.residency_guard import ResidencyGuard
from sparkctl.services.bench.results import ModelRun
from sparkctl.services.bench.sampler import GpuSampler
from sparkctl.services.bench.settings import BenchRefused, BenchSettings
from sparkctl.services.bench.wrapup import finish_shielded
from sparkctl.services.runners import RunnerWatch

FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"


def model_names(models) -> list[ModelName]:
    """A measurement's models, once each, as ModelNames: those parsed where they entered pass
    through as they are; a plain str (a caller in Python) is kept exactly as given."""
    return list(dict.fromkeys(ModelName.of(m) for m in models))


class MeasurementSession:
    """One measurement's hold on an engine: its lock, preflight state, residency, sampler,
    identity and recording. `kind` is what the residency journal calls it (bench, sweep,
    eval); `settings` the bench settings its guards read (context, keep-alive, mode, think)."""

    def __init__(self, cfg: Config, engine: Any, probes: Any, settings: BenchSettings, *, kind: str = "bench",
                 sink: Sink | None = None, recorder: Callable[[Any], Any] | None = None,
                 journal: Callable[[Any], Any] | None = None) -> None:
        self.cfg = cfg
        self.engine = engine
        self.probes = probes
        self.settings = settings
        self.kind = kind
        self._sink = sink or (lambda ev: None)
        self.recorder = recorder  # blocking: RunRecord -> SyncResult; run via to_thread
        self.journal = journal  # blocking: RunRecord (so far) -> None; run via to_thread
        self.engine_version = "unknown"
        self.host_facts: dict[str, str] = {}
        self.budget: Any = None
        self.ctx_requested: int | None = None  # set when the server's context replaced ours
        self.context: Any = None  # the ContextChoice made in preflight (services/bench/context.py)
        self.start_ms = 0
        self.nonce = secrets.token_hex(3)  # the cold preamble's marker (the opening's probes, a bench's requests)
        self.residency: ResidencyGuard | None = None  # what was resident before, put back after
        self.lane_restore: LaneRestore | None = None  # what the end put back (set by `guarded`)
        self.sampler: GpuSampler | None = None
        self.windows: list[tuple[float, float]] = []  # every request of the measurement, all models
        self.runners = RunnerWatch(engine)  # Ollama's llama-server runner beside each model (services/runners.py)
        self._shows: dict[str, ShowInfo] = {}
        self._digests: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._ctx_note: dict[str, str] = {}
        self._openings: dict[str, coldness.Opening] = {}  # per model: the template opening cold requests share
        self._identity: dict[str, dict[str, str]] = {}  # per model: runner, its build, flash attention, KV cache
        self._runner_said: set[str] = set()  # why a runner is not read: said once per measurement

    # ---- reporting --------------------------------------------------------------------------

    def sink(self, ev: Any) -> None:
        """Report to the UI. A UI that fails (a dead terminal after an ssh hang-up raises
        EIO) must never change what is measured or recorded."""
        try:
            self._sink(ev)
        except Exception:
            self._sink = lambda ev: None

    def notice(self, text: str) -> None:
        self.sink(Notice(text))

    def phase(self, text: str) -> None:
        self.sink(Phase(text))

    # ---- what the preflight learnt, per model -------------------------------------------------

    def show(self, model: str) -> ShowInfo | None:
        return self._shows.get(model)

    def digest(self, model: str) -> str:
        return self._digests.get(model, "")

    def size(self, model: str) -> int | None:
        return self._sizes.get(model)

    def num_ctx(self, model: str) -> int:
        """The context `model` runs at: one for every model of the measurement (context.py)."""
        return self.settings.num_ctx

    def ctx_note(self, model: str) -> str:
        """Why `model` runs at another context than asked ('' when it does not)."""
        return self._ctx_note.get(model, "")

    def new_run(self, model: str, *, with_ctx_note: bool = True) -> ModelRun:
        """A run of `model` as the preflight left it: its show, its context (and why)."""
        return ModelRun(model, show=self.show(model), num_ctx=self.num_ctx(model),
                        ctx_note=self.ctx_note(model) if with_ctx_note else "")

    def identity(self, model: str) -> dict[str, str]:
        """engine.* tags of the runner serving `model` (its build, flash attention, KV cache)."""
        return dict(self._identity.get(model, {}))

    def identities(self) -> dict[str, dict[str, str]]:
        return {m: dict(v) for m, v in self._identity.items()}

    def opening(self, model: str) -> coldness.Opening | None:
        return self._openings.get(model)

    def set_opening(self, model: str, opening: coldness.Opening) -> None:
        self._openings[model] = opening

    @property
    def cold_by_request(self) -> bool:
        """Whether cold prefill is obtained by changing the prompt's start (every engine but
        llama-server, where the adapter turns its prompt cache off instead)."""
        return getattr(self.engine, "kind", "") != "llama.cpp"

    def keep_alive(self, model: str) -> Any:
        """A model that was resident before the measurement gets no keep_alive (Ollama keeps
        its session); one the measurement loads gets the bench's."""
        wire = self.settings.keep_alive_wire
        return wire if self.residency is None else self.residency.keep_alive(model, wire)

    def think_for(self, model: str) -> bool | None:
        """Only name `think` for models that can: Ollama answers 400 to think on others."""
        show = self._shows.get(model)
        if show is None or "thinking" not in show.capabilities:
            return None
        return self.settings.think

    def model_system(self, model: str) -> str:
        show = self._shows.get(model)
        return show.system if show is not None else ""

    def nonce_position(self, model: str) -> str:
        if not self.cold_by_request:
            return coldness.NONCE_NONE
        return coldness.nonce_position(getattr(self.engine, "kind", ""), self.model_system(model))

    def load_phase(self, model: str) -> str:
        """What the status line says before a model's first request: "loading" only when a
        load happens (a model resident at the run's context is only checked)."""
        if self.residency is not None and not self.residency.loads(model):
            return f"{model} is resident at num_ctx {self.num_ctx(model)}: checking where it runs"
        return f"loading {model}"

    def add_window(self, window: tuple[float, float]) -> None:
        """A request of the measurement (any model's): GPU load inside it is the bench's own."""
        self.windows.append(window)

    # ---- the lock ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def locked(self, models: list[str]) -> AsyncIterator[None]:
        """Hold the engine's bench lock (waiting or refusing as the settings say), and put back
        what a dead bench left changed before this one looks at what is resident."""
        lock = BenchLock(self.engine.host, models)
        await lock.acquire(self.settings.wait, self.notice)
        try:
            await repair_before(self.cfg, self.engine, self.notice, lock_held=True)
            yield
        finally:
            lock.release()

    # ---- preflight --------------------------------------------------------------------------

    def _within_trained_context(self, shows: dict[str, ShowInfo]) -> None:
        """A context asked for (--ctx, the num_ctx setting, a matching re-bench) past a
        model's trained one is refused before anything loads: Ollama would run the model at
        its trained context, and the run would record one it never had."""
        from sparkctl.core.fit import model_context_length

        for m, sh in shows.items():
            trained = model_context_length(sh.model_info)
            if trained and self.settings.num_ctx > trained:
                raise BenchRefused(f"num_ctx {self.settings.num_ctx} is more than {m}'s trained context "
                                   f"({trained} tokens): the engine would run it at {trained}; ask for {trained} "
                                   f"or less (--ctx)")

    async def preflight(self, models: list[str]) -> dict[str, ShowInfo]:
        self.phase("checking the engine")
        self.engine_version = await self.engine.version()
        shows = {}
        for m in models:
            shows[m] = await self.engine.show(m)
        self._shows = shows
        s = self.settings
        if s.ctx_explicit and not getattr(self.engine, "fixed_context", False):
            self._within_trained_context(shows)
        if getattr(self.engine, "fixed_context", False):
            # OpenAI-compatible servers fix the context at start: record theirs, not ours.
            ctx = next((sh.model_info.get("server.n_ctx") for sh in shows.values()
                        if isinstance(sh.model_info.get("server.n_ctx"), int)), None)
            if ctx and ctx != s.num_ctx:
                self.ctx_requested = s.num_ctx
                self.settings = replace(s, num_ctx=ctx)
            self.sink(ContextChosen(self.settings.num_ctx, "the server's" if ctx else ""))
        elif getattr(self.engine, "reports_placement", True) and not s.ctx_explicit:
            # One context for every model (services/bench/context.py): a resident lane
            # model's own, so it is not reloaded (its router relies on it) and the others
            # compare like for like with it; said before any request, even when output is
            # piped: the context is part of what the run measures.
            from sparkctl.services.bench.context import choose_context, resident_contexts

            choice = choose_context(models, self.cfg.lanes, getattr(self.cfg, "contenders", ()),
                                    resident_contexts(await self.engine.ps()), s.num_ctx,
                                    getattr(self.cfg, "contender_lanes", None))
            self.context = choice
            if choice.num_ctx != s.num_ctx:
                self.settings = replace(s, num_ctx=choice.num_ctx)
                for m in models:
                    self._ctx_note[m] = choice.note
            if choice.note:
                self.notice(choice.note)
            self.sink(ContextChosen(choice.num_ctx, choice.why))
        else:
            self.sink(ContextChosen(s.num_ctx, (s.ctx_why or "given") if s.ctx_explicit else ""))
        try:
            for lm in await self.engine.tags():
                for m in models:
                    if model_key(lm.name) == model_key(m):
                        self._sizes[m] = lm.size
                        self._digests.setdefault(m, lm.digest)
        except EngineError:
            pass  # sizes only refine the roofline; the bench does not need them
        host = await asyncio.to_thread(self.probes.read)
        self.host_facts = host_tags(host)
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
            self.budget = budget
        if self.engine.kind == "ollama" and self.settings.mode == "beside":
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
            self.phase(f"checking that {m} fits at num_ctx {self.num_ctx(m)}")
            fit = await fit_check(self.cfg, self.engine, self.probes, m, num_ctx=self.num_ctx(m))
            reason = refusal_reason(fit)
            if reason:
                raise BenchRefused(f"{reason}; unload something, lower --ctx, or use --solo")

    # ---- residency, sampler and the end of every exit path ------------------------------------

    async def guarded(self, models: list[str], measure: Callable[[], Awaitable[Any]],
                      finish: Callable[[str, int], Awaitable[Any]], *, what: str = "the runs",
                      on_refused: Callable[[BenchRefused], None] | None = None,
                      ended: Callable[[], None] | None = None) -> None:
        """Journal what is resident, start the GPU sampler (after solo's unloads), run
        `measure()`, and however it ends (finished, refused, failed, Ctrl-C, SIGHUP, a dead
        terminal) stop the sampler, put residency back and call `finish(outcome, end_ms)` to
        finish and record the runs. That end runs as its own task: a second Ctrl-C, SIGHUP or
        Escape while it runs must not leave production unloaded or a run unrecorded.
        `on_refused`: a guard refused the measurement after it began (the runs say so).
        `ended`: called when the measurement was not a failure and its end went through."""
        self.residency = ResidencyGuard(self.cfg, self.engine, models, kind=self.kind, mode=self.settings.mode,
                                        keep_loaded=self.settings.keep_loaded)
        await self.residency.begin(self.num_ctx, self.notice)
        outcome = FINISHED
        try:
            if self.settings.mode == "solo":
                await self.unload_others(models)
            self.sampler = GpuSampler(self.gpu_reader()).start()
            await measure()
        except (asyncio.CancelledError, KeyboardInterrupt):
            outcome = KILLED
            raise
        except BenchRefused as exc:
            outcome = FAILED  # MLflow has no "refused" status: the run says it in its guard tags
            if on_refused is not None:
                on_refused(exc)
            raise
        except BaseException:
            outcome = FAILED
            raise
        finally:
            end = await finish_shielded(self._end(outcome, finish), self.notice, what=what)
            # every ending (finished, stopped) shows the runs as recorded: a stopped
            # measurement's finished requests belong on the screen, not only in MLflow
            if ended is not None and outcome != FAILED and not end.cancelled() and end.exception() is None:
                ended()

    async def _end(self, outcome: str, finish: Callable[[str, int], Awaitable[Any]]) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        end_ms = int(time.time() * 1000)
        # Residency first (the journal already holds every finished repetition), so the
        # runs can say whether the engine was left as it was found.
        self.lane_restore = await self.end_residency()
        await finish(outcome, end_ms)

    async def end_residency(self) -> LaneRestore:
        """Put back what the guard borrowed, each error loud."""
        if self.residency is None:
            return LaneRestore()
        out = await self.residency.end(self.phase)
        for line in out.errors():
            self.notice(line)
        for line in out.summary():
            self.phase(line)
        return out

    def gpu_reader(self):
        """Only the GPU for the 0.5 s sampler when the probes can (not /proc as well)."""
        gpu_probe = getattr(self.probes, "gpu_probe", None)
        if gpu_probe is not None and hasattr(gpu_probe, "read"):
            return gpu_probe.read
        return lambda: self.probes.read().gpu

    async def sample_once(self) -> None:
        """A GPU reading at the end of a request (a request shorter than the sampler's period
        still has its own sample)."""
        if self.sampler is not None:
            await asyncio.to_thread(self.sampler.sample_once)

    async def idle_check(self, run: ModelRun) -> None:
        """Before a model's repetitions: is anything else using the GPU? NVML's utilization
        averages over ~1 s, so it is read after a pause with no request of ours."""
        gpu_probe = getattr(self.probes, "gpu_probe", None)
        if gpu_probe is None or self.sampler is None:
            return
        from sparkctl.services.bench.sampler import NVML_AVERAGING_S

        await asyncio.sleep(NVML_AVERAGING_S)
        try:
            report = await asyncio.to_thread(self.gpu_reader())
        except Exception:
            return
        sample = self.sampler.aggregate(report)
        util = sample.get("util_pct") if sample else None
        if util is not None and util >= 20.0:
            run.flags.append(f"foreign load: the GPU was {util:.0f}% busy before {run.model}'s "
                             "repetitions, with no request of the bench running")

    async def unload_if_resident(self, model: str) -> None:
        # the residency journal already names every model solo unloads (ResidencyGuard.begin)
        if any(model_key(r.name) == model_key(model) for r in await self.engine.ps()):
            self.phase(f"solo: unloading {model}")
            await self.engine.unload(model)

    async def unload_others(self, models: list[str]) -> set[str]:
        want = {model_key(m) for m in models}
        gone = set()
        for rm in await self.engine.ps():
            if model_key(rm.name) not in want:
                self.phase(f"solo: unloading {rm.name}")
                await self.engine.unload(rm.name)
                gone.add(model_key(rm.name))
        return gone

    # ---- placement --------------------------------------------------------------------------

    async def check_placement(self, run: ModelRun, model: str, before: bool,
                              facts: dict[str, str] | None = None) -> None:
        """Load `model` (before) or look at it (after) and record where its weights sit; a
        model not 100% on the GPU is refused before the run unless allowed. `facts`: the host
        facts the engine's GPUs are noted in (the session's own by default)."""
        facts = self.host_facts if facts is None else facts
        if not getattr(self.engine, "reports_placement", True):
            await self._unverified_placement(run, model, before, facts)
            return
        if before:
            await self.engine.load(model, keep_alive=self.keep_alive(model),
                                   options={"num_ctx": self.num_ctx(model)})
            await self._engine_gpus(facts)
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
            if before and not self.settings.allow_cpu:
                raise BenchRefused(f"{msg}; the bench needs 100% GPU (use --allow-cpu to run it marked invalid)")
            run.invalid.append(msg)

    async def _engine_gpus(self, facts: dict[str, str]) -> None:
        """The GPUs a local Ollama's runner processes use, so power, clocks and foreign load
        are read there and not on GPUs that serve other jobs (a multi-GPU box)."""
        if self.sampler is None:
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
            self.sampler.indices = (self.sampler.indices or set()) | used
            facts["guard.engine_gpus"] = ",".join(str(i) for i in sorted(self.sampler.indices))

    async def _unverified_placement(self, run: ModelRun, model: str, before: bool, facts: dict[str, str]) -> None:
        """Engines that cannot say where the weights sit (llama-server, vLLM, SGLang): check
        the model is served, record placement as unknown and flag it; neither refuse the run
        nor claim a GPU placement nobody saw."""
        label = f"unknown ({self.engine.kind} does not report placement)"
        if before:  # the engine's load() checks that the model is served and raises if not
            await self.engine.load(model, keep_alive=self.keep_alive(model),
                                   options={"num_ctx": self.num_ctx(model)})
            evidence = await self._nvml_evidence(model, facts)
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

    async def _nvml_evidence(self, model: str, facts: dict[str, str]) -> str:
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
                    facts["guard.engine_pid"] = str(pid)
                    facts["guard.engine_gpu_bytes"] = str(proc.used_bytes)
                    if self.sampler is not None:  # energy and clocks from the engine's GPUs only
                        self.sampler.indices = {x.index for x in readable
                                                if any(p.pid == pid for p in x.processes)}
                    of = f" for a {size / GIB:.2f} GiB model" if size else ""
                    return f"NVML: pid {pid} holds {proc.used_bytes / GIB:.2f} GiB on GPU {g.index}{of}"
        facts["guard.engine_pid"] = str(pid)
        facts["guard.engine_gpu_bytes"] = "0"
        return f"NVML: pid {pid} holds no GPU memory"

    # ---- coldness and engine identity ---------------------------------------------------------

    def request_options(self, model: str) -> dict[str, Any]:
        """The options every request of `model` carries (the context it runs at)."""
        opts = dict(self.settings.options, num_ctx=self.num_ctx(model))
        if self.settings.cache == prefill.WARM and getattr(self.engine, "kind", "") == "llama.cpp":
            opts["cache_prompt"] = True
        return opts

    async def measure_opening(self, model: str, counted_per_request: bool = True) -> None:
        """Two minimal probes: the template opening every cold request of `model` shares.
        Not needed where Ollama's runner counts each request's reused tokens and every request
        runs alone (`counted_per_request`; a sweep's concurrent cells cannot tell whose count
        is whose, so a sweep still probes)."""
        if self.settings.cache != prefill.COLD:
            return
        how = self.runners.per_request_cache(model) if counted_per_request else ""
        if how:
            # Ollama >= 0.30: the runner counts each request's reused tokens itself; no probes
            self._openings[model] = coldness.Opening(
                None, f"{coldness.METHOD_RUNNER}: {how}",
                counts_shared=version_at_least(self.engine_version, (0, 30, 1)))
            self.phase(f"cold prefill of {model}: the runner counts each request's cached tokens ({how})")
            return
        opts = dict(self.request_options(model), num_predict=1)
        if getattr(self.engine, "kind", "") == "llama.cpp":
            opts["cache_prompt"] = True  # the probes must reuse what they share, to show it

        ceiling = self.settings.timeout_s

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
            opening = await coldness.measure_opening(self.nonce_position(model), self.model_system(model),
                                                     self.nonce, send, token_ids)
        except EngineError as exc:
            opening = coldness.Opening(None, f"not measured: {redact_text(exc.message)}")
        except asyncio.TimeoutError:
            opening = coldness.Opening(None, f"not measured: the engine did not answer a probe within the "
                                             f"{ceiling:g} s per-request ceiling")
        self._openings[model] = opening
        self.phase(coldness.describe(opening, self.nonce_position(model)))

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
        said once per measurement (everything then works as without it)."""
        if not self.runners.active or self.runners.facts(model) is not None:
            return
        show = self._shows.get(model)
        facts = await self.runners.locate(model, show.model_path if show is not None else "")
        if facts is not None:
            self.phase(f"{model}'s runner: {facts.short()}")
            return
        note = self.runners.notes.get(model, "")
        if note and note not in self._runner_said:
            self._runner_said.add(note)
            self.phase(f"runner not read ({note}): speculative acceptance and prompt-cache counts as "
                       "Ollama's API gives them")

    # ---- what every record carries ------------------------------------------------------------

    def engine_tags(self) -> dict[str, str]:
        return {"sparkctl.version": __version__, "engine.kind": self.engine.kind,
                "engine.version": self.engine_version, "engine.host": redact_uri(self.engine.host)}

    def model_tags(self, model: str) -> dict[str, str]:
        """The model as the engine described it ('qwen3' and 'qwen3:latest' share a key)."""
        show = self._shows.get(model)
        details = show.details if show else {}
        return {"model.name": model, "model.key": model_key(model), "model.digest": self.digest(model),
                "model.quantization": details.get("quantization_level", ""),
                "model.parameter_size": details.get("parameter_size", ""),
                "model.family": details.get("family", "")}

    def runner_tags(self, model: str) -> dict[str, str]:
        """The engine's identity for `model`: the runner serving it, its build, its settings."""
        return {**self._identity.get(model, {}), **self.runners.tags(model)}

    def build_tags(self) -> dict[str, str]:
        """The engine's own identity (e.g. engine.build): a comparison never mixes builds by accident."""
        engine_identity = getattr(self.engine, "identity", None)
        return {k: str(v) for k, v in engine_identity().items()} if callable(engine_identity) else {}

    @staticmethod
    def workload_tags(identity: WorkloadIdentity) -> dict[str, str]:
        """What the run measured (core.workload), as every comparison matches on it."""
        return {**identity.to_tags(), "sparkctl.kind": identity.kind}

    def gpu_tags(self, windows: list[tuple[float, float]] | None) -> dict[str, str]:
        if self.sampler is None:
            return {}
        gs = self.sampler.summary(windows)
        return {"gpu.throttle_reasons": ",".join(gs["throttle_reasons"]) or "none", "gpu.samples": str(gs["n"])}

    # ---- recording --------------------------------------------------------------------------

    async def record(self, record: Any, into: Any = None, what: str = "") -> Any:
        """Spool, then write to MLflow (from a thread); the outcome is noted on `into` (a run
        with sync_message, run_id and not_saved). `what`: the run, said while it is written.
        None without a recorder."""
        if self.recorder is None:
            return None
        if what:  # the first run on a new store waits seconds for its set-up: say what runs
            self.phase(f"recording the run of {what}…")
        result = await asyncio.to_thread(self.recorder, record)
        if result is not None and into is not None:
            into.sync_message = result.message
            into.run_id = result.run_id
            into.not_saved = bool(getattr(result, "lost", False))  # neither the spool nor MLflow took it
        return result

    async def write_journal(self, build: Callable[[], Any]) -> bool:
        """The run so far (`build()`: its record, status KILLED until it ends) into the spool,
        fsynced, so a crash loses at most what is in flight. False when it could not be written
        (said; a full disk must not end the measurement)."""
        if self.journal is None:
            return True
        try:
            await asyncio.to_thread(self.journal, build())
        except Exception as exc:
            self.phase(f"journal not written ({exc}); a crash would lose this run")
            return False
        return True


def host_tags(host) -> dict[str, str]:
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
