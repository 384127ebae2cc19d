"""`sparkctl fleet [HOST ...] [--json]`: every host's status over ssh, side by side.

The asking is ``sparkctl.services.fleet``; this module reads arguments and prints.
"""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, CliError


def register(sub) -> None:
    f = sub.add_parser("fleet", help="every [hosts.NAME] over ssh: memory, models, engine, GPU, warnings")
    f.add_argument("hosts", nargs="*", metavar="HOST",
                   help="only these hosts ([hosts.NAME] names, or any ssh destination)")
    f.add_argument("--json", action="store_true", help="one JSON object (keys in docs/fleet.md)")
    f.add_argument("--timeout", type=float, metavar="S", help="per-host limit in seconds (default [fleet] timeout_s)")
    f.add_argument("--no-runs", action="store_true",
                   help="skip each lane's last bench (read from the tracking store)")
    f.set_defaults(handler=cmd_fleet)


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024**3:.1f}"


def _engine(s) -> str:
    text = f"{s.engine_kind} {s.engine_version or '?'}"
    if s.runners:
        text += f" ({', '.join(s.runners)})"
    return text


def _gpu(s) -> str:
    if not s.gpus:
        return "no GPU"
    parts = []
    for g in s.gpus[:2]:
        util = "-" if g.utilization_pct is None else f"{g.utilization_pct:.0f}%"
        power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
        parts.append(f"{util} {power}")
    return " | ".join(parts)


def _resident(view) -> str:
    from sparkctl.core.host_status import lane_of

    s = view.status
    if s.engine_state != "up" or not view.current:
        return "?"
    if not s.resident:
        return "none"
    out = []
    for r in s.resident:
        lane = lane_of(s, view.host.lanes or None, r.name)
        where = "" if r.placement == "100% GPU" else f", {r.placement}"
        out.append(f"{r.name}{f' [{lane}]' if lane else ''}{where}")
    return "; ".join(out)


def render_fleet(report) -> str:
    """One block per host: a headline, then its warnings, lanes' last benches and notes."""
    from sparkctl.core.host_status import age_label
    from sparkctl.services.fleet import UNREACHABLE

    lines = []
    for v in report.views:
        s = v.status
        if v.state == UNREACHABLE:
            head = f"{v.name} ({v.host.destination}): UNREACHABLE: {v.reason}"
        else:
            head = f"{v.name} ({v.host.destination}): {v.state}"
        lines.append(head)
        if s is None:
            lines.append("  never seen")
            lines.append("")
            continue
        age = v.age_s(report.at)
        if v.state == UNREACHABLE:
            lines.append(f"  last known state, {age_label(age)} old ({s.at or '?'}):")
        lines.append(f"  engine   {_engine(s)} · {s.engine_state}")
        if s.total is not None:
            lines.append(f"  memory   {_gib(s.available)} of {_gib(s.total)} GiB available · headroom "
                         f"{_gib(s.headroom)} GiB over the {_gib(s.reserve)} GiB reserve · {s.level or '?'}")
        lines.append(f"  gpu      {_gpu(s)} · {s.hardware.label}")
        lines.append(f"  models   {_resident(v)}")
        for b in v.benches:
            if b.engine_version is None:
                lines.append(f"  bench    {b.lane} ({b.model}): never benched on this host")
            else:
                tps = "-" if b.decode_tps is None else f"{b.decode_tps:.1f} tok/s"
                lines.append(f"  bench    {b.lane} ({b.model}): {tps} on {b.engine_version}")
        for w in v.warnings:
            lines.append(f"  ⚠ {w}")
        lines.append("")
    groups = {s.status.hardware.label for s in report.views if s.status is not None}
    if len(groups) > 1:
        lines.append("hosts differ in hardware (GPU, memory, driver): compare benches within one class")
    return "\n".join(lines).rstrip()


def cmd_fleet(args, cfg) -> int:
    import asyncio
    import json
    from dataclasses import replace
    from datetime import datetime, timezone

    from sparkctl.services.fleet import LIVE, FleetPoller, FleetReport, fleet_hosts

    if args.timeout is not None:
        from sparkctl.core.limits import MAX_FLEET_TIMEOUT_S

        if not (0 < args.timeout <= MAX_FLEET_TIMEOUT_S):  # nan, inf or a huge one would wait forever
            raise CliError(f"--timeout must be a number of seconds > 0 and at most {MAX_FLEET_TIMEOUT_S:g}, "
                           f"got {args.timeout:g}", EXIT_BAD_INPUT)
        cfg = replace(cfg, fleet=replace(cfg.fleet, timeout_s=args.timeout))
    bad = [h for h in args.hosts if not h.strip() or h.startswith("-") or any(c.isspace() for c in h)]
    if bad:
        raise CliError(f"not a host name: {bad[0]!r}", EXIT_BAD_INPUT)
    hosts = fleet_hosts(cfg, args.hosts or None)
    if not hosts:
        raise CliError(f"no hosts: add [hosts.NAME] tables (or [fleet] ssh_hosts) to {cfg.source}, "
                       "or name hosts: sparkctl fleet HOST ...", EXIT_BAD_INPUT)

    async def go():
        poller = FleetPoller(cfg, hosts)
        try:
            await poller.refresh()
        finally:
            await poller.close()
        return poller

    poller = asyncio.run(go())
    if not args.no_runs:
        _add_benches(cfg, poller)
    report = FleetReport(datetime.now(timezone.utc), [poller.views[h.name] for h in hosts])
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render_fleet(report))
    # scripts: 0 when every host answered with a working engine, 3 when any did not
    return EXIT_OK if all(v.state == LIVE for v in report.views) else EXIT_UNREACHABLE


def _add_benches(cfg, poller) -> None:
    """Each live host's lanes' last benches, from the tracking store; a store that cannot
    be read leaves them out (the fleet is about the hosts, the store is a nicety here)."""
    import sys

    from sparkctl.core.redact import redact_text
    from sparkctl.services.factory import make_spool_and_store
    from sparkctl.services.fleet.lastbench import lane_benches

    live = [v for v in poller.views.values() if v.current and v.status is not None and v.status.engine_state == "up"]
    if not live:
        return
    try:
        _spool, store = make_spool_and_store(cfg)
        for v in live:
            poller.set_benches(v.name, lane_benches(store, v.status, v.host.lanes or None))
    except Exception as exc:  # TrackingError, an unreachable server: said once, not fatal
        print(f"sparkctl: last benches not shown: {redact_text(str(exc)).splitlines()[0]}", file=sys.stderr)
