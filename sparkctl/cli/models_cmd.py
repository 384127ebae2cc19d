"""CLI commands for models: models, pull, fit, load, unload, rm.

Exit codes (cli.py): 0 done; 2 bad input (checked before any request); 3 engine
unreachable; 4 refused by a guard, or a load that happened but failed its verification
(CPU spill, lane model evicted, NVML disagreeing); 5 engine error. `fit` exits 4 when a
load would be refused. Imports stay inside the handlers: `sparkctl --version` must not pay
for them.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from sparkctl.cli.argtypes import duration, positive_int
from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE
from sparkctl.cli.terminal import write_control






def register(sub) -> None:
    """Add the model subcommands to the CLI; each parser sets `handler=fn(args, cfg) -> int`."""
    p = sub.add_parser("models", help="local models: size, family, parameters, quantization, context, lane, loaded")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(handler=cmd_models)

    p = sub.add_parser("pull", help="download a model with live progress (Ctrl-C cancels; pull again to resume)")
    p.add_argument("name", help="model name, e.g. qwen3:8b")
    p.add_argument("--ctx", type=positive_int, metavar="N", help="judge the fit at this num_ctx (default: config, else the engine's)")
    p.add_argument("--force", action="store_true", help="pull even a model that cannot fit in memory here")
    p.add_argument("--json", action="store_true", help="one JSON object at the end (no progress)")
    p.set_defaults(handler=cmd_pull)

    p = sub.add_parser("fit", help="estimate a model's resident size and judge it against the memory budget "
                                   "(a model not stored yet: from its registry manifest and GGUF header)")
    p.add_argument("name")
    p.add_argument("--ctx", type=positive_int, metavar="N", help="plan for this num_ctx (default: config, else the engine's)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(handler=cmd_fit)

    p = sub.add_parser("load", help="load a model beside what is resident, then verify placement and lanes")
    p.add_argument("name")
    p.add_argument("--keep-alive", type=duration, metavar="D", help='how long it stays loaded ("30m", "-1" forever); default [models] keep_alive')
    p.add_argument("--ctx", type=positive_int, metavar="N", help="num_ctx to load with (a runner option: changing it reloads)")
    p.add_argument("--force", action="store_true", help="load even if it would evict a lane model or plan below the reserve")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(handler=cmd_load)

    p = sub.add_parser("unload", help="unload a model and wait until the engine no longer lists it")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(handler=cmd_unload)

    p = sub.add_parser("rm", help="delete a stored model (asks first; a lane model needs --force)")
    p.add_argument("name")
    p.add_argument("--force", action="store_true", help="delete even a model that serves a lane")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(handler=cmd_rm)


# ---------------------------------------------------------------------------- plumbing


def _name(raw: str) -> str:
    from sparkctl.core.names import InvalidModelName, validate_model_name

    try:
        return validate_model_name(raw)
    except InvalidModelName as exc:
        # Checked before any request, so no local list to compare with; but "qwen3:8 b"
        # (a stray space) has an obvious reading.
        squeezed = "".join(raw.split())
        hint = ""
        if squeezed != raw.strip() and squeezed:
            try:
                hint = f"; did you mean {validate_model_name(squeezed)}?"
            except InvalidModelName:
                pass
        raise CliError(f"{exc}{hint}", EXIT_BAD_INPUT) from None


def _typed(raw: str, name: str) -> str:
    """The name for a registry read: as typed when it starts with a scheme (http:// picks
    plain HTTP for its host, as Ollama's pull does), else the validated `name`."""
    raw = raw.strip()
    return raw if raw.lower().startswith(("http://", "https://")) else name


def _run(cfg, fn) -> Any:
    """Run `fn(engine)` (a coroutine function) against a fresh engine, closing it after.
    The services name close local models in a "not found" ("did you mean qwen3:8b?")."""
    import asyncio

    from sparkctl.services.factory import make_engine

    async def go():
        engine = make_engine(cfg)
        try:
            return await fn(engine)
        finally:
            await engine.close()

    return asyncio.run(go())


def _json(obj: Any) -> None:
    import json

    print(json.dumps(obj, indent=2, default=str))


def _err(line: str) -> None:
    print(f"sparkctl: {line}", file=sys.stderr)


# ---------------------------------------------------------------------------- models


def render_models(listing, now) -> str:
    from sparkctl.core.fmt import size as gib  # a 1 MB model is "976.6 KiB", not "0.0 GiB"
    from sparkctl.services.models import modified_label

    head = ("NAME", "SIZE", "FAMILY", "PARAMS", "QUANT", "CONTEXT", "CAPABILITIES", "MODIFIED", "LANE", "LOADED")
    rows = []
    for r in listing.rows:
        loaded = "-"
        if r.resident is not None:
            loaded = f"{r.placement.label}, {gib(r.resident.size)}"
        rows.append((
            r.name, gib(r.size), r.family or "-", r.parameter_size or "-", r.quantization or "-",
            str(r.context_length) if r.context_length else "n/a",
            ",".join(r.notable_capabilities) or "-",
            modified_label(r.modified_at, now), r.lane or "-", loaded,
        ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    right = {1, 5}
    lines = []
    for row in (head, *rows):
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    if not listing.rows:
        lines.append("(no models stored: sparkctl pull NAME)")
    for r in listing.rows:
        if r.show_error:
            lines.append(f"note: {r.name}: /api/show failed ({r.show_error}); some columns are n/a")
    for lane, model in listing.missing_lanes:
        lines.append(f"note: lane {lane} names {model}, which is not stored (sparkctl pull {model})")
    return "\n".join(lines)


def cmd_models(args, cfg) -> int:
    from datetime import datetime, timezone

    from sparkctl.services.models import list_models

    listing = _run(cfg, lambda engine: list_models(cfg, engine))
    if args.json:
        _json(listing.to_dict())
    else:
        print(render_models(listing, datetime.now(timezone.utc)))
    return EXIT_OK


# ---------------------------------------------------------------------------- pull


def progress_line(view) -> str:
    """One line for a terminal: overall %, bytes, speed, ETA and the current step."""
    from sparkctl.services.models import eta_label, rate_label, size_label

    if view.percent is None:
        pct = "  ?  "
        size = f"{size_label(view.completed)} of unknown size"
    else:
        pct = f"{view.percent:5.1f}%"
        size = f"{size_label(view.completed)}/{size_label(view.total)}"
    step = view.status
    if view.layers and step.startswith("pulling ") and step != "pulling manifest":
        step = f"pulling {view.layers[-1].short}"
    return f"{view.model}  {pct}  {size}  {rate_label(view.speed_bps)}  {eta_label(view.eta_s)}  {step}"


def layer_line(layer) -> str:
    from sparkctl.services.models import size_label as gib

    size = gib(layer.total) if layer.total is not None else "size unknown"
    what = {
        "present": "already present",
        "resumed": f"resumed from {gib(layer.start_completed)}",
        "done": "done",
        "downloading": "downloading",
    }[layer.state]
    if layer.state == "done" and layer.start_completed:
        what = f"done (resumed from {gib(layer.start_completed)})"
    return f"  {layer.short}  {size:>10}  {what}"


class PullPrinter:
    """Progress on a terminal: status lines and finished layers scroll, one line redraws.

    When the output is not a terminal it prints nothing until the end (quiet when piped).
    """

    def __init__(self, out: TextIO, tty: bool, min_interval_s: float = 0.1) -> None:
        self.out = out
        self.tty = tty
        self.min_interval_s = min_interval_s
        self._logged = 0
        self._finished: set[str] = set()
        self._last_draw = -1e9
        self._drawn = False

    def _clear(self) -> None:
        if self._drawn:
            write_control(self.out, "\r\x1b[2K")
            self._drawn = False

    def update(self, view, now: float) -> None:
        if not self.tty:
            return
        scrolled = False
        for line in view.log[self._logged:]:
            if line == "success":
                continue
            self._clear()
            self.out.write(f"{line}\n")
            scrolled = True
        self._logged = len(view.log)
        for layer in view.layers:
            if layer.state in ("present", "done") and layer.digest not in self._finished:
                self._finished.add(layer.digest)
                self._clear()
                self.out.write(layer_line(layer) + "\n")
                scrolled = True
        if view.done:
            self._clear()
            self.out.flush()
            return
        if scrolled or now - self._last_draw >= self.min_interval_s:
            self._clear()
            self.out.write(progress_line(view))
            self._drawn = True
            self._last_draw = now
        self.out.flush()


def pull_summary(view) -> str:
    from sparkctl.services.models import size_label as gib

    size = gib(view.total) if view.total is not None else "unknown size"
    fetched = sum(max(0, layer.completed - layer.start_completed) for layer in view.layers)
    kept = view.completed - fetched
    extra = f", {gib(kept)} already on disk" if kept > 0 else ""
    return f"pulled {view.model} ({size}{extra}) in {view.elapsed_s:.1f} s with Ollama {view.engine_version}"


def _print_fit_before_pull(report, *, forced: bool, tty: bool) -> None:
    """The verdict a pull went ahead with, on a terminal (a piped pull stays quiet; --json
    carries it). Forcing past "cannot fit" is said wherever the output goes."""
    if report.cannot_fit and forced:
        _err(f"forced past: {report.summary()}")
    elif not tty:
        return
    elif not report.known:
        _err(f"note: {report.summary()}")
    else:
        print(f"fit: {report.summary()}")


def cmd_pull(args, cfg) -> int:
    import asyncio
    import time

    from sparkctl.services.models import pull_model

    name = _name(args.name)
    tty = sys.stdout.isatty() and not args.json
    printer = PullPrinter(sys.stdout, tty)
    last: list[Any] = []
    fit: list[Any] = []
    probes = _probes()

    hint: list[str] = []

    async def go(engine):
        from sparkctl.services.models import remote_fit_check

        report = await remote_fit_check(cfg, engine, probes, _typed(args.name, name), args.ctx)
        fit[:] = [report]
        if report.cannot_fit and not args.force:
            return
        if not args.json:
            _print_fit_before_pull(report, forced=args.force, tty=tty)
        async for view in pull_model(engine, name):
            last[:] = [view]
            printer.update(view, time.monotonic())
        if last and last[0].error_kind == "not_found":  # a mistyped name: close local ones?
            from sparkctl.engines.base import EngineError
            from sparkctl.services.models import did_you_mean

            try:
                hint.append(did_you_mean(name, [m.name for m in await engine.tags()]))
            except EngineError:
                pass

    try:
        _run(cfg, go)
    except (KeyboardInterrupt, asyncio.CancelledError):
        if tty:
            sys.stdout.write("\n")
        _err(f"pull of {name} cancelled; the engine keeps what it downloaded: run `sparkctl pull {name}` to resume")
        return EXIT_INTERRUPTED
    report = fit[0]
    if report.cannot_fit and not args.force:
        if args.json:
            _json({"model": name, "pulled": False, "refused": report.summary(), "fit": report.to_dict()})
        else:
            print("\n".join(report.lines()))
        _err(f"refused: pull of {name}: {report.summary()} (--ctx N plans for a smaller context; --force pulls anyway)")
        return EXIT_REFUSED
    view = last[0]
    if args.json:
        _json({**view.to_dict(), "fit": report.to_dict()})
    if view.outcome == "success":
        if not args.json:
            print(pull_summary(view))
        return EXIT_OK
    _err(f"pull failed: {view.error}{''.join(hint)}")
    if view.error_kind == "unreachable":
        return EXIT_UNREACHABLE
    if view.error_kind == "disk":
        return EXIT_REFUSED
    return EXIT_ENGINE_ERROR


# ---------------------------------------------------------------------------- fit / load


def _probes():
    from sparkctl.services.factory import make_probes

    return make_probes()


# A remote fit that stayed unknown exits by why: the registry not answering is like the
# engine not answering; a name it does not know (or will not show) is its error; a model
# whose header cannot be read is a fit that cannot be checked, refused like any such load.
REMOTE_UNKNOWN_EXIT = {"unreachable": EXIT_UNREACHABLE, "not_found": EXIT_ENGINE_ERROR,
                       "unauthorized": EXIT_ENGINE_ERROR, "bad_reply": EXIT_ENGINE_ERROR}


def cmd_fit(args, cfg) -> int:
    from sparkctl.services.models import RemoteFitReport, fit_anywhere

    name = _name(args.name)
    probes = _probes()
    hint: list[str] = []

    async def go(engine):
        report = await fit_anywhere(cfg, engine, probes, _typed(args.name, name), args.ctx)
        if isinstance(report, RemoteFitReport) and not report.known:  # a mistyped local name?
            from sparkctl.services.models import did_you_mean

            hint.append(did_you_mean(name, [m.name for m in await engine.tags()]))
        return report

    report = _run(cfg, go)
    if isinstance(report, RemoteFitReport) and not report.known:
        if args.json:
            _json(report.to_dict())
        else:
            print("\n".join(report.lines()))
        _err(f"{name}: {report.summary()}{''.join(hint)}")
        return REMOTE_UNKNOWN_EXIT.get(report.remote.problem_kind or "", EXIT_REFUSED)
    if args.json:
        _json(report.to_dict())
    else:
        print("\n".join(report.lines()))
        if report.refused_by_default:
            from sparkctl.services.models import override_blocker

            blocker = override_blocker(report.fit if isinstance(report, RemoteFitReport) else report)
            if blocker:
                print(f"  load       would be refused, and --force cannot help: {blocker}")
            else:
                print("  load       would be refused (sparkctl load --force overrides)")
    return EXIT_REFUSED if report.refused_by_default else EXIT_OK


def cmd_load(args, cfg) -> int:
    from sparkctl.services.models import LoadFailed, ModelsRefused, parse_keep_alive, side_load

    name = _name(args.name)
    if args.keep_alive is not None:
        try:
            parse_keep_alive(args.keep_alive)
        except ValueError as exc:

            raise CliError(str(exc), EXIT_BAD_INPUT) from None
    probes = _probes()

    async def go(engine):
        return await side_load(cfg, engine, probes, name, keep_alive=args.keep_alive,
                               num_ctx=args.ctx, force=args.force)

    try:
        report = _run(cfg, go)
    except ModelsRefused as exc:
        if args.json:
            _json({"model": name, "loaded": False, "ok": False, "refused": exc.reason,
                   "fit": exc.fit.to_dict() if exc.fit else None, "verification": None})
        else:
            if exc.fit is not None:
                print("\n".join(exc.fit.lines()))
        from sparkctl.services.models import override_blocker

        blocker = override_blocker(exc.fit) if exc.fit is not None else None
        _err(f"refused: {exc.reason} ({blocker})" if blocker else f"refused: {exc.reason} (--force to load anyway)")
        return EXIT_REFUSED
    except LoadFailed as exc:
        if args.json:
            _json({"model": name, "loaded": False, "ok": False, "refused": None, "error": exc.message,
                   "status": exc.status, "lost_lanes": list(exc.lost_lanes)})
        _err(f"engine error: {exc.message}")
        for lost in exc.lost_lanes:
            _err(f"EVICTED: {lost} (lane {cfg.lane_of(lost)}) is no longer resident after the failed load")
        return EXIT_ENGINE_ERROR
    if args.json:
        _json(report.to_dict())
    else:
        print(report.fit.lines()[0])
        print("\n".join(report.lines()))
    if not report.ok:
        _err(f"{name} loaded but failed verification: " + "; ".join(report.verification.problems))
        return EXIT_REFUSED
    return EXIT_OK


# ---------------------------------------------------------------------------- unload / rm


def cmd_unload(args, cfg) -> int:
    from sparkctl.services.models import unload_model

    name = _name(args.name)
    report = _run(cfg, lambda engine: unload_model(engine, name, cfg=cfg))
    if args.json:
        _json(report.to_dict())
    else:
        print(report.line())
    return EXIT_OK


def _confirm(question: str) -> bool:
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_rm(args, cfg) -> int:
    from sparkctl.core.fmt import gib
    from sparkctl.services.models import ModelsRefused, delete_model, delete_target

    name = _name(args.name)
    lane = cfg.lane_of(name)
    if lane and not args.force:
        # Refused before any request: the config alone says it serves a lane.
        _err(f"refused: {name} serves lane {lane}; deleting it leaves the lane without its model (--force to delete anyway)")
        if args.json:
            _json({"model": name, "deleted": False, "refused": f"{name} serves lane {lane}"})
        return EXIT_REFUSED
    if not args.yes:
        if not sys.stdin.isatty():
            _err(f"refused: deleting {name} needs confirmation; pass --yes when not on a terminal")
            return EXIT_REFUSED
        target = _run(cfg, lambda engine: delete_target(cfg, engine, name))
        what = f"{target.name} ({gib(target.size)}" + (f", lane {lane})" if lane else ")")
        if not _confirm(f"Delete {what} from the engine's store?"):
            _err("not deleted")
            return EXIT_REFUSED
    try:
        report = _run(cfg, lambda engine: delete_model(cfg, engine, name, force=args.force))
    except ModelsRefused as exc:
        _err(f"refused: {exc.reason} (--force to delete anyway)")
        return EXIT_REFUSED
    if args.json:
        _json(report.to_dict())
    else:
        print(report.line())
    return EXIT_OK
