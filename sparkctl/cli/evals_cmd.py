"""`sparkctl eval MODEL... --suite gsm8k|ifeval` (a tracked quality run) and
`sparkctl eval score --suite S FILE` (score saved responses, no model)."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import (
    EXIT_BAD_INPUT,
    EXIT_ENGINE_ERROR,
    EXIT_NOT_SAVED,
    EXIT_OK,
    EXIT_REFUSED,
    CliError,
)
from sparkctl.cli.running import ProgressLine, emit, lanes_failed, not_saved, recover, run_tracked

SUITE_CHOICES = ("gsm8k", "ifeval")
GRID_WIDTH = 50


def _n(text: str):
    if text.strip().lower() == "all":
        return "all"
    try:
        n = int(text)
    except ValueError:
        raise CliError(f"--n must be a whole number or 'all', not {text!r}", EXIT_BAD_INPUT) from None
    if n < 1:
        raise CliError(f"--n must be at least 1, not {n}", EXIT_BAD_INPUT)
    return n


def register(sub) -> None:
    e = sub.add_parser(
        "eval", help="score models on GSM8K or IFEval (a run per model in MLflow); `eval score FILE` rescores saved responses",
        description="Run a quality suite on each MODEL, the same sampled items for every model. "
                    "`sparkctl eval score --suite S FILE.jsonl` scores saved {prompt, response} lines instead "
                    "(a model literally named 'score' is `score:latest`).")
    e.add_argument("models", nargs="+", metavar="MODEL", help="models to evaluate")
    e.add_argument("--suite", required=True, choices=SUITE_CHOICES, help="gsm8k or ifeval")
    e.add_argument("--n", metavar="N", help="items to sample (default [eval] n = 100; 'all' for the whole suite)")
    e.add_argument("--seed", type=int, help="picks the sample (default [eval] seed); the same for every model")
    e.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="per-item ceiling (default [eval] timeout_s = 900); past it the item is DNF")
    e.add_argument("--concurrency", type=int, metavar="K", help="items in flight at once (default [eval] concurrency = 1)")
    e.add_argument("--num-predict", type=int, metavar="N", help="token ceiling per answer (default [eval] num_predict)")
    e.add_argument("--ctx", type=int, metavar="N",
                   help="num_ctx for every model (default: the context a resident lane model among them runs at, "
                        "else [bench] num_ctx)")
    e.add_argument("--no-think", action="store_true", help="ask thinking models not to think")
    e.add_argument("--allow-cpu", action="store_true", help="run a model that is not 100%% GPU, marked invalid")
    e.add_argument("--prompt", choices=("sparkctl", "lm-eval"), default="sparkctl",
                   help="GSM8K prompt template: sparkctl (default: lm-eval's zero-shot CoT prompt plus a sentence "
                        "asking for 'The answer is N.') or lm-eval (the task's prompt unmodified, for scores that "
                        "compare with published lm-eval numbers); recorded with its sha256")
    e.add_argument("--for-promotion", action="store_true",
                   help="the evidence a promotion needs: the whole suite (--n all), every model at one context "
                        "(as always) so the runs pair item by item")
    e.add_argument("--no-wait", action="store_true", help="if a bench or eval is running on the engine, refuse (exit 4)")
    e.add_argument("--engine", metavar="NAME", help="evaluate on the [engines.NAME] server from the config")
    e.add_argument("--engine-kind", choices=("ollama", "openai"), help="an engine given by URL (openai: llama-server, vLLM, SGLang)")
    e.add_argument("--engine-url", metavar="URL", help="that engine's base URL")
    e.add_argument("--json", action="store_true", help="print the results as JSON (keys in docs/quality.md)")
    e.set_defaults(handler=cmd_eval)

    sc = sub.add_parser("eval-score", help="score saved {prompt, response} lines (`sparkctl eval score --suite S FILE`)",
                        description="Score saved responses without a model: FILE.jsonl has one "
                                    '{"prompt": ..., "response": ...} per line; prompts are matched to suite '
                                    "items by their exact text.")
    sc.prog = sc.prog.replace("eval-score", "eval score")
    sc.add_argument("file", metavar="FILE", help="JSONL of {prompt, response}")
    sc.add_argument("--suite", required=True, choices=SUITE_CHOICES, help="gsm8k or ifeval")
    sc.add_argument("--json", action="store_true",
                    help='one object: {"suite", "summary", "samples"} (sample keys in docs/quality.md)')
    sc.set_defaults(handler=cmd_score)


def cmd_eval(args, cfg) -> int:
    return _run_eval(args, cfg)


# ---- eval score ---------------------------------------------------------------------------------


def cmd_score(args, cfg) -> int:
    import json
    from pathlib import Path

    from sparkctl.services.evals import SuiteError, load_suite
    from sparkctl.services.evals.rescore import rescore_file

    path = Path(args.file)
    try:
        suite = load_suite(cfg, args.suite)
        result = rescore_file(suite, path)
    except SuiteError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return EXIT_OK
    s = result.summary
    print(f"{suite.spec.title}: {len(result.samples)} responses from {path}")
    for key, value in s.items():
        if key.startswith(args.suite) and not key.endswith(("_answered", "_ci_low", "_ci_high")):
            print(f"  {key:<24} {value * 100:6.2f}%")
    return EXIT_OK


# ---- eval MODEL... ------------------------------------------------------------------------------


class _Progress(ProgressLine):
    """A line per model: items done, the running accuracy with its interval, ETA, and the
    item in flight with its token count (a runaway answer shows it climbing)."""

    def __init__(self, enabled: bool) -> None:
        super().__init__(enabled)
        self.tally = None
        self.eta = None
        self.live: dict[str, int] = {}

    def __call__(self, ev) -> None:
        from sparkctl.services.bench import Notice, Phase
        from sparkctl.services.evals import EvalStarted, ItemDone, ItemLive, ItemStarted

        if isinstance(ev, EvalStarted):  # a new model: its own tally and ETA
            self.tally, self.eta = None, None
        if isinstance(ev, Notice):
            self.line(ev.text, end="\n", always=True)
            return
        if not self.enabled:
            return
        if isinstance(ev, Phase):
            self.line(ev.text)
        elif isinstance(ev, ItemStarted):
            self.live[ev.item_id] = 0
        elif isinstance(ev, ItemLive):
            self.live[ev.item_id] = ev.tokens
            self._draw(ev.model, f"item {ev.item_id}: {ev.tokens} tokens, {ev.elapsed_s:.0f} s")
        elif isinstance(ev, ItemDone):
            self.live.pop(ev.result.item_id, None)
            self.tally, self.eta = ev.tally, ev.eta_s
            if ev.result.dnf:
                self.line(f"{ev.model}: item {ev.result.item_id} DNF after {ev.result.seconds:.0f} s "
                          f"({ev.result.client_tokens} tokens)", end="\n")
            self._draw(ev.model, "")

    def _draw(self, model: str, current: str) -> None:
        t = self.tally
        if t is None:
            self.line(f"{model}: {current}")
            return
        acc, ci = t.accuracy()
        acc_text = "-" if acc is None else f"{acc * 100:.1f}% [{ci[0] * 100:.0f}-{ci[1] * 100:.0f}]"
        eta = "" if self.eta is None else f"  ETA {_duration(self.eta)}"
        self.line(f"{model}: {t.done}/{t.total}  acc {acc_text}  DNF {t.dnf}{eta}  {current}")


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def grid(run) -> list[str]:
    from sparkctl.core.suites.cells import GLYPH, PENDING, state_of

    cells = [GLYPH[PENDING if run.items.get(iid) is None else state_of(run.items[iid])] for iid in run.item_ids]
    return ["".join(cells[i:i + GRID_WIDTH]) for i in range(0, len(cells), GRID_WIDTH)]


def _pct(x) -> str:
    return "-" if x is None else f"{x * 100:.1f}"


def render_evals(runs) -> str:
    from sparkctl.core.suites.tally import SUITE_METRICS

    if not runs:
        return ""
    suite = runs[0].suite
    metrics = list(SUITE_METRICS[suite])
    heads = [m.replace(f"{suite}_", "") for m in metrics]
    lines = [f"{'MODEL':<28} {'ITEMS':>5} {'DNF':>4} {'ERR':>4} " + " ".join(f"{h:>13}" for h in heads)
             + f" {'95% CI':>13}  STATUS"]
    for run in runs:
        s = run.summary
        lo, hi = s.get(f"{metrics[0]}_ci_low"), s.get(f"{metrics[0]}_ci_high")
        ci = "-" if lo is None else f"{lo * 100:.1f}-{hi * 100:.1f}"
        status = run.status if not run.guard.invalid else f"{run.status} INVALID"
        lines.append(f"{run.model:<28} {int(s.get('items', 0)):>5} {int(s.get('dnf_count', 0)):>4} "
                     f"{int(s.get('error_count', 0)):>4} " + " ".join(f"{_pct(s.get(m)):>13}" for m in metrics)
                     + f" {ci:>13}  {status}")
    lines.append("  accuracy in % over all items (DNF and errors count as not passed); "
                 "over answered items only:")
    for run in runs:
        s = run.summary
        lines.append(f"  {run.model}: " + ", ".join(f"{m.replace(f'{suite}_', '')} {_pct(s.get(m + '_answered'))}"
                                                     for m in metrics))
    for run in runs:
        g = run.guard
        where = g.placement_before if g.placement_before == g.placement_after else (
            f"{g.placement_before} -> {g.placement_after}")
        lines.append(f"  {run.model}: placement {where}, "
                     f"thinking {'n/a' if run.thinking is None else 'on' if run.thinking else 'off'}")
        for row in grid(run):
            lines.append(f"    {row}")
        for msg in run.guard.invalid + run.guard.flags:
            lines.append(f"  ! {run.model}: {msg}")
        if run.sync_message:
            lines.append(f"  {run.model}: {run.sync_message}")
    from sparkctl.core.suites.cells import LEGEND

    lines.append(f"  grid: {LEGEND}")
    return "\n".join(lines)


def eval_to_dict(run) -> dict:
    g = run.guard
    return {
        "model": run.model, "suite": run.suite, "status": run.status, "valid": not g.invalid,
        "invalid_reasons": g.invalid, "flags": g.flags, "placement_before": g.placement_before,
        "placement_after": g.placement_after, "thinking": run.thinking, "summary": run.summary,
        "item_ids": list(run.item_ids), "mlflow_run_id": run.run_id, "tracking": run.sync_message,
        "record_id": run.record_id, "lane_restore": g.lane_restore,
        "items": [{k: v for k, v in run.items[i].row().items() if k != "thinking"}
                  for i in run.item_ids if i in run.items],
    }


def _run_eval(args, cfg) -> int:
    import json

    from sparkctl.cli.engine_args import engine_choice, validate_models
    from sparkctl.services.evals import EvalRunner, EvalSettings, SuiteError, load_suite
    from sparkctl.services.evals.engine import stream_timeout
    from sparkctl.services.factory import EngineChoiceError, make_engine, make_probes, make_recorder, make_spool_and_store

    name, kind, url, effective_kind = engine_choice(args, cfg)
    models = validate_models(args.models, effective_kind)
    import math

    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CliError(f"--timeout must be above 0, not {args.timeout:g}", EXIT_BAD_INPUT)
    for flag, value, low in (("--concurrency", args.concurrency, 1), ("--num-predict", args.num_predict, 1),
                             ("--ctx", args.ctx, 256)):
        if value is not None and value < low:
            raise CliError(f"{flag} must be at least {low}, not {value:g}", EXIT_BAD_INPUT)
    from sparkctl.core.limits import MAX_CONCURRENCY, MAX_NUM_CTX, count_text

    if args.ctx is not None and args.ctx > MAX_NUM_CTX:
        raise CliError(f"--ctx must be at most {MAX_NUM_CTX}, not {count_text(args.ctx)}", EXIT_BAD_INPUT)

    if args.concurrency is not None and args.concurrency > MAX_CONCURRENCY:
        shown = str(args.concurrency) if len(str(args.concurrency)) <= 20 else "a larger number"
        raise CliError(f"--concurrency must be at most {MAX_CONCURRENCY}, not {shown}", EXIT_BAD_INPUT)
    if args.prompt != "sparkctl" and args.suite != "gsm8k":
        raise CliError(f"--prompt {args.prompt} is a GSM8K prompt template; IFEval sends its prompts as written",
                       EXIT_BAD_INPUT)
    n = _n(args.n) if args.n is not None else None
    ctx = args.ctx
    if args.for_promotion:
        if n is not None and n != "all":
            raise CliError(f"--for-promotion runs the whole suite; drop --n {args.n}", EXIT_BAD_INPUT)
        # the whole suite (the margins are sized for it, core/noninferiority.py); every model
        # runs at one context anyway (services/bench/context.py), the lane model's when it is
        # resident, so the runs pair item by item
        n = "all"
    try:
        suite = load_suite(cfg, args.suite)
    except SuiteError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    settings = EvalSettings.from_config(
        cfg, args.suite, n=n, seed=args.seed, timeout_s=args.timeout,
        concurrency=args.concurrency, num_predict=args.num_predict, num_ctx=ctx,
        think=False if args.no_think else None, allow_cpu=args.allow_cpu or None,
        wait=False if args.no_wait else None, template=args.prompt)
    try:
        # a queued item may see nothing while another runs up to its ceiling
        engine = make_engine(cfg, name=name, kind=kind, url=url,
                             stream_timeout=stream_timeout(settings.timeout_s, settings.concurrency))
    except EngineChoiceError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    spool, _store = make_spool_and_store(cfg)
    for text in recover(spool):
        emit(f"sparkctl: {text}", sys.stderr)
    progress = _Progress(sys.stderr.isatty() and not args.json)
    runner_box: list = []
    try:
        runner = EvalRunner(cfg, engine, make_probes(), settings, suite, sink=progress,
                            recorder=make_recorder(cfg), journal=getattr(spool, "journal", None))
    except ValueError as exc:  # --n larger than the suite
        raise CliError(f"--n: {exc}; use a smaller --n, or --n all", EXIT_BAD_INPUT) from None
    runner_box.append(runner)
    emit(suite.describe(), sys.stderr)  # which file the scores are on (stderr: --json stays one document)

    async def work():
        try:
            return await runner.run(models)
        finally:
            await engine.close()

    runs, stopped = run_tracked(work, progress, what="eval", lanes_bad=lambda: lanes_failed(runner_box),
                                stopped="the runs were recorded as KILLED with the items that finished")
    if stopped is not None:
        return stopped
    if args.json:
        emit(json.dumps([eval_to_dict(r) for r in runs], indent=2, ensure_ascii=False, default=str), sys.stdout)
    else:
        emit(render_evals(runs), sys.stdout)
        if settings.suite == "gsm8k":
            from sparkctl.core.suites.gsm8k import RULES_VERSION, template_sha256

            same = ("comparable with published lm-eval zero-shot numbers" if settings.template == "lm-eval" else
                    "strict scores are NOT comparable with published lm-eval numbers (--prompt lm-eval for those)")
            emit(f"  prompt template {settings.template} (sha256 {template_sha256(settings.template)[:12]}), "
                 f"scored by {RULES_VERSION}: {same}", sys.stdout)
    if lanes_failed(runner_box):
        return EXIT_REFUSED
    if not_saved(runs):
        return EXIT_NOT_SAVED
    return EXIT_ENGINE_ERROR if any(r.status == "FAILED" for r in runs) else EXIT_OK
