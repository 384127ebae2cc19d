"""`sparkctl runs`: past runs from MLflow as a table, JSON or CSV.

The query is ``sparkctl.services.runs.list_runs``; this module only reads arguments and
prints. Imports here stay light (argparse only) until the command runs: `--help` builds
every parser.
"""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import CliError, EXIT_BAD_INPUT, EXIT_ENGINE_ERROR, EXIT_OK, EXIT_UNREACHABLE

DEFAULT_N = 50


def register(sub) -> None:
    r = sub.add_parser("runs", help="past bench runs from MLflow (newest first), filtered; table, JSON or CSV")
    r.add_argument("--model", metavar="M", help="one model, by Ollama's name rules ('qwen3' = 'qwen3:latest')")
    r.add_argument("--engine-version", metavar="V", help="runs on this engine version only (exact)")
    r.add_argument("--kind", choices=("bench", "sweep-cell", "eval", "promotion", "import"),
                   help="plain benches, sweep cells, evals, lane changes (promotions and rollbacks) or imports "
                        "(community results, sparkctl import) only")
    r.add_argument("--host", metavar="H", help="runs of this host only (its hostname, as `runs` shows it)")
    r.add_argument("--by-host", action="store_true",
                   help="group by host: one table per host (JSON: an object of host -> runs)")
    r.add_argument("--since", metavar="DATE", help="runs started at or after DATE: YYYY-MM-DD (local midnight) or ISO 8601")
    r.add_argument("-n", "--limit", type=int, default=DEFAULT_N, metavar="N",
                   help=f"at most N runs (default {DEFAULT_N})")
    fmt = r.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a JSON list of runs (keys in docs/runs.md)")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row (same keys as --json)")
    r.set_defaults(handler=cmd_runs)


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _date(ms: int | None) -> str:
    from datetime import datetime

    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")  # local time, like `ls -l`


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# (header, right-aligned, cell from a RunRow)
_COLUMNS = (
    ("DATE", False, lambda r: _date(r.start_ms)),
    ("MODEL", False, lambda r: _clip(r.model or "-", 36)),
    ("ENGINE", False, lambda r: f"{r.engine_kind or '?'} {r.engine_version or '?'}"),
    ("HOST", False, lambda r: _clip(r.host or "-", 20)),
    ("DECODE tok/s", True, lambda r: _num(r.decode_tps_median, ".1f")),
    ("CV%", True, lambda r: _num(r.decode_tps_cv_pct, ".1f")),
    ("TTFT s", True, lambda r: _num(r.ttft_s_median, ".2f")),
    ("PREFILL tok/s", True, lambda r: _num(r.prefill_tps_median, ".0f")),
    ("SCORE%", False, lambda r: "-" if r.score is None else f"{r.suite} {r.score * 100:.1f}"),
    ("J/tok", True, lambda r: _num(r.joules_per_token, ".2f")),
    ("ROOF%", True, lambda r: _num(r.roofline_pct, ".0f")),
    ("FLAGS", False, lambda r: ",".join(((r.what,) if r.kind != "bench" else ()) + r.flags) or "-"),
    ("STATUS", False, lambda r: r.status or "-"),
    ("RUN", False, lambda r: r.run_id[:8]),
)


def render_table(rows) -> str:
    cells = [[f(r) for _, _, f in _COLUMNS] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, _, _) in enumerate(_COLUMNS)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if right else v.ljust(w) for v, w, (_, right, _) in zip(values, widths, _COLUMNS)]
        return "  ".join(parts).rstrip()

    return "\n".join([line([h for h, _, _ in _COLUMNS])] + [line(c) for c in cells])


def render_csv(rows) -> str:
    import csv
    import io
    import json

    from sparkctl.services.runs import ROW_KEYS

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_KEYS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        d = row.to_dict()
        d["flags"] = ";".join(d["flags"])
        d["identity"] = json.dumps(d["identity"], sort_keys=True)  # one cell: the workload as JSON
        writer.writerow({k: "" if v is None else str(v).lower() if isinstance(v, bool) else v
                         for k, v in d.items()})
    return buf.getvalue()


def by_host(rows) -> dict:
    """Rows grouped by host, hosts in name order, each group in the order the rows came."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(r.host, []).append(r)
    return {host: groups[host] for host in sorted(groups)}


def cmd_runs(args, cfg) -> int:
    import json

    from sparkctl.cli.history_store import history_store
    from sparkctl.core.redact import redact_text
    from sparkctl.services.runs import list_runs, parse_since
    from sparkctl.tracking.store import TrackingError

    if args.limit < 1:
        raise CliError(f"-n must be >= 1, got {args.limit}", EXIT_BAD_INPUT)
    if args.model is not None and not args.model.strip():
        raise CliError("--model must not be empty", EXIT_BAD_INPUT)
    if args.host is not None and not args.host.strip():
        raise CliError("--host must not be empty", EXIT_BAD_INPUT)
    since_ms = None
    if args.since is not None:
        try:
            since_ms = parse_since(args.since)
        except ValueError as exc:
            raise CliError(f"--since: {exc}", EXIT_BAD_INPUT) from None
    store = history_store(cfg)
    try:
        rows = list_runs(store, model=args.model, engine_version=args.engine_version, kind=args.kind,
                         since_ms=since_ms, limit=args.limit, host=args.host)
    except TrackingError as exc:
        # TrackingError redacts its own message; redacting again costs nothing and keeps
        # this line safe whatever raised it
        code = EXIT_UNREACHABLE if exc.unreachable else EXIT_ENGINE_ERROR
        raise CliError(redact_text(str(exc)), code) from None
    groups = by_host(rows) if args.by_host else None
    if args.json:
        print(json.dumps([r.to_dict() for r in rows] if groups is None else
                         {host: [r.to_dict() for r in group] for host, group in groups.items()}, indent=2))
    elif groups is not None and not args.csv and rows:
        print("\n\n".join(f"{host or '(no host)'} · {len(group)} run(s)\n{render_table(group)}"
                           for host, group in groups.items()))
    elif args.csv:
        sys.stdout.write(render_csv(rows))
    elif not rows:
        print("no runs")
    else:
        print(render_table(rows))
    return EXIT_OK
