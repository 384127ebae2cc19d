"""CLI commands for benches: `bench MODEL...` and `sync` (replay the spool into MLflow)."""

from __future__ import annotations

import math
import re
import sys

from sparkctl.cli.engine_args import engine_choice, validate_models
from sparkctl.cli.sweep_cmd import add_sweep_args, cmd_sweep, sweep_requested
from sparkctl.cli.running import ProgressLine, emit, lanes_failed, not_saved, recover, run_tracked
from sparkctl.cli.exitcodes import (CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_NOT_SAVED, EXIT_OK, EXIT_REFUSED,
                                    EXIT_UNREACHABLE)
from sparkctl.core.limits import MAX_NUM_CTX, MAX_REPS, MAX_WARMUP


def register(sub) -> None:
    b = sub.add_parser("bench", help="benchmark models with a fixed prompt; every run lands in MLflow")
    _bench_args(b)
    b.set_defaults(handler=cmd_bench)

    w = sub.add_parser("sweep", help="a workload sweep (bench with --profile/--depth/--concurrency), e.g. "
                                     "--profile arena-v2: Spark Arena's published grid, in its order")
    _bench_args(w)
    w.set_defaults(handler=cmd_bench, sweep=True)

    s = sub.add_parser("sync", help="write runs kept in the local spool to MLflow")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_sync)


def _bench_args(b) -> None:
    b.add_argument("models", nargs="*", metavar="MODEL",
                   help="models to bench (for --engine NAME, default: that engine's configured model)")
    b.add_argument("--reps", type=int, help="measured repetitions per model (default [bench] reps)")
    b.add_argument("--warmup", type=int, help="warm-up requests per model, not measured")
    b.add_argument("--timeout", type=float, metavar="SECONDS", help="per-request ceiling; past it the repetition is DNF")
    b.add_argument("--ctx", type=int, metavar="N",
                   help="num_ctx for every model, fixed for the whole bench (default: the context a resident lane "
                        "model among them runs at, else [bench] num_ctx)")
    b.add_argument("--num-predict", type=int, metavar="N", help="maximum tokens per request")
    b.add_argument("--prompt", help="override the configured prompt (its sha256 is logged)")
    b.add_argument("--solo", action="store_true",
                   help="unload every other model first; everything that was resident is put back after any bench")
    b.add_argument("--keep-loaded", action="store_true",
                   help="leave the models the bench loaded resident afterwards (default: unloaded, so the "
                        "engine holds what it held before)")
    b.add_argument("--cache", choices=("cold", "warm"),
                   help="cold (default): every repetition pays its whole prefill; warm: measure a "
                        "cached follow-up on purpose (recorded as such, never compared with cold)")
    b.add_argument("--until-resolved", action="store_true",
                   help="two models: interleave repetitions until the decode difference's 95%% interval "
                        "excludes zero or is narrower than 2%%, or --max-reps is reached")
    b.add_argument("--max-reps", type=int, default=30, metavar="N",
                   help="with --until-resolved: the most repetitions per model (default 30)")
    b.add_argument("--no-wait", action="store_true",
                   help="if another bench is running on the engine, refuse (exit 4) instead of waiting")
    b.add_argument("--allow-cpu", action="store_true", help="run a model that is not 100%% GPU, marked invalid")
    b.add_argument("--no-think", action="store_true", help="ask thinking models not to think")
    b.add_argument("--json", action="store_true", help="print the per-model results as JSON")
    b.add_argument("--engine", metavar="NAME", help="bench the [engines.NAME] server from the config")
    b.add_argument("--engine-kind", choices=("ollama", "openai"),
                   help="bench an engine given by URL: openai = llama.cpp's llama-server, vLLM, SGLang")
    b.add_argument("--engine-url", metavar="URL", help="that engine's base URL, e.g. http://127.0.0.1:8080")
    t = b.add_argument_group("MLflow, the way AIPerf lays it out")
    t.add_argument("--mlflow-parent-run-id", metavar="RUN_ID",
                   help="write the runs (a sweep: its own run) as children of this existing MLflow run, e.g. one "
                        "AIPerf's runs of the same comparison sit under")
    t.add_argument("--mlflow-export", metavar="FILE",
                   help="write a JSON file naming the MLflow runs written (AIPerf's mlflow_export.json keys)")
    add_sweep_args(b)


def _validate(args, effective_kind: str = "ollama") -> list:
    """The arguments checked; the model names parsed (the ModelNames the bench passes on)."""
    if not args.models:
        raise CliError("bench needs at least one MODEL", EXIT_BAD_INPUT)
    models = validate_models(args.models, effective_kind)
    if args.solo and effective_kind != "ollama":
        raise CliError("--solo needs an engine that can unload models; an OpenAI-compatible server "
                       "serves one fixed model (run one server per model instead)", EXIT_BAD_INPUT)
    for flag, value, low in (("--reps", args.reps, 1), ("--warmup", args.warmup, 0),
                             ("--ctx", args.ctx, 256), ("--num-predict", args.num_predict, 1)):
        if value is not None and value < low:
            raise CliError(f"{flag} must be >= {low}, got {value}", EXIT_BAD_INPUT)
    for flag, value, high in (("--reps", args.reps, MAX_REPS), ("--warmup", args.warmup, MAX_WARMUP),
                              ("--ctx", args.ctx, MAX_NUM_CTX)):
        if value is not None and value > high:
            raise CliError(f"{flag} must be at most {high}, got {_count(value)}", EXIT_BAD_INPUT)
    if getattr(args, "until_resolved", False):
        if len(dict.fromkeys(models)) != 2:
            raise CliError("--until-resolved compares exactly two models", EXIT_BAD_INPUT)
        if args.max_reps < 3:
            raise CliError(f"--max-reps must be >= 3, got {args.max_reps}", EXIT_BAD_INPUT)
        if args.max_reps > MAX_REPS:
            raise CliError(f"--max-reps must be at most {MAX_REPS}, got {_count(args.max_reps)}", EXIT_BAD_INPUT)
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CliError(f"--timeout must be a number of seconds > 0, got {args.timeout:g}", EXIT_BAD_INPUT)
    if args.prompt is not None and not args.prompt.strip():
        raise CliError("--prompt must not be empty", EXIT_BAD_INPUT)
    parent = getattr(args, "mlflow_parent_run_id", None)
    if parent is not None and not re.fullmatch(r"[0-9a-f]{32}", parent.strip()):
        raise CliError(f"--mlflow-parent-run-id: {parent!r} is not an MLflow run id (32 hex digits)", EXIT_BAD_INPUT)
    return models


def _count(value: int) -> str:
    """A count for a message: a number hundreds of digits long is shown by its size."""
    text = str(value)
    return text if len(text) <= 20 else f"a {len(text)}-digit number"


class _Progress(ProgressLine):
    """The bench's progress line: phases, repetitions and live gauges."""

    def __call__(self, ev) -> None:
        from sparkctl.services.bench import Live, Notice, Phase, RepDone, RepStarted

        if isinstance(ev, Notice):
            self.line(ev.text, end="\n", always=True)
            return
        if not self.enabled:
            return
        if isinstance(ev, Phase):
            self.line(ev.text)
        elif isinstance(ev, RepStarted):
            what = ev.label or (f"warm-up {-ev.index}/{ev.total}" if ev.warmup else f"rep {ev.index + 1}/{ev.total}")
            self.line(f"{ev.model}: {what}")
            self.current = f"{ev.model} {what}"
        elif isinstance(ev, Live):
            tps = f"{ev.decode_tps:6.1f} tok/s" if ev.decode_tps else "      -     "
            ttft = f"TTFT {ev.ttft_s:5.2f} s" if ev.ttft_s is not None else "TTFT   -   "
            acc = f"  acc {ev.acceptance_pct:5.1f}%" if ev.acceptance_pct is not None else ""
            self.line(f"{getattr(self, 'current', ev.model)}: {ev.tokens:6d} tokens  {tps}{acc}  {ttft}  "
                      f"{ev.elapsed_s:6.1f} s")
        elif isinstance(ev, RepDone):
            r = ev.result
            if r.dnf:
                self.line(f"{r.model}: DNF after {r.wall_s:.0f} s ({r.client_tokens} tokens)", end="\n")


def _fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_runs(runs) -> str:
    lines = [f"{'MODEL':<28} {'DECODE tok/s':>12} {'min':>7} {'max':>7} {'CV%':>5} {'CLIENT':>7} "
             f"{'PREFILL':>8} {'TTFT s':>7} {'LOAD s':>7} {'DNF':>4}  VERDICT"]
    for run in runs:
        s = run.summary
        verdict = "stable" if run.stable else "UNSTABLE (CV >= 5%)" if "decode_tps_cv_pct" in s else "-"
        if run.invalid:
            verdict = "INVALID"
        lines.append(
            f"{run.model:<28} {_fmt(s.get('decode_tps_median')):>12} {_fmt(s.get('decode_tps_min')):>7} "
            f"{_fmt(s.get('decode_tps_max')):>7} {_fmt(s.get('decode_tps_cv_pct')):>5} "
            f"{_fmt(s.get('client_decode_tps_median')):>7} {_fmt(s.get('prefill_tps_median'), '.0f'):>8} "
            f"{_fmt(s.get('ttft_s_median'), '.2f'):>7} {_fmt(s.get('load_s_median'), '.2f'):>7} "
            f"{int(s.get('dnf_count', 0)):>4}  {verdict}"
        )
    for run in runs:
        extra = []
        if "roofline_pct" in run.summary:
            extra.append(f"roofline {run.summary['roofline_pct']:.0f}% of {run.summary['roofline_ceiling_tps']:.0f} tok/s")
        if "joules_per_token" in run.summary:
            extra.append(f"{run.summary['joules_per_token']:.2f} J/token")
        from sparkctl.core.specdec import summary_text

        spec = summary_text(run.summary)
        if spec:
            extra.append(spec)
        extra.append(f"placement {run.placement_before} -> {run.placement_after}")
        lines.append(f"  {run.model}: " + ", ".join(extra))
        if run.ctx_note:
            lines.append(f"  {run.model}: {run.ctx_note}")
        for msg in run.invalid + run.flags:
            lines.append(f"  ! {run.model}: {msg}")
        if run.sync_message:
            lines.append(f"  {run.model}: {run.sync_message}")
    residency = next((run.residency for run in runs if run.residency), "")
    if residency:  # one bench, one end: what it unloaded and put back
        lines.append(f"residency after the bench: {residency}")
    return "\n".join(lines)


def run_to_dict(run) -> dict:
    return {
        "model": run.model, "status": run.status, "stable": run.stable, "valid": not run.invalid,
        "invalid_reasons": run.invalid, "flags": run.flags, "placement_before": run.placement_before,
        "placement_after": run.placement_after, "summary": run.summary, "mlflow_run_id": run.run_id,
        "tracking": run.sync_message, "num_ctx": run.num_ctx, "num_ctx_note": run.ctx_note,
        "lane_restore": run.lane_restore, "residency": run.residency, "record_id": run.record_id,
        "reps": [
            {k: getattr(r, k) for k in ("index", "ttft_s", "engine_decode_tps", "client_decode_tps",
                                         "prefill_tps", "load_s", "eval_count", "prompt_eval_count",
                                         "thinking_tokens", "done_reason", "dnf", "reload", "error",
                                         "prefill_cached", "prompt_cached_tokens", "cache_note",
                                         "client_decode_basis", "queue_wait_s", "foreign", "preamble",
                                         "prompt_evaluated")}
            | _spec_dict(r.spec)
            for r in run.reps
        ],
    }


def _spec_dict(spec) -> dict:
    if spec is None:
        return {}
    return {"spec_draft_tokens": spec.drafted, "spec_accepted_tokens": spec.accepted,
            "spec_acceptance_pct": None if spec.acceptance is None else spec.acceptance * 100,
            "spec_accept_len": spec.mean_accepted_length}


def cmd_bench(args, cfg) -> int:
    import json

    from sparkctl.services.bench import BenchRunner, BenchSettings
    from sparkctl.services.factory import EngineChoiceError, make_engine, make_probes, make_recorder, make_spool_and_store

    name, kind, url, effective_kind = engine_choice(args, cfg)
    if not args.models and name is not None and cfg.engines[name].model:
        args.models = [cfg.engines[name].model]
    models = _validate(args, effective_kind)
    try:
        engine = make_engine(cfg, name=name, kind=kind, url=url)
    except EngineChoiceError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    if effective_kind == "openai" and args.ctx is not None:
        emit("sparkctl: note: --ctx is not sent to an OpenAI-compatible server (its context is fixed "
              "when it starts); the server's own context is recorded", sys.stderr)
    settings = BenchSettings.from_config(
        cfg.bench, reps=args.reps, warmup=args.warmup, timeout_s=args.timeout, num_ctx=args.ctx,
        num_predict=args.num_predict, prompt=args.prompt, mode="solo" if args.solo else None,
        allow_cpu=args.allow_cpu or None, think=False if args.no_think else None,
        cache=args.cache, wait=False if args.no_wait else None, keep_loaded=True if args.keep_loaded else None,
        until_resolved=args.max_reps if args.until_resolved else None,
        parent_run_id=(args.mlflow_parent_run_id or "").strip() or None,
    )
    progress = _Progress(sys.stderr.isatty() and not args.json)
    if sweep_requested(args):  # --profile/--depth/--concurrency/--slo/--csv/--markdown
        return cmd_sweep(args, cfg, engine, settings, progress, models)
    spool, _store = make_spool_and_store(cfg)
    recovered = recover(spool)
    for text in recovered:
        emit(f"sparkctl: {text}", sys.stderr)
    runner_box: list = []

    async def work():
        try:
            runner = BenchRunner(cfg, engine, make_probes(), settings, sink=progress,
                                 recorder=make_recorder(cfg), journal=getattr(spool, "journal", None))
            runner_box.append(runner)
            return await runner.run(models)
        finally:
            await engine.close()

    runs, stopped = run_tracked(work, progress, what="bench", lanes_bad=lambda: lanes_failed(runner_box),
                                stopped="the runs were recorded as KILLED with the repetitions that finished")
    if stopped is not None:
        return stopped
    if args.mlflow_export:
        from sparkctl.cli.mlflow_export import write_export

        write_export(args.mlflow_export, cfg, [(r.run_id, r.model, "") for r in runs], None)
    if args.json:
        emit(json.dumps([run_to_dict(r) for r in runs], indent=2, default=str), sys.stdout)
    else:
        emit(render_runs(runs), sys.stdout)
    if lanes_failed(runner_box):
        return EXIT_REFUSED
    if not_saved(runs):
        return EXIT_NOT_SAVED
    # a run with nothing measured (every repetition an engine error or DNF) is not a result
    return EXIT_ENGINE_ERROR if any(r.status == "FAILED" for r in runs) else EXIT_OK


def cmd_sync(args, cfg) -> int:
    import json

    from sparkctl.core.redact import redact_text
    from sparkctl.services.factory import make_spool_and_store
    from sparkctl.tracking.sync import sync_pending

    spool, store = make_spool_and_store(cfg)
    recovered = recover(spool)  # runs whose process died are closed KILLED first, then counted
    pending = len(spool.pending())
    synced, failed = sync_pending(spool, store)
    if args.json:
        print(json.dumps({"pending": pending, "synced": synced, "recovered": len(recovered),
                          "failed": [{"record_id": r, "error": redact_text(e)} for r, e in failed]}))
    else:
        for text in recovered:
            print(f"sparkctl: {text}", file=sys.stderr)
        print(f"{synced} of {pending} spooled run(s) written to MLflow ({store.display_uri})")
        for rid, err in failed:
            print(f"  not written: {rid}: {redact_text(err)}")
    return EXIT_OK if not failed else EXIT_UNREACHABLE
