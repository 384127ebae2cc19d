"""`sparkctl status`: engine, resident models, memory budget and GPU, as text or JSON."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_ENGINE_ERROR, EXIT_OK, EXIT_UNREACHABLE


def register(sub) -> None:
    s = sub.add_parser("status", help="engine, resident models, memory budget and GPU, as text or JSON")
    s.add_argument("--json", action="store_true", help="one JSON object (keys in docs/dashboard.md)")
    # status only reads (views never repair); the flag stays for fleets whose sparkctl versions
    # differ: the fleet asks every host with it, and older hosts need it to only read
    s.add_argument("--no-repair", action="store_true",
                   help="the default now (status only reads: what a dead bench changed is listed under the "
                        "warnings, put back by `sparkctl lanes --restore`); kept for fleets of mixed versions")
    s.set_defaults(handler=cmd_status)


def cmd_status(args, cfg) -> int:
    import asyncio
    import json

    from sparkctl.services.factory import make_engine, make_probes
    from sparkctl.services.status import collect_status, report_to_dict

    async def go():
        engine = make_engine(cfg)
        try:
            return await collect_status(cfg, engine, make_probes())
        finally:
            await engine.close()

    report = asyncio.run(go())
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2))
    else:
        from sparkctl.cli.textreport import render_status

        print(render_status(report))
    if not report.engine.reachable:
        return EXIT_UNREACHABLE
    # the engine answered, with an error (HTTP 500...): reachable but failing
    return EXIT_ENGINE_ERROR if report.engine.error else EXIT_OK
