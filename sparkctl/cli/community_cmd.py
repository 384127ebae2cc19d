"""`sparkctl import llama-benchy FILE` and `sparkctl export arena RUN...`: the Spark
community's formats in and out (services/imports). This module reads arguments and prints."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_OK, EXIT_UNREACHABLE


def register(sub) -> None:
    i = sub.add_parser("import", help="record a community result (llama-benchy JSON/CSV, or its --emit-progress "
                                      "stream, live with --follow) as runs of kind import")
    i.add_argument("source", choices=("llama-benchy",), help="the tool that wrote FILE")
    i.add_argument("file", metavar="FILE", help="llama-benchy's --format json or --format csv output, or the "
                                                "JSONL file of its --emit-progress")
    i.add_argument("--follow", action="store_true",
                   help="FILE is an --emit-progress stream still being written: show it live, record it when "
                        "llama-benchy says bench_complete")
    i.add_argument("--idle-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="with --follow: stop when the file has not grown for this long (default %(default)g)")
    i.add_argument("--model", metavar="NAME",
                   help="the model as sparkctl names it (e.g. gpt-oss:20b), so compare finds it beside your runs; "
                        "default: the name in the file")
    i.add_argument("--engine-kind", metavar="KIND", help="the engine llama-benchy measured (the file does not say)")
    i.add_argument("--engine-version", metavar="V", help="its version or build, if known")
    i.add_argument("--json", action="store_true", help="the recorded runs as JSON")
    i.set_defaults(handler=cmd_import)

    e = sub.add_parser("export", help="write a Spark Arena submission bundle (recipe.yaml, benchmark.csv, "
                                      "metadata.json; credentials stripped) from bench runs or a sweep")
    e.add_argument("target", choices=("arena",), help="the format")
    e.add_argument("runs", nargs="+", metavar="RUN",
                   help="run ids (or the 8-character prefixes `sparkctl runs` shows); a sweep's own run stands for "
                        "its cells, in the order they ran")
    e.add_argument("--out", metavar="DIR", default="arena-submission", help="folder for the bundle (default: %(default)s)")
    e.set_defaults(handler=cmd_export)


def _tracking_error(exc) -> CliError:
    from sparkctl.core.redact import redact_text

    return CliError(redact_text(str(exc)), EXIT_UNREACHABLE if exc.unreachable else EXIT_ENGINE_ERROR)


def cmd_import(args, cfg) -> int:
    import json
    import time
    from pathlib import Path

    from sparkctl.services.factory import make_recorder
    from sparkctl.services.imports.llama_benchy import ImportFailed, read, records
    from sparkctl.tracking.store import TrackingError

    if args.model is not None and not args.model.strip():
        raise CliError("--model must not be empty", EXIT_BAD_INPUT)
    if not (args.idle_timeout > 0):
        raise CliError(f"--idle-timeout must be > 0 seconds, got {args.idle_timeout:g}", EXIT_BAD_INPUT)
    from sparkctl.services.imports.llama_benchy import is_progress_stream

    try:
        stream = args.follow or is_progress_stream(args.file)
    except ImportFailed as exc:
        raise CliError(f"import llama-benchy: {exc}", EXIT_BAD_INPUT) from None
    if stream:
        return _import_progress(args, cfg)
    try:
        report, sha = read(args.file)
    except ImportFailed as exc:
        raise CliError(f"import llama-benchy: {exc}", EXIT_BAD_INPUT) from None
    recs = records(report, sha, Path(args.file).name, experiment=cfg.tracking.experiment,
                   now_ms=int(time.time() * 1000), model=args.model.strip() if args.model else None,
                   engine_kind=args.engine_kind, engine_version=args.engine_version)
    recorder = make_recorder(cfg)
    results = []
    try:
        for rec in recs:
            results.append((rec, recorder(rec)))
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    if args.json:
        print(json.dumps([{"run_name": r.run_name, "cell": r.tags["import.cell"], "run_id": res.run_id if res else None,
                           "summary": r.summary_metrics, "tracking": res.message if res else ""}
                          for r, res in results], indent=2))
    else:
        for rec, res in results:
            dec = rec.summary_metrics.get("decode_tps_median")
            pre = rec.summary_metrics.get("prefill_tps_median")
            line = (f"{rec.run_name}: decode {'-' if dec is None else f'{dec:.1f}'} tok/s, prefill "
                    f"{'-' if pre is None else f'{pre:.0f}'} tok/s")
            print(line + (f"  [{res.run_id[:8]}]" if res and res.run_id else f"  ({res.message})" if res else ""))
        print(f"{len(results)} run(s) of kind import from {args.file} ({report.fmt}); they never enter "
              "compare, regressions or promotion as measurements (see `compare --community`)")
    return EXIT_OK


def _import_progress(args, cfg) -> int:
    """A llama-benchy --emit-progress stream: read whole, or followed live (--follow), then
    recorded one run per cell, every request a step."""
    import json
    import time
    from pathlib import Path

    from sparkctl.services.factory import make_recorder
    from sparkctl.services.imports.llama_benchy import ImportFailed, progress_records, read_progress
    from sparkctl.tracking.store import TrackingError

    if args.follow:
        import threading

        from sparkctl.cli.bench_cmd import _Progress
        from sparkctl.services.imports.benchy_live import FollowFailed, follow

        from sparkctl.core.benchy_progress import ProgressState

        progress_line = _Progress(sys.stderr.isatty() and not args.json)
        state = ProgressState()
        try:
            follow(args.file, progress_line, stop=threading.Event(), idle_s=args.idle_timeout, state=state)
        except FollowFailed as exc:
            raise CliError(f"import llama-benchy --follow: {exc}", EXIT_BAD_INPUT) from None
        except KeyboardInterrupt:
            # stopped watching: what finished so far is recorded (KILLED: no bench_complete)
            progress_line.line("stopped following: recording what finished so far", end="\n", always=True)
        progress_line.done()
    else:
        try:
            state = read_progress(args.file)
        except ImportFailed as exc:
            raise CliError(f"import llama-benchy: {exc}", EXIT_BAD_INPUT) from None
    recs = progress_records(state, Path(args.file).name, experiment=cfg.tracking.experiment,
                            now_ms=int(time.time() * 1000), model=args.model.strip() if args.model else None,
                            engine_kind=args.engine_kind, engine_version=args.engine_version)
    if not recs:
        raise CliError(f"import llama-benchy: {args.file}: no finished request in the stream", EXIT_BAD_INPUT)
    recorder = make_recorder(cfg)
    results = []
    try:
        for rec in recs:
            results.append((rec, recorder(rec)))
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    ended = {"ok": "complete", "interrupted": "interrupted", "error": "ended with an error"}.get(
        state.status or "", "not complete (no bench_complete yet)")
    if args.json:
        print(json.dumps([{"run_name": r.run_name, "cell": r.tags["import.cell"], "status": r.status,
                           "run_id": res.run_id if res else None, "summary": r.summary_metrics,
                           "tracking": res.message if res else ""} for r, res in results], indent=2))
    else:
        for rec, res in results:
            dec, ttft = rec.summary_metrics.get("decode_tps_median"), rec.summary_metrics.get("ttft_s_median")
            print(f"{rec.run_name}: {int(rec.summary_metrics.get('requests', 0))} request(s), decode "
                  f"{'-' if dec is None else f'{dec:.1f}'} tok/s, TTFT {'-' if ttft is None else f'{ttft:.3f}'} s"
                  + (f"  [{res.run_id[:8]}]" if res and res.run_id else f"  ({res.message})" if res else ""))
        print(f"{len(results)} run(s) of kind import from llama-benchy's event stream {args.file} ({ended}); "
              f"each request is a step of its run")
    return EXIT_OK


def cmd_export(args, cfg) -> int:
    from sparkctl.services.factory import make_spool_and_store
    from sparkctl.services.imports.arena_export import ExportFailed, write_bundle
    from sparkctl.tracking.store import TrackingError

    _spool, store = make_spool_and_store(cfg)
    try:
        paths = write_bundle(store, args.runs, args.out)
    except ExportFailed as exc:
        raise CliError(f"export arena: {exc}", EXIT_BAD_INPUT) from None
    except TrackingError as exc:
        raise _tracking_error(exc) from None
    for p in paths:
        print(p)
    sys.stdout.flush()
    return EXIT_OK
