"""`sparkctl suites [list|pull|path DIR]`: where the quality suites are read from, and getting them."""

from __future__ import annotations

import sys

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, CliError


def register(sub) -> None:
    s = sub.add_parser("suites", help="the quality suites (GSM8K, IFEval): list, download (pull) or point at a copy (path DIR)",
                       description="sparkctl ships no suite data: `pull` downloads each suite from its public "
                                   "source into the data dir and checks its sha256; `path DIR` uses a copy you have.")
    s.add_argument("action", nargs="?", default="list", choices=("list", "pull", "path"),
                   help="list (default), pull, or path DIR")
    s.add_argument("dir", nargs="?", metavar="DIR", help="for path: a directory holding the suite files")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(handler=cmd_suites)


def cmd_suites(args, cfg) -> int:
    if args.action == "pull":
        return _pull(args, cfg)
    if args.action == "path":
        return _path(args, cfg)
    if args.dir is not None:
        raise CliError(f"unexpected argument {args.dir!r} (only `suites path DIR` takes a directory)", EXIT_BAD_INPUT)
    return _list(args, cfg)


def _list(args, cfg) -> int:
    import hashlib
    import json

    from sparkctl.services.evals import SUITES, suites_dir

    folder, how = suites_dir(cfg)
    rows = []
    for spec in SUITES.values():
        path = folder / spec.file
        state, sha = "missing", None
        if path.is_file():
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            state = "ok" if sha == spec.sha256 else "modified (sha256 differs from the published file)"
        rows.append({"suite": spec.name, "title": spec.title, "path": str(path), "state": state,
                     "sha256": sha, "published_sha256": spec.sha256, "source": spec.url, "licence": spec.licence})
    if args.json:
        print(json.dumps({"dir": str(folder), "chosen_by": how, "suites": rows}, indent=2))
        return EXIT_OK
    print(f"suites dir: {folder} (from {how})")
    for r in rows:
        print(f"  {r['suite']:<7} {r['state']:<10} {r['path']}  ({r['licence']}; {r['source']})")
    if any(r["state"] == "missing" for r in rows):
        print("  get them with `sparkctl suites pull` (needs the network) or `sparkctl suites path DIR`")
    return EXIT_OK


def _pull(args, cfg) -> int:
    import json

    from sparkctl.services.evals import SUITES, SuiteError, pull_suite, suites_dir

    dest, how = suites_dir(cfg)  # where eval reads them: the configured or chosen dir, else the data dir

    shown: dict[str, int] = {}
    tty = sys.stderr.isatty() and not args.json

    def progress(name: str, got: int, total: int | None) -> None:
        if not tty or got - shown.get(name, 0) < 256 * 1024 and got != total:
            return
        shown[name] = got
        of = f" of {total / 1e6:.1f} MB" if total else ""
        sys.stderr.write(f"\r\033[K{name}: {got / 1e6:.1f} MB{of}")
        sys.stderr.flush()

    done, failed = [], []
    for name in SUITES:
        try:
            p = pull_suite(name, dest=dest, progress=progress)
            done.append(p)
        except SuiteError as exc:
            failed.append((name, str(exc)))
        if tty:
            sys.stderr.write("\r\033[K")
    if args.json:
        print(json.dumps({"pulled": [{"suite": p.name, "path": str(p.path), "bytes": p.bytes, "sha256": p.sha256,
                                      "already": p.already} for p in done],
                          "failed": [{"suite": n, "error": e} for n, e in failed]}, indent=2))
    else:
        print(f"into {dest} (from {how})")
        for p in done:
            verb = "already there" if p.already else f"downloaded {p.bytes / 1e6:.1f} MB"
            print(f"{p.name}: {verb}, sha256 verified: {p.path}")
        for n, e in failed:
            print(f"sparkctl: {n}: {e}", file=sys.stderr)
    return EXIT_UNREACHABLE if failed else EXIT_OK


def _path(args, cfg) -> int:
    from pathlib import Path

    from sparkctl.services.evals import SuiteError, set_location

    if not args.dir:
        raise CliError("suites path needs a DIR", EXIT_BAD_INPUT)
    try:
        loc = set_location(Path(args.dir))
    except SuiteError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    if cfg.eval.suites_dir:
        print(f"note: [eval] suites_dir in {cfg.source} still wins over this", file=sys.stderr)
    print(f"suites are now read from {Path(args.dir).expanduser().resolve()} (remembered in {loc})")
    return _list(args, cfg) if not cfg.eval.suites_dir else EXIT_OK
