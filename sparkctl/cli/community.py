"""`sparkctl import llama-benchy FILE` and `sparkctl export arena RUN...`: the Spark
community's formats in and out (services/imports). This module reads arguments and prints."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_OK, EXIT_UNREACHABLE


def register(sub) -> None:
    i = sub.add_parser("import", help="record a community result (llama-benchy JSON/CSV) as runs of kind import")
    i.add_argument("source", choices=("llama-benchy",), help="the tool that wrote FILE")
    i.add_argument("file", metavar="FILE", help="llama-benchy's --format json or --format csv output")
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


def cmd_export(args, cfg) -> int:
    from sparkctl.services.factory import make_spool_and_store
    from sparkctl.services.imports.arena import ExportFailed, write_bundle
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
