"""`sparkctl suites [list|pull|path DIR]`: which copy of each quality suite evals read, checking
the source for a newer file, and pointing at a copy of your own."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, CliError
from sparkctl.cli.terminal import REDRAW, write_control


def register(sub) -> None:
    s = sub.add_parser("suites", help="the quality suites (GSM8K, IFEval): list, check for a newer file (pull) "
                                      "or point at a copy (path DIR)",
                       description="sparkctl ships GSM8K and IFEval as published: evals need no download. "
                                   "`pull` checks the source (or $SPARKCTL_SUITES_MIRROR: a directory, file:// "
                                   "or https:// URL) for a file other than the shipped one; `path DIR` reads a "
                                   "copy you have, `path --reset` goes back to the pulled or shipped copy.")
    s.add_argument("action", nargs="?", default="list", choices=("list", "pull", "path"),
                   help="list (default), pull, or path DIR")
    s.add_argument("dir", nargs="?", metavar="DIR", help="for path: a directory holding the suite files")
    s.add_argument("--accept-new", action="store_true",
                   help="for pull: keep a file whose sha256 is not the shipped one's (a newer publication)")
    s.add_argument("--reset", action="store_true", help="for path: forget the directory `path DIR` remembered")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(handler=cmd_suites)


def cmd_suites(args, cfg) -> int:
    if args.accept_new and args.action != "pull":
        raise CliError("--accept-new goes with `suites pull`", EXIT_BAD_INPUT)
    if args.reset and args.action != "path":
        raise CliError("--reset goes with `suites path`", EXIT_BAD_INPUT)
    if args.action == "pull":
        return _pull(args, cfg)
    if args.action == "path":
        return _path(args, cfg)
    if args.dir is not None:
        raise CliError(f"unexpected argument {args.dir!r} (only `suites path DIR` takes a directory)", EXIT_BAD_INPUT)
    return _list(args, cfg)


def _list(args, cfg) -> int:
    import json

    from sparkctl.services.evals import SUITES, copy_state, pull_dir

    dest, how = pull_dir(cfg)
    rows = []
    for spec in SUITES.values():
        st = copy_state(cfg, spec.name)
        rows.append({"suite": spec.name, "title": spec.title, "copy": st.copy.kind, "path": str(st.copy.path),
                     "chosen_by": st.copy.how, "state": st.state, "sha256": st.sha256,
                     "published_sha256": spec.sha256, "source": spec.url, "licence": spec.licence})
    if args.json:
        print(json.dumps({"pull_into": str(dest), "pull_into_chosen_by": how, "suites": rows}, indent=2))
        return EXIT_OK
    states = {"ok": "ok", "differs": "differs from the published file", "missing": "MISSING",
              "unreadable": "UNREADABLE"}
    for r in rows:
        sha = f"sha256 {r['sha256'][:12]}…" if r["sha256"] else ""
        print(f"{r['suite']:<7} {r['copy']:<8} {states[r['state']]:<8} {sha}  {r['path']}")
        print(f"        {r['title']}, {r['licence']}; from {r['chosen_by']}")
    if any(r["sha256"] is None for r in rows):
        print("a chosen copy is missing: put the file there, or `sparkctl suites path --reset` "
              "(or remove [eval] suites_dir) to read the shipped one")
    return EXIT_OK


def _pull(args, cfg) -> int:
    import json

    from sparkctl.services.evals import pull_all

    shown: dict[str, int] = {}
    tty = sys.stderr.isatty() and not args.json

    def progress(name: str, got: int, total: int | None) -> None:
        if not tty or got - shown.get(name, 0) < 256 * 1024 and got != total:
            return
        shown[name] = got
        of = f" of {total / 1e6:.1f} MB" if total else ""
        write_control(sys.stderr, REDRAW)
        sys.stderr.write(f"{name}: {got / 1e6:.1f} MB{of}")
        sys.stderr.flush()

    dest, how, reports = pull_all(cfg, accept_new=args.accept_new, progress=progress)
    if tty:
        write_control(sys.stderr, REDRAW)
    done = [r.pulled for r in reports if r.pulled is not None]
    failed = [(r.name, r.error) for r in reports if r.pulled is None]
    if args.json:
        print(json.dumps({"into": str(dest), "pulled": [
            {"suite": p.name, "path": str(p.path), "bytes": p.bytes, "sha256": p.sha256, "outcome": p.outcome,
             "already": p.already} for p in done],
            "failed": [{"suite": n, "error": e} for n, e in failed]}, indent=2))
    else:
        print(f"checked against {_source_name()}; a new file goes into {dest} (from {how})")
        for p in done:
            print(f"{p.name}: {p.describe()}")
        for n, e in failed:
            print(f"sparkctl: {n}: {e}", file=sys.stderr)
    return EXIT_UNREACHABLE if failed else EXIT_OK


def _source_name() -> str:
    import os

    from sparkctl.core.redact import redact_uri
    from sparkctl.services.evals import MIRROR_ENV

    mirror = os.environ.get(MIRROR_ENV, "").strip()
    return f"the mirror {redact_uri(mirror)} (${MIRROR_ENV})" if mirror else "the published sources"


def _path(args, cfg) -> int:
    from pathlib import Path

    from sparkctl.services.evals import SuiteError, clear_location, set_location

    if args.reset:
        if args.dir:
            raise CliError("suites path takes a DIR or --reset, not both", EXIT_BAD_INPUT)
        try:
            forgot = clear_location()
        except SuiteError as exc:
            raise CliError(str(exc), EXIT_BAD_INPUT) from None
        print("forgot the suites directory" if forgot else "no suites directory was remembered")
    else:
        if not args.dir:
            raise CliError("suites path needs a DIR (or --reset)", EXIT_BAD_INPUT)
        try:
            loc = set_location(Path(args.dir))
        except SuiteError as exc:
            raise CliError(str(exc), EXIT_BAD_INPUT) from None
        print(f"suites are now read from {Path(args.dir).expanduser().resolve()} (remembered in {loc})")
    if cfg.eval.suites_dir:
        print(f"note: [eval] suites_dir in {cfg.source} still wins over this", file=sys.stderr)
        return EXIT_OK
    return _list(args, cfg)
