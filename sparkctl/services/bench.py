"""BenchRunner: a fixed-prompt, repeated, guarded decode benchmark of one or more models.

Timing and counting happen here, not in a widget: the runner stamps every streamed piece
with the client clock, batches what it reports to the UI (every ~50 ms) and keeps the
engine's own figures from the final chunk beside the client's. Each model's run becomes a
RunRecord that is spooled, then written to MLflow, from a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from sparkctl import __version__
from sparkctl.config import BenchConfig, Config
from sparkctl.core import guards
from sparkctl.core.budget import MemoryBudget, build_budget
from sparkctl.core.gpu import is_throttled
from sparkctl.core.names import model_key
from sparkctl.core.placement import placement
from sparkctl.core.roofline import active_params, bits_per_weight_from_quant, bits_per_weight_from_size, roofline
from sparkctl.core.snapshots import GIB, GpuReport, MemInfo, ResidentModel, Unavailable
from sparkctl.core.stats import is_stable, interleave, summarize
from sparkctl.engines.base import DoneEvent, EngineError, EngineUnreachable, ModelNotFound, ShowInfo, TokenEvent

UI_BATCH_S = 0.05
GPU_SAMPLE_S = 0.5


class BenchRefused(Exception):
    """A validity guard refused the run before it started (exit code 4)."""


@dataclass(frozen=True)
class BenchSettings:
    prompt: str
    num_predict: int
    temperature: float
    seed: int
    num_ctx: int
    warmup: int
    reps: int
    timeout_s: float
    mode: str  # "beside" | "solo"
    keep_alive: str
    bandwidth_gbps: float
    reload_threshold_s: float
    think: bool
    allow_cpu: bool = False

    @classmethod
    def from_config(cls, b: BenchConfig, **overrides: Any) -> "BenchSettings":
        base = cls(
            prompt=b.prompt, num_predict=b.num_predict, temperature=b.temperature, seed=b.seed,
            num_ctx=b.num_ctx, warmup=b.warmup, reps=b.reps, timeout_s=b.timeout_s, mode=b.mode,
            keep_alive=b.keep_alive, bandwidth_gbps=b.bandwidth_gbps,
            reload_threshold_s=b.reload_threshold_s, think=b.think,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def options(self) -> dict[str, Any]:
        # num_ctx stays fixed for the whole bench: a changed runner option makes Ollama reload.
        return {"num_ctx": self.num_ctx, "num_predict": self.num_predict,
                "temperature": self.temperature, "seed": self.seed}

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()


# ---- events the runner reports (the TUI turns them into messages) -------------------------


@dataclass(frozen=True)
class Phase:
    text: str


@dataclass(frozen=True)
class RepStarted:
    model: str
    index: int  # 0-based among measured reps; -1.. for warm-ups
    warmup: bool
    total: int


@dataclass(frozen=True)
class Live:
    """A batch of streamed text plus live gauges for the repetition in flight."""

    model: str
    answer: str
    thinking: str
    tokens: int
    elapsed_s: float
    ttft_s: float | None
    decode_tps: float | None


@dataclass
class RepResult:
    model: str
    index: int
    warmup: bool
    ttft_s: float | None = None
    client_decode_tps: float | None = None
    engine_decode_tps: float | None = None
    prefill_tps: float | None = None
    load_s: float | None = None
    total_s: float | None = None
    wall_s: float = 0.0
    eval_count: int | None = None
    prompt_eval_count: int | None = None
    client_tokens: int = 0
    thinking_tokens: int = 0
    done_reason: str | None = None
    dnf: bool = False
    error: str | None = None
    reload: bool = False
    output: str = ""
    thinking: str = ""
    raw_final: dict = field(default_factory=dict)
    decode_window: tuple[float, float] | None = None
    window: tuple[float, float] | None = None  # request sent .. stream closed (perf_counter)


@dataclass(frozen=True)
class RepDone:
    result: RepResult


@dataclass
class ModelRun:
    model: str
    show: ShowInfo | None = None
    reps: list[RepResult] = field(default_factory=list)
    warmups: list[RepResult] = field(default_factory=list)
    placement_before: str = "n/a"
    placement_after: str = "n/a"
    invalid: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    status: str = "FINISHED"
    summary: dict[str, float] = field(default_factory=dict)
    stable: bool = False
    sync_message: str = ""
    run_id: str | None = None


@dataclass(frozen=True)
class BenchFinished:
    runs: list[ModelRun]


Sink = Callable[[Any], None]


class GpuSampler:
    """Samples GPU power/clock/temperature/throttle in its own thread during a bench."""

    def __init__(self, read_gpu: Callable[[], GpuReport], period_s: float = GPU_SAMPLE_S) -> None:
        self.read_gpu = read_gpu
        self.period_s = period_s
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)

    def start(self) -> "GpuSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                report = self.read_gpu()
            except Exception:  # a probe failure must not end the bench; the gap shows in the data
                report = GpuReport(unavailable=Unavailable("probe failed"))
            if report.gpus:
                g = report.gpus[0]
                self.samples.append((time.perf_counter(), {
                    "power_w": _num(g.power_w), "sm_clock_mhz": _num(g.sm_clock_mhz),
                    "temperature_c": _num(g.temperature_c),
                    "throttle": list(g.throttle_reasons) if isinstance(g.throttle_reasons, tuple) else None,
                }))
            self._stop.wait(self.period_s)

    def power_series(self) -> list[tuple[float, float]]:
        return [(t, s["power_w"]) for t, s in self.samples if s["power_w"] is not None]

    def within(self, windows: list[tuple[float, float]] | None) -> list[tuple[float, dict[str, Any]]]:
        """Samples taken inside any of `windows` (one model's requests), or all of them."""
        if windows is None:
            return list(self.samples)
        return [(t, v) for t, v in self.samples if any(a <= t <= b for a, b in windows)]

    def summary(self, windows: list[tuple[float, float]] | None = None) -> dict[str, Any]:
        samples = self.within(windows)

        def stat(key):
            xs = [s[key] for _, s in samples if s[key] is not None]
            return (min(xs), max(xs), sum(xs) / len(xs)) if xs else None

        reasons: set[str] = set()
        for _, s in samples:
            reasons.update(s["throttle"] or [])
        return {"n": len(samples), "power": stat("power_w"), "sm_clock": stat("sm_clock_mhz"),
                "temperature": stat("temperature_c"), "throttle_reasons": sorted(reasons)}


def _num(x: Any) -> float | None:
    return None if isinstance(x, Unavailable) or x is None else float(x)


class BenchRunner:
    def __init__(self, cfg: Config, engine: Any, probes: Any, settings: BenchSettings,
                 sink: Sink | None = None, recorder: Callable[[Any], Any] | None = None) -> None:
        self.cfg = cfg
        self.engine = engine
        self.probes = probes
        self.s = settings
        self.sink = sink or (lambda ev: None)
        self.recorder = recorder  # blocking: RunRecord -> SyncResult; run via to_thread
        self.engine_version = "unknown"
        self.host_facts: dict[str, str] = {}
        self._shows: dict[str, ShowInfo] = {}
        self.interrupted: RepResult | None = None
        self._digests: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._ctx_requested: int | None = None  # set when the server's context replaced ours

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
            if have is not None and have.context_length == self.s.num_ctx:
                continue  # already loaded as the bench will use it
            self.sink(Phase(f"checking that {m} fits at num_ctx {self.s.num_ctx}"))
            fit = await fit_check(self.cfg, self.engine, self.probes, m, num_ctx=self.s.num_ctx)
            reason = refusal_reason(fit)
            if reason:
                raise BenchRefused(f"{reason}; unload something, lower --ctx, or use --solo")

    def _think(self, model: str) -> bool | None:
        """Only name `think` for models that can: Ollama answers 400 to think on others."""
        show = self._shows.get(model)
        if show is None or "thinking" not in show.capabilities:
            return None
        return self.s.think

    # ---- one repetition ---------------------------------------------------------------------

    async def run_rep(self, model: str, index: int, warmup: bool) -> RepResult:
        r = RepResult(model, index, warmup)
        stream = self.engine.generate(model, self.s.prompt, options=self.s.options,
                                      keep_alive=self.s.keep_alive, think=self._think(model))
        t_send = time.perf_counter()
        t_first = t_last = None
        answer: list[str] = []
        thinking: list[str] = []
        pend_a: list[str] = []
        pend_t: list[str] = []
        last_flush = t_send
        done: DoneEvent | None = None

        async def consume() -> None:
            nonlocal t_first, t_last, last_flush, done
            async for ev in stream:
                now = time.perf_counter()
                if isinstance(ev, TokenEvent):
                    if not ev.text:
                        continue
                    if t_first is None:
                        t_first = now
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
                           None if t_first is None else t_first - t_send, _client_tps(r.client_tokens, t_first, t_last)))
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
            r.error = exc.message
            r.done_reason = "error"
            if isinstance(exc, EngineUnreachable):
                raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass
        end = time.perf_counter()
        flush(end)
        r.wall_s = end - t_send
        r.window = (t_send, end)
        r.output = "".join(answer)
        r.thinking = "".join(thinking)
        r.ttft_s = None if t_first is None else t_first - t_send
        r.client_decode_tps = _client_tps(r.client_tokens, t_first, t_last)
        if t_first is not None and t_last is not None:
            r.decode_window = (t_first, t_last)
        if done is not None:
            r.raw_final = done.raw
            r.done_reason = done.done_reason
            r.eval_count = done.eval_count
            r.prompt_eval_count = done.prompt_eval_count
            if done.eval_duration_ns > 0:
                r.engine_decode_tps = done.eval_count / done.eval_duration_ns * 1e9
            if done.prompt_eval_duration_ns > 0:
                r.prefill_tps = done.prompt_eval_count / done.prompt_eval_duration_ns * 1e9
            # Ollama omits a zero load_duration (0 is a measurement); other engines never send it
            r.load_s = done.load_duration_ns / 1e9 if (done.load_duration_ns or self.engine.kind == "ollama") else None
            r.total_s = done.total_duration_ns / 1e9 if done.total_duration_ns else None
            r.reload = (not warmup) and guards.reload_detected(
                done.load_duration_ns, int(self.s.reload_threshold_s * 1e9))
        elif r.dnf or cancelled:
            r.eval_count = r.client_tokens
        if cancelled:
            self.interrupted = r
            raise asyncio.CancelledError
        return r

    # ---- the whole bench --------------------------------------------------------------------

    async def run(self, models: list[str]) -> list[ModelRun]:
        models = list(dict.fromkeys(models))
        start_ms = int(time.time() * 1000)
        shows = await self.preflight(models)
        runs = {m: ModelRun(m, show=shows[m]) for m in models}
        restore: list[str] = []
        sampler: GpuSampler | None = None
        outcome = "FINISHED"
        try:
            if self.s.mode == "solo":
                restore = await self._unload_others(models)
            sampler = GpuSampler(self._gpu_reader()).start()
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
        except BaseException:
            outcome = "FAILED"
            raise
        finally:
            if sampler is not None:
                sampler.stop()
            end_ms = int(time.time() * 1000)
            for run in runs.values():
                if outcome != "FINISHED":
                    run.status = outcome
                self._finish(run, sampler)
            if self.recorder is not None:
                for run in runs.values():
                    if run.reps or outcome != "FINISHED":
                        record = self.to_record(run, start_ms, end_ms, sampler)
                        result = await asyncio.to_thread(self.recorder, record)
                        if result is not None:
                            run.sync_message = result.message
                            run.run_id = result.run_id
            if restore:
                await self._restore(restore)
        self.sink(BenchFinished(list(runs.values())))
        return list(runs.values())

    async def _bench_models(self, models: list[str], runs: dict[str, ModelRun]) -> None:
        """Load and check each model, warm each up, then the interleaved repetitions."""
        for m in models:
            self.sink(Phase(f"loading {m}"))
            await self._check_placement(runs[m], m, before=True)
        for m in models:
            for w in range(self.s.warmup):
                self.sink(RepStarted(m, -1 - w, True, self.s.warmup))
                res = await self.run_rep(m, -1 - w, True)
                runs[m].warmups.append(res)
                self.sink(RepDone(res))
        for m, i in interleave(models, self.s.reps):
            self.sink(RepStarted(m, i, False, self.s.reps))
            try:
                res = await self.run_rep(m, i, False)
            except asyncio.CancelledError:
                if self.interrupted is not None:  # the partial repetition goes in the KILLED run
                    runs[m].reps.append(self.interrupted)
                raise
            runs[m].reps.append(res)
            self.sink(RepDone(res))
        for m in models:
            await self._check_placement(runs[m], m, before=False)

    def _gpu_reader(self):
        """Only the GPU for the 0.5 s sampler when the probes can (not /proc as well)."""
        gpu_probe = getattr(self.probes, "gpu_probe", None)
        if gpu_probe is not None and hasattr(gpu_probe, "read"):
            return gpu_probe.read
        return lambda: self.probes.read().gpu

    async def _unload_if_resident(self, model: str) -> None:
        if any(model_key(r.name) == model_key(model) for r in await self.engine.ps()):
            self.sink(Phase(f"solo: unloading {model}"))
            await self.engine.unload(model)

    async def _unload_others(self, models: list[str]) -> list[str]:
        want = {model_key(m) for m in models}
        resident = await self.engine.ps()
        lanes = self.cfg.lane_models()
        restore = []
        for rm in resident:
            if model_key(rm.name) not in want:
                self.sink(Phase(f"solo: unloading {rm.name}"))
                await self.engine.unload(rm.name)
                if model_key(rm.name) in lanes:
                    restore.append(rm.name)
        return restore

    async def _restore(self, names: list[str]) -> None:
        for name in names:
            self.sink(Phase(f"restoring lane model {name}"))
            try:
                await self.engine.load(name, keep_alive=self.cfg.models.keep_alive)
            except EngineError as exc:
                self.sink(Phase(f"could not restore {name}: {exc.message}"))

    async def _check_placement(self, run: ModelRun, model: str, before: bool) -> None:
        if not getattr(self.engine, "reports_placement", True):
            await self._unverified_placement(run, model, before)
            return
        if before:
            await self.engine.load(model, keep_alive=self.s.keep_alive, options={"num_ctx": self.s.num_ctx})
        resident = {model_key(r.name): r for r in await self.engine.ps()}
        rm: ResidentModel | None = resident.get(model_key(model))
        label = placement(rm.size, rm.size_vram).label if rm else "not resident"
        if rm is not None and rm.digest:
            self._digests[model] = rm.digest
        if before:
            run.placement_before = label
        else:
            run.placement_after = label
        if rm is None or label != "100% GPU":
            msg = f"{model} placement {'before' if before else 'after'} the run: {label}"
            if before and not self.s.allow_cpu:
                raise BenchRefused(f"{msg}; the bench needs 100% GPU (use --allow-cpu to run it marked invalid)")
            run.invalid.append(msg)

    async def _unverified_placement(self, run: ModelRun, model: str, before: bool) -> None:
        """Engines that cannot say where the weights sit (llama-server, vLLM, SGLang): check
        the model is served, record placement as unknown and flag it; neither refuse the run
        nor claim a GPU placement nobody saw."""
        label = f"unknown ({self.engine.kind} does not report placement)"
        if before:  # the engine's load() checks that the model is served and raises if not
            await self.engine.load(model, keep_alive=self.s.keep_alive, options={"num_ctx": self.s.num_ctx})
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
            run.invalid.append(f"{model} is no longer served by {self.engine.host} after the run")

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
                    of = f" for a {size / GIB:.2f} GiB model" if size else ""
                    return f"NVML: pid {pid} holds {proc.used_bytes / GIB:.2f} GiB on GPU {g.index}{of}"
        self.host_facts["guard.engine_pid"] = str(pid)
        self.host_facts["guard.engine_gpu_bytes"] = "0"
        return f"NVML: pid {pid} holds no GPU memory"

    def _finish(self, run: ModelRun, sampler: GpuSampler | None) -> None:
        reps = run.reps
        if run.status == "FINISHED" and (not reps or all(r.error for r in reps)):
            run.status = "FAILED"  # nothing was measured: not a result to compare
        if any(r.reload for r in reps):
            run.flags.append("reload detected after warm-up")
        cut = [r for r in run.warmups + reps
               if guards.prompt_looks_truncated(r.prompt_eval_count, len(self.s.prompt), self.s.num_ctx)]
        if cut:
            run.flags.append(
                f"prompt truncated: the engine evaluated {cut[0].prompt_eval_count} prompt tokens for a "
                f"{len(self.s.prompt)}-character prompt at num_ctx {self.s.num_ctx}")
        if any(r.dnf for r in reps):
            run.flags.append(f"{sum(r.dnf for r in reps)} repetition(s) did not finish within {self.s.timeout_s:g} s")
        if any(r.error for r in reps):
            run.flags.append(f"{sum(bool(r.error) for r in reps)} repetition(s) failed")
        summ: dict[str, float] = {}
        for key in ("engine_decode_tps", "client_decode_tps", "prefill_tps", "ttft_s", "load_s"):
            s = summarize(getattr(r, key) for r in reps if not r.dnf and not r.error)
            short = key.replace("engine_", "")
            if s.n:
                summ[f"{short}_median"] = s.median
                summ[f"{short}_min"] = s.min
                summ[f"{short}_max"] = s.max
                if s.cv_pct is not None:
                    summ[f"{short}_cv_pct"] = s.cv_pct
        summ["dnf_count"] = float(sum(r.dnf for r in reps))
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
            joules, tokens = 0.0, 0
            for r in reps:
                if r.decode_window and r.eval_count:
                    e = guards.energy(sampler.power_series(), r.decode_window, r.eval_count)
                    if e is not None:
                        joules += e.joules
                        tokens += r.eval_count
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

    def to_record(self, run: ModelRun, start_ms: int, end_ms: int, sampler: GpuSampler | None):
        from sparkctl.tracking.record import RunRecord

        s = self.s
        details = run.show.details if run.show else {}
        params = {
            "model": run.model, "prompt_sha256": s.prompt_sha256, "prompt_chars": len(s.prompt),
            "num_predict": s.num_predict, "temperature": s.temperature, "seed": s.seed,
            "num_ctx": s.num_ctx, "warmup": s.warmup, "reps": s.reps, "timeout_s": s.timeout_s,
            "mode": s.mode, "keep_alive": s.keep_alive, "think": s.think,
            "bandwidth_gbps": s.bandwidth_gbps,
        }
        tags = {
            "sparkctl.version": __version__,
            "engine.kind": self.engine.kind, "engine.version": self.engine_version,
            "engine.host": self.engine.host,
            "model.name": run.model,
            "model.digest": self._digests.get(run.model, ""),
            "model.quantization": details.get("quantization_level", ""),
            "model.parameter_size": details.get("parameter_size", ""),
            "model.family": details.get("family", ""),
            "guard.mode": s.mode,
            "guard.placement_before": run.placement_before,
            "guard.placement_after": run.placement_after,
            "guard.valid": str(not run.invalid).lower(),
            "guard.invalid_reasons": "; ".join(run.invalid),
            "guard.flags": "; ".join(run.flags),
            "guard.reload_detected": str(any(r.reload for r in run.reps)).lower(),
            "guard.stable": str(run.stable).lower(),
            **self.host_facts,
        }
        identity = getattr(self.engine, "identity", None)
        if callable(identity):
            # e.g. engine.build: a comparison must never mix engine builds by accident
            tags.update({k: str(v) for k, v in identity().items()})
        if self._ctx_requested is not None:
            tags["bench.num_ctx_requested"] = str(self._ctx_requested)
            tags["bench.num_ctx_source"] = "server"
        if sampler is not None:
            gs = sampler.summary(_windows(run))
            tags["gpu.throttle_reasons"] = ",".join(gs["throttle_reasons"]) or "none"
            tags["gpu.samples"] = str(gs["n"])
        step_keys = ("ttft_s", "client_decode_tps", "engine_decode_tps", "prefill_tps", "load_s",
                     "total_s", "wall_s", "eval_count", "prompt_eval_count", "client_tokens",
                     "thinking_tokens")
        step_metrics = {k: [_f(getattr(r, k)) for r in run.reps] for k in step_keys}
        step_metrics["dnf"] = [1.0 if r.dnf else 0.0 for r in run.reps]
        step_metrics["reload"] = [1.0 if r.reload else 0.0 for r in run.reps]
        artifacts = {
            "outputs.json": [
                {"rep": r.index, "output": r.output, "thinking": r.thinking, "done_reason": r.done_reason,
                 "dnf": r.dnf, "error": r.error} for r in run.reps
            ],
            "final_chunks.json": [r.raw_final for r in run.warmups + run.reps],
            "prompt.txt": s.prompt,
        }
        if sampler is not None:
            mine = sampler.within(_windows(run))  # this model's requests only, not the others'
            t0 = mine[0][0] if mine else 0.0
            artifacts["gpu_samples.json"] = [{"t_s": round(t - t0, 3), **v} for t, v in mine]
        return RunRecord(
            experiment=self.cfg.tracking.experiment,
            run_name=f"{run.model} @ {self.engine.kind} {self.engine_version}",
            status=run.status, start_ms=start_ms, end_ms=end_ms, params=params, tags=tags,
            step_metrics=step_metrics, summary_metrics=run.summary, artifacts=artifacts,
        )


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
