"""The quality run: a suite's sampled items sent to each model, scored as they finish.

It keeps the bench's rules where they matter for a result that must compare months later:
the per-engine lock (an eval and a bench on one engine would disturb each other), the fit
and memory checks before anything loads, placement checked before and after, lane models
put back as they were, a journal of the run so far in the spool (a crash loses at most
the last few seconds of items), and KILLED on an interruption. The guards and their
checks are every measurement's own (services/bench/session.py), composed, not copied.

Per item: temperature 0 and a fixed seed; the answer is scored on the final content,
never the thinking text (the engine's separate field, or the text up to the last `</think>`
where it came inline: core/suites/thinking.py); an item past the ceiling is cancelled and
scored DNF. Each run records the sampling it sent and, where the engine's runner tells
(Ollama's llama-server /slots), the sampling that really ran, else Ollama's layering of its
defaults, said to be inferred (core/sampling.py): a score that moved across an engine
upgrade names a changed default (Ollama 0.32.10 dropped repeat_penalty 1.1).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from sparkctl.config import Config
from sparkctl.core.keepalive import parse_keep_alive
from sparkctl.core.redact import redact_text
from sparkctl.core import sampling
from sparkctl.core.suites import thinking as thinking_rules
from sparkctl.core.suites.sample import sample_ids
from sparkctl.core.suites.tally import Tally
from sparkctl.engines.base import DoneEvent, EngineError, EngineStalled, EngineUnreachable, TokenEvent
from sparkctl.services.bench.events import Phase
from sparkctl.services.bench.lane_restore import LaneRestore
from sparkctl.services.bench.results import ModelRun
from sparkctl.services.bench.session import MeasurementSession, model_names
from sparkctl.services.bench.settings import BenchSettings
from sparkctl.services.evals.verdicts import chances, passed, score_item
from sparkctl.services.evals.suites import Suite, SuiteItem

UI_BATCH_S = 0.1
JOURNAL_EVERY_S = 10.0  # journal the run so far at most this often (and at its end)


@dataclass(frozen=True)
class EvalSettings:
    suite: str
    n: int | None  # None: every item
    seed: int
    timeout_s: float
    concurrency: int
    num_predict: int
    think: bool
    num_ctx: int
    keep_alive: str | int | float
    ctx_explicit: bool = False
    allow_cpu: bool = False
    wait: bool = True
    temperature: float = 0.0
    template: str = "sparkctl"  # GSM8K's prompt template (core.suites.gsm8k.TEMPLATES); "lm-eval": the task's own

    @classmethod
    def from_config(cls, cfg: Config, suite: str, **overrides: Any) -> "EvalSettings":
        e = cfg.eval
        base = cls(suite=suite, n=e.n, seed=e.seed, timeout_s=e.timeout_s, concurrency=e.concurrency,
                   num_predict=e.num_predict, think=e.think, num_ctx=cfg.bench.num_ctx,
                   keep_alive=cfg.bench.keep_alive)
        if overrides.get("num_ctx") is not None:
            overrides.setdefault("ctx_explicit", True)
        if overrides.get("n") == "all":
            overrides["n"] = None
            return replace(base, **{k: v for k, v in overrides.items() if v is not None or k == "n"})
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    def bench_settings(self, cfg: Config) -> BenchSettings:
        """The bench's settings that the shared guards read (context, keep-alive, placement)."""
        return BenchSettings.from_config(
            cfg.bench, num_predict=self.num_predict, temperature=self.temperature, seed=cfg.bench.seed,
            timeout_s=self.timeout_s, mode="beside", keep_alive=str(self.keep_alive), think=self.think,
            allow_cpu=self.allow_cpu, wait=self.wait, num_ctx=self.num_ctx if self.ctx_explicit else None,
        )


# ---- events (the CLI prints them, the TUI turns them into messages) ------------------------------


@dataclass(frozen=True)
class EvalStarted:
    model: str
    suite: str
    item_ids: tuple[str, ...]


@dataclass(frozen=True)
class ItemStarted:
    model: str
    item_id: str
    position: int  # 0-based in the sample


@dataclass(frozen=True)
class ItemLive:
    """Streamed text since the last batch, and the item's token count so far."""

    model: str
    item_id: str
    answer: str
    thinking: str
    tokens: int
    elapsed_s: float


@dataclass
class ItemResult:
    item_id: str
    position: int
    prompt_sha256: str
    response: str = ""
    thinking: str = ""
    verdict: dict[str, Any] | None = None  # None: not scored (DNF or error)
    passed: bool = False
    dnf: bool = False
    error: str | None = None
    eval_count: int | None = None  # the engine's token count (thinking included)
    thinking_tokens: int = 0  # streamed thinking chunks (a lower bound where chunks hold several)
    client_tokens: int = 0
    seconds: float = 0.0
    done_reason: str | None = None
    thinking_removed: str = ""  # how the thinking was kept out of the scored text (core/suites/thinking.py)

    def row(self) -> dict[str, Any]:
        out = {"item_id": self.item_id, "prompt_sha256": self.prompt_sha256, "response": self.response,
               "verdict": self.verdict, "passed": self.passed, "dnf": self.dnf, "error": self.error,
               "tokens": self.eval_count if self.eval_count is not None else self.client_tokens,
               "thinking_tokens": self.thinking_tokens, "seconds": round(self.seconds, 3),
               "done_reason": self.done_reason, "thinking": self.thinking,
               "thinking_removed": self.thinking_removed}
        return out


@dataclass(frozen=True)
class ItemDone:
    model: str
    result: ItemResult
    tally: Tally
    eta_s: float | None


@dataclass
class ModelEval:
    model: str
    suite: str
    item_ids: tuple[str, ...]
    guard: ModelRun  # placement, flags and invalid reasons, as a bench run has them
    items: dict[str, ItemResult] = field(default_factory=dict)
    tally: Tally | None = None
    status: str = "FINISHED"
    start_ms: int = 0
    end_ms: int = 0
    thinking: bool | None = None  # None: the model cannot think
    record_id: str = field(default_factory=lambda: secrets.token_hex(16))
    run_id: str | None = None
    sync_message: str = ""
    not_saved: bool = False  # neither the spool nor MLflow took the run (tracking.sync.SyncResult.lost)
    completed: bool = False
    started: bool = False  # its model was loaded for the eval
    sampling_effective: dict[str, Any] = field(default_factory=dict)  # what the runner ran with
    sampling_source: str = ""  # where that was read, or that it is inferred

    @property
    def summary(self) -> dict[str, float]:
        return self.tally.summary() if self.tally else {}


@dataclass(frozen=True)
class EvalModelDone:
    run: ModelEval


@dataclass(frozen=True)
class EvalFinished:
    runs: list[ModelEval]


class EvalRunner:
    def __init__(self, cfg: Config, engine: Any, probes: Any, settings: EvalSettings, suite: Suite,
                 sink: Callable[[Any], None] | None = None, recorder: Callable[[Any], Any] | None = None,
                 journal: Callable[[Any], Any] | None = None) -> None:
        if suite.name != settings.suite:
            raise ValueError(f"settings are for {settings.suite}, the suite is {suite.name}")
        self.cfg = cfg
        self.engine = engine
        self.s = settings
        self.suite = suite
        self.item_ids = tuple(sample_ids([it.id for it in suite.items], settings.n, settings.seed))
        self._items = suite.by_id()
        # what every measurement shares: the lock, engine identity, memory, fit, placement,
        # residency, the GPU sampler and recording
        self.session = MeasurementSession(cfg, engine, probes, settings.bench_settings(cfg), kind="eval",
                                          sink=sink, recorder=recorder, journal=journal)
        self._last_journal = 0.0
        self._journal_failed = False
        self._runs: dict[str, ModelEval] = {}

    def sink(self, ev: Any) -> None:
        self.session.sink(ev)  # a dead terminal must never change what is measured or recorded

    @property
    def engine_version(self) -> str:
        return self.session.engine_version

    @property
    def lane_restore(self) -> LaneRestore | None:
        return self.session.lane_restore

    @property
    def recorder(self):
        return self.session.recorder

    @property
    def journal(self):
        return self.session.journal

    # ---- the whole run ---------------------------------------------------------------------

    async def run(self, models: list[str]) -> list[ModelEval]:
        models = model_names(models)
        async with self.session.locked(models):
            return await self._run_locked(models)

    async def _run_locked(self, models: list[str]) -> list[ModelEval]:
        session = self.session
        start_ms = session.start_ms = int(time.time() * 1000)
        await session.preflight(models)
        runs = {m: self._new_run(m, start_ms) for m in models}
        self._runs = runs

        async def measure() -> None:
            for m in models:
                await self._eval_model(runs[m])

        # like the bench: lanes back and runs recorded even on a second Ctrl-C
        await session.guarded(models, measure, lambda outcome, end_ms: self._wrap_up(runs, outcome, end_ms),
                              ended=lambda: self.sink(EvalFinished(list(runs.values()))))  # stopped runs too
        return list(runs.values())

    def _new_run(self, model: str, start_ms: int) -> ModelEval:
        return ModelEval(model, self.s.suite, self.item_ids, self.session.new_run(model),
                         tally=Tally(self.s.suite, len(self.item_ids)), start_ms=start_ms,
                         thinking=self.session.think_for(model))

    async def _eval_model(self, run: ModelEval) -> None:
        m = run.model
        self.sink(Phase(self.session.load_phase(m)))
        run.started = True
        await self.session.check_placement(run.guard, m, before=True)
        await self.session.read_identity(m)  # runner, build, flash attention, KV type (and Ollama's runner)
        self.sink(EvalStarted(m, self.s.suite, self.item_ids))
        queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
        for pos, iid in enumerate(self.item_ids):
            queue.put_nowait((pos, iid))
        t0 = time.perf_counter()

        async def worker() -> None:
            while True:
                try:
                    pos, iid = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                res = await self._run_item(m, self._items[iid], pos)
                run.items[iid] = res
                self._tally(run, res)
                done = run.tally.done
                left = len(self.item_ids) - done
                eta = (time.perf_counter() - t0) / done * left if done else None
                self.sink(ItemDone(m, res, run.tally, eta))
                await self._journal(run)

        workers = [asyncio.ensure_future(worker()) for _ in range(max(1, self.s.concurrency))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        await self._read_sampling(run)
        await self.session.check_placement(run.guard, m, before=False)
        run.completed = True
        await self._journal(run, force=True)

    def options(self, model: str) -> dict[str, Any]:
        """What every item of `model` is sent (the sampling part of the record)."""
        opts = {"num_ctx": self.session.num_ctx(model), "num_predict": self.s.num_predict,
                "temperature": self.s.temperature, "seed": self.s.seed}
        if self.s.suite == "gsm8k":
            # lm-eval's task ends generation at these strings: a model that goes on to write
            # the next "Q:" itself would otherwise hand the flexible rule a stray number
            from sparkctl.core.suites.gsm8k import LM_EVAL_UNTIL

            opts["stop"] = list(LM_EVAL_UNTIL)
        return opts

    async def _read_sampling(self, run: ModelEval) -> None:
        """After the model's last item: the sampling its runner really ran with (the newest
        task's /slots params), else what Ollama's layering makes of what was sent."""
        m = run.model
        watch = self.session.runners
        got = await watch.sampling(m) if watch.facts(m) is not None else None
        if got is not None:
            task, params = got
            run.sampling_effective = params
            run.sampling_source = f"Ollama's llama-server runner /slots (params of task {task})"
        elif getattr(self.engine, "kind", "") == "ollama":
            show = run.guard.show
            run.sampling_effective = sampling.ollama_effective(
                self.engine_version, sampling.parse_parameters(show.parameters if show else ""), self.options(m))
            why = watch.notes.get(m) or "the runner's /slots was not readable"
            run.sampling_source = (f"inferred: Ollama {self.engine_version}'s defaults under the model's PARAMETERs "
                                   f"under the request's options (runner not read: {why})")
        else:
            run.sampling_source = "not revealed by the engine: only the options sent are known"

    def _tally(self, run: ModelEval, res: ItemResult) -> None:
        item = self._items[res.item_id]
        if res.verdict is not None:
            from sparkctl.core.suites.tally import item_counts

            run.tally.add_answer(item_counts(self.s.suite, res.verdict))
        else:
            run.tally.add_unanswered(chances(self.s.suite, item), dnf=res.dnf)

    # ---- one item --------------------------------------------------------------------------

    def _prompt(self, item: SuiteItem) -> str:
        """What the model is sent: the item's prompt, or for GSM8K its question under the chosen template."""
        if self.s.suite == "gsm8k" and self.s.template != "sparkctl":
            from sparkctl.core.suites.gsm8k import build_prompt

            return build_prompt(item.text, self.s.template)
        return item.prompt

    def workload(self, run: "ModelEval"):
        """What this run measured (core.workload): the suite file, the prompt template and the
        scoring rules, the context it ran at, the answer ceiling and thinking."""
        from sparkctl.core.workload import WorkloadIdentity

        return WorkloadIdentity.eval(suite=self.s.suite, suite_sha256=self.suite.sha256,
                                     template_sha256=_template_sha256(self.s), rule_version=_rules(self.s.suite),
                                     num_ctx=self.session.num_ctx(run.model), num_predict=self.s.num_predict,
                                     think=self.s.think)

    async def _run_item(self, model: str, item: SuiteItem, pos: int) -> ItemResult:
        prompt = self._prompt(item)
        res = ItemResult(item.id, pos, hashlib.sha256(prompt.encode()).hexdigest())
        self.sink(ItemStarted(model, item.id, pos))
        opts = self.options(model)
        stream = self.engine.generate(model, prompt, options=opts,
                                      keep_alive=self.session.keep_alive(model),
                                      think=self.session.think_for(model))
        t_send = time.perf_counter()
        first: list[float] = []
        answer: list[str] = []
        thinking: list[str] = []
        pend_a: list[str] = []
        pend_t: list[str] = []
        last_flush = [t_send]
        done: list[DoneEvent] = []

        def flush(now: float) -> None:
            last_flush[0] = now
            self.sink(ItemLive(model, item.id, "".join(pend_a), "".join(pend_t), res.client_tokens, now - t_send))
            pend_a.clear()
            pend_t.clear()

        async def consume() -> None:
            async for ev in stream:
                now = time.perf_counter()
                if isinstance(ev, TokenEvent):
                    if not ev.text:
                        continue
                    if not first:
                        first.append(now)
                    res.client_tokens += 1
                    if ev.thinking:
                        res.thinking_tokens += 1
                        thinking.append(ev.text)
                        pend_t.append(ev.text)
                    else:
                        answer.append(ev.text)
                        pend_a.append(ev.text)
                    if now - last_flush[0] >= UI_BATCH_S:
                        flush(now)
                elif isinstance(ev, DoneEvent):
                    done.append(ev)

        async def ceiling() -> None:
            # With several items in flight, an engine that serves one at a time queues the
            # rest: the ceiling counts from the item's first token, so waiting in the queue
            # does not make a DNF (waiting is capped at the ceiling times the items in flight).
            consumer = asyncio.ensure_future(consume())
            try:
                if self.s.concurrency > 1:
                    wait_cap = self.s.timeout_s * self.s.concurrency
                    while not consumer.done() and not first:
                        if time.perf_counter() - t_send > wait_cap:
                            raise asyncio.TimeoutError
                        await asyncio.wait({consumer}, timeout=0.05)
                    started = first[0] if first else t_send
                else:
                    started = t_send
                remaining = self.s.timeout_s - (time.perf_counter() - started)
                await asyncio.wait_for(asyncio.shield(consumer), timeout=max(0.0, remaining))
            finally:
                if not consumer.done():
                    consumer.cancel()
                    await asyncio.gather(consumer, return_exceptions=True)
            consumer.result()

        try:
            await ceiling()
        except asyncio.TimeoutError:
            res.dnf = True
            res.done_reason = "dnf"
        except EngineStalled as exc:
            # nothing arrived for the engine's read timeout: busy, not gone; the item did not finish
            res.dnf = True
            res.done_reason = "dnf"
            res.error = None
            self.sink(Phase(redact_text(exc.message)))
        except EngineError as exc:
            res.error = redact_text(exc.message)
            res.done_reason = "error"
            if isinstance(exc, EngineUnreachable):
                raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()  # closing the connection makes the engine stop generating
                except Exception:
                    pass
        end = time.perf_counter()
        flush(end)
        res.seconds = end - t_send
        # thinking is never scored: the engine's own field, or inline up to its end marker
        scored = thinking_rules.answer_of("".join(answer), "".join(thinking))
        res.response = scored.answer
        res.thinking = "".join(thinking) + scored.removed
        res.thinking_removed = scored.how
        if done:
            res.done_reason = done[0].done_reason
            res.eval_count = done[0].eval_count or None
        elif res.dnf:
            res.eval_count = res.client_tokens
        if not res.dnf and res.error is None:
            # IFEval's checkers load NLTK and langdetect and walk long answers: off the event
            # loop (the TUI runs this runner on its own loop)
            try:
                res.verdict = await asyncio.to_thread(score_item, self.s.suite, item, res.response)
                res.passed = passed(self.s.suite, res.verdict)
            except (ValueError, TypeError, KeyError) as exc:
                res.error = f"could not score: {exc}"
                res.done_reason = "error"
        await asyncio.to_thread(self._sidecar, model, res)  # an fsync: off the event loop (the TUI runs on it)
        return res

    # ---- wrap-up, journal, record ------------------------------------------------------------

    async def _wrap_up(self, runs: dict[str, ModelEval], outcome: str, end_ms: int) -> None:
        for run in runs.values():
            run.end_ms = end_ms
            if outcome != "FINISHED" and not run.completed:
                run.status = outcome
            self._finish(run)
            self.sink(EvalModelDone(run))
        if self.recorder is not None:
            for run in runs.values():
                if run.items or (run.started and run.status != "FINISHED"):  # a model never reached: no run
                    await self.session.record(self.to_record(run), into=run, what=run.model)

    def _finish(self, run: ModelEval) -> None:
        g = run.guard
        if run.status == "FINISHED" and run.items and all(r.error for r in run.items.values()):
            run.status = "FAILED"  # the engine answered nothing: not a score
        if run.tally.dnf:
            g.flags.append(f"{run.tally.dnf} item(s) did not finish within {self.s.timeout_s:g} s (DNF)")
        if run.tally.errors:
            first = next(r.error for r in run.items.values() if r.error)
            msg = f"{run.tally.errors} item(s) failed: {first}"
            g.flags.append(msg)
            # an engine that failed items (a crashed runner, OOM) lowers the score for a reason
            # that is not the model's: such a run is not a quality result to compare or promote on
            g.invalid.append(msg)
        if self.suite.modified:
            g.flags.append(f"suite file differs from the published one (sha256 {self.suite.sha256[:12]}…)")
        if self.lane_restore is not None:
            g.lane_restore = self.lane_restore.tag()
            g.residency = self.lane_restore.residency_tag()
            if self.lane_restore.failed:
                g.flags.append("lane restore failed: " + "; ".join(self.lane_restore.failed))

    def _sidecar_path(self, model: str):
        from sparkctl import paths

        run = self._runs.get(model)
        return None if run is None else paths.data_dir() / "evals" / f"{run.record_id}.items.jsonl"

    def _sidecar(self, model: str, res: ItemResult) -> None:
        """Each finished item appended to the run's own items file (fsynced), so the journal
        can point at it instead of rewriting every item every time: a long eval's spool stays
        small, and a crash still keeps every finished item."""
        if self.journal is None or self._journal_failed:
            return
        path = self._sidecar_path(model)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(res.row(), ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            self._journal_failed = True
            self.sink(Phase(f"items file not written ({exc}); a crash would lose this run's items"))

    async def _journal(self, run: ModelEval, force: bool = False) -> None:
        if self.journal is None or self._journal_failed:
            return
        now = time.monotonic()
        if not force and now - self._last_journal < JOURNAL_EVERY_S:
            return
        self._last_journal = now
        ok = await self.session.write_journal(lambda: self.to_record(
            run, status="KILLED", end_ms=int(time.time() * 1000), items_file=self._sidecar_path(run.model)))
        self._journal_failed = not ok

    def to_record(self, run: ModelEval, status: str | None = None, end_ms: int | None = None,
                  items_file=None):
        """The run as an MLflow record. `items_file`: the journal's form, whose items.jsonl
        is read from that file when the record is written (tracking.store)."""
        from sparkctl.tracking.record import RunRecord

        s, g, session = self.s, run.guard, self.session
        ids_text = "\n".join(run.item_ids)
        params = {
            "model": run.model, "suite": s.suite, "n": "all" if s.n is None else s.n, "seed": s.seed,
            "sample_size": len(run.item_ids), "sample_sha256": hashlib.sha256(ids_text.encode()).hexdigest(),
            "suite_sha256": self.suite.sha256, "timeout_s": s.timeout_s, "concurrency": s.concurrency,
            "num_predict": s.num_predict, "temperature": s.temperature, "num_ctx": self.session.num_ctx(run.model),
            "keep_alive": parse_keep_alive(s.keep_alive).wire, "think": s.think,
            # with several items in flight the ceiling counts from the first token (a queue is
            # not a DNF), so DNF counts compare only between runs of the same kind
            "ceiling_from": "first token" if s.concurrency > 1 else "request sent",
        }
        if s.suite == "gsm8k":
            from sparkctl.core.suites.gsm8k import LM_EVAL_UNTIL

            params["stop"] = json.dumps(list(LM_EVAL_UNTIL))
            params["prompt_template"] = s.template
        invalid = list(g.invalid)
        tags = {
            **session.engine_tags(), "sparkctl.kind": "eval", "eval.suite": s.suite,
            **session.model_tags(run.model),
            "model.thinking": "n/a" if run.thinking is None else ("on" if run.thinking else "off"),
            "eval.suite_file": str(self.suite.path), "eval.suite_modified": str(self.suite.modified).lower(),
            "eval.suite_copy": self.suite.copy or "file",  # shipped, pulled, path or config
            "guard.placement_before": g.placement_before, "guard.placement_after": g.placement_after,
            "guard.valid": str(not invalid).lower(), "guard.invalid_reasons": "; ".join(invalid),
            "guard.flags": "; ".join(g.flags),
            **session.host_facts,
        }
        if g.lane_restore:
            tags["guard.lane_restore"] = g.lane_restore
        if g.residency:
            tags["guard.residency"] = g.residency
        tags.update(session.runner_tags(run.model))
        tags["sampling.sent"] = sampling.canonical(self.options(run.model))
        if run.sampling_effective:
            tags["sampling.effective"] = sampling.canonical(run.sampling_effective)
        if run.sampling_source:
            tags["sampling.effective_source"] = run.sampling_source
        removal: dict[str, int] = {}
        for r in run.items.values():
            if not r.dnf and r.error is None:
                removal[r.thinking_removed] = removal.get(r.thinking_removed, 0) + 1
        tags["eval.thinking_removal"] = thinking_rules.describe(removal)
        tags.update(session.workload_tags(self.workload(run)))
        tags.update(session.build_tags())
        if session.sampler is not None:
            gs = session.sampler.summary(None)
            tags["gpu.throttle_reasons"] = ",".join(gs["throttle_reasons"]) or "none"
        results = [run.items[i] for i in run.item_ids if i in run.items]
        summary = dict(run.summary)
        summary["tokens_total"] = float(sum((r.eval_count or r.client_tokens) for r in results))
        summary["thinking_tokens_total"] = float(sum(r.thinking_tokens for r in results))
        summary["seconds_total"] = float(sum(r.seconds for r in results))
        from sparkctl.tracking.record import file_artifact

        items = (file_artifact(items_file) if items_file is not None
                 else "".join(json.dumps(r.row(), ensure_ascii=False) + "\n" for r in results))
        artifacts = {"items.jsonl": items, "sample_ids.json": list(run.item_ids)}
        return RunRecord(
            experiment=self.cfg.tracking.experiment,
            run_name=f"{run.model} {s.suite} @ {self.engine.kind} {self.engine_version}",
            status=status or run.status, start_ms=run.start_ms, end_ms=end_ms or run.end_ms,
            params=params, tags=tags, summary_metrics=summary, artifacts=artifacts, record_id=run.record_id,
        )


def _template_sha256(s: EvalSettings) -> str:
    """The sha256 of the prompt template a suite's items are asked in ("" for IFEval: its
    prompts go to the model as written)."""
    if s.suite != "gsm8k":
        return ""
    from sparkctl.core.suites.gsm8k import template_sha256

    return template_sha256(s.template)


def _rules(suite: str) -> str:
    if suite == "gsm8k":
        from sparkctl.core.suites.gsm8k import RULES_VERSION

        return RULES_VERSION
    from sparkctl.core.suites.ifeval import RULES_VERSION as IFEVAL_RULES

    return IFEVAL_RULES
