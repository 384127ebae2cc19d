"""Repair what a dead bench left: at the next start, put back the models it changed.

A bench killed without its wrap-up (kill -9, an OOM kill, a Spark power-cycled after a
memory freeze) leaves its residency journal behind (tracking/residency_journal.py). Every CLI
command that may act (not `status`, which the fleet runs: views only read) calls
``recover_residency`` at its start, the TUI when asked (P on the dashboard), and a bench,
sweep, eval, promotion or rollback, and the Models screen's load and unload, call
``repair_before`` on their own engine before they look at what is resident (so a TUI that
only showed the warning never acts beside a dead bench's leftovers, nor has its change
undone by the next command's repair). For each journal whose
owner process is dead, it takes the engine's bench lock (so no live bench is disturbed),
puts back what the journal says was resident, unloads what the bench loaded, verifies from
/api/ps, and says what it did. A restore that fails keeps the journal, marked failed: the
dashboard and `status` warn about it (``residency_warnings``) until `sparkctl lanes
--restore` succeeds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sparkctl.core.names import same_model
from sparkctl.tracking.residency_journal import (FAILED, ResidencyJournal, owner_dead, read_journals,
                                                 residency_warnings)

__all__ = ["RecoveryReport", "recover_residency", "repair_before", "residency_warnings"]


@dataclass
class RecoveryReport:
    done: list[str] = field(default_factory=list)  # what was put back, one line per journal
    notes: list[str] = field(default_factory=list)  # what could not be kept exactly
    warnings: list[str] = field(default_factory=list)  # loud: failed, unreachable, not configured here

    @property
    def lines(self) -> list[str]:
        return self.done + self.notes + [f"WARNING: {w}" for w in self.warnings]


def _engines_for(cfg) -> list[Any]:
    """The Ollama engines this config knows: [engine] and any [engines.NAME] of kind ollama."""
    from sparkctl.services.factory import EngineChoiceError, make_engine

    out = []
    try:
        out.append(make_engine(cfg))
    except EngineChoiceError:
        pass
    for name, e in cfg.engines.items():
        if e.kind == "ollama":
            try:
                out.append(make_engine(cfg, name=name))
            except EngineChoiceError:
                continue
    return out


async def recover_residency(cfg, *, directory: Path | None = None, retry_failed: bool = False,
                            engines: list[Any] | None = None, say: Callable[[str], None] = lambda _t: None
                            ) -> RecoveryReport:
    """Put back what dead benches changed. `retry_failed`: also journals of a live process
    whose own restore failed (`sparkctl lanes --restore`, asked for by the user). Engines
    not given are built from the config and closed again."""
    from sparkctl.services.bench.lock import BenchLock, LockUnavailable, engine_key

    report = RecoveryReport()
    todo = await _to_repair(cfg, directory, retry_failed)
    if not todo:
        return report
    built = [] if engines is not None else _engines_for(cfg)
    pool = engines if engines is not None else built
    try:
        for j in todo:
            engine = next((e for e in pool if engine_key(e.host) == j.engine_key), None)
            if engine is None:
                report.warnings.append(f"{j.describe()} left models changed on an engine this config does not "
                                       "name; run `sparkctl lanes --restore` with the config that names it")
                continue
            lock = BenchLock(engine.host, ["putting back what a dead bench changed"])
            try:
                holder = await asyncio.to_thread(lock.try_acquire)
            except LockUnavailable as exc:
                report.warnings.append(f"{j.describe()} left models changed; not put back: {exc}")
                continue
            if holder is not None:
                report.warnings.append(f"{j.describe()} left models changed; another bench is running "
                                       f"({holder.describe()}), so they are put back later (`sparkctl lanes --restore`)")
                continue
            try:
                await _recover_one(cfg, engine, j, report, say)
            finally:
                lock.release()
    finally:
        for e in built:
            try:
                await e.close()
            except Exception:
                pass
    return report


async def _to_repair(cfg, directory: Path | None, retry_failed: bool, engine_key: str | None = None
                     ) -> list[ResidencyJournal]:
    """Journals whose owner died (and, with `retry_failed`, live ones whose restore failed),
    of one engine or all; a promotion that died after its lane change went through is not
    undone (what it loaded is wanted), its journal just dropped."""
    todo = []
    for j in await asyncio.to_thread(read_journals, directory):
        if engine_key is not None and j.engine_key != engine_key:
            continue
        dead = await asyncio.to_thread(owner_dead, j)
        if not (dead or (retry_failed and j.state == FAILED)):
            continue
        if j.lane and j.models and same_model(cfg.lanes.get(j.lane, ""), j.models[0]):
            await asyncio.to_thread(j.remove)
            continue
        todo.append(j)
    return todo


async def repair_before(cfg, engine, say: Callable[[str], None], *, lock_held: bool,
                        directory: Path | None = None) -> RecoveryReport:
    """Before an action changes residency on `engine` (a bench, sweep, eval, promotion), put
    back what a dead bench left on that engine, so the action starts from what the user had.
    `lock_held`: the caller holds the engine's bench lock (else it is taken here, and a
    repair another bench is in the way of is left for later, said). Each line goes to `say`.
    Costs one directory listing when there is nothing to do."""
    from sparkctl import paths
    from sparkctl.services.bench.lock import BenchLock, LockUnavailable, engine_key

    report = RecoveryReport()
    if directory is None and not await asyncio.to_thread(paths.residency_journals):
        return report
    todo = await _to_repair(cfg, directory, False, engine_key(engine.host))
    if not todo:
        return report
    lock = None
    if not lock_held:
        lock = BenchLock(engine.host, ["putting back what a dead bench changed"])
        try:
            holder = await asyncio.to_thread(lock.try_acquire)
        except LockUnavailable as exc:
            holder, lock = None, None
            report.warnings.append(f"what a dead bench changed is not put back first: {exc}")
        if holder is not None:
            report.warnings.append(f"what a dead bench changed is not put back first: another bench is running "
                                   f"({holder.describe()})")
            lock = None
    try:
        if lock_held or lock is not None:
            for j in todo:
                await _recover_one(cfg, engine, j, report, say)
    finally:
        if lock is not None:
            lock.release()
    for line in report.lines:
        say(line)
    return report


async def _recover_one(cfg, engine, j: ResidencyJournal, report: RecoveryReport, say) -> None:
    from sparkctl.core.residency import lanes_changed_since
    from sparkctl.services.bench.residency_guard import put_back

    # the lanes as this command reads them (sparkctl's own state file over the config) win
    # over the lanes the bench began with: a promotion or an edit since then is not undone
    lane_now = lanes_changed_since(j.lanes, j.before, dict(getattr(cfg, "lanes", {}) or {}))
    out = await put_back(engine, j, say, lane_now)
    changes = out.residency_tag()
    if out.ok and not out.leftover:
        report.done.append(f"put back what {j.describe()} changed when it died: {changes}")
        report.notes.extend(out.notes)
        await asyncio.to_thread(j.remove)
        return
    j.state, j.failures = FAILED, out.failed + out.leftover
    try:
        await asyncio.to_thread(j.save)
    except OSError:
        pass
    report.warnings.append(f"{j.describe()} died and its changes could not all be put back: "
                           + "; ".join(j.failures))
    if out.restored or out.unloaded:
        report.done.append(f"partly put back after {j.describe()}: {changes}")
