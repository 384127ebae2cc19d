"""`sparkctl import llama-benchy FILE`: a llama-benchy result (JSON or CSV) recorded as runs
of kind `import`, one per measurement (depth, concurrency, phase), so a community figure can
sit beside sparkctl's own at the same depth without ever being mistaken for one.

What keeps imports apart: the tag `sparkctl.kind = import` (compare, regressions, promotion
and the re-bench key only use kind `bench`); the engine is "unknown" unless the user names
it (llama-benchy does not record which server it measured); and the statistics say what
llama-benchy measured: client-side tok/s ((tokens - 1) / (last - first token) for decode,
prompt tokens over the estimated prompt-processing time for prefill), means and standard
deviations, the raw values only where its JSON kept them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkctl.core import benchy, workload
from sparkctl.core.workload import WorkloadIdentity
from sparkctl.core.names import model_key
from sparkctl.tracking.record import RunRecord

KIND_IMPORT = workload.IMPORT
SOURCE = "llama-benchy"


class ImportFailed(Exception):
    """The file could not be read as a llama-benchy result (a one-line reason)."""


@dataclass(frozen=True)
class Imported:
    path: Path
    report: benchy.Report
    records: list[RunRecord]


def read(path: str | Path) -> tuple[benchy.Report, str]:
    """The parsed result and the file's sha256."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{p}: cannot read it ({exc.strerror or exc})") from None
    try:
        report = benchy.parse(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ImportFailed(f"{p}: not UTF-8 text") from None
    except ValueError as exc:  # JSONDecodeError included
        raise ImportFailed(f"{p}: {exc}") from None
    return report, hashlib.sha256(raw).hexdigest()


def _start_ms(meta: dict[str, Any], fallback_ms: int) -> int:
    stamp = str(meta.get("timestamp") or "")
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return fallback_ms
    return int(moment.timestamp() * 1000)


def records(report: benchy.Report, file_sha256: str, file_name: str, *, experiment: str, now_ms: int,
            model: str | None = None, engine_kind: str | None = None,
            engine_version: str | None = None) -> list[RunRecord]:
    """One RunRecord per measurement of the report."""
    out = []
    start = _start_ms(report.meta, now_ms)
    name = model or report.model or "unknown"
    caching = report.meta.get("prefix_caching_enabled")
    for p in report.points:
        m = p.metrics
        decode = m.get("tg_req") or m.get("tg")
        prefill = m.get("pp_req") or m.get("pp")
        summary: dict[str, float] = {}
        if decode is not None:
            summary.update(decode_tps_median=decode.median, decode_tps_mean=decode.mean)
            if decode.std is not None:
                summary["decode_tps_std"] = decode.std
                if decode.mean:
                    summary["decode_tps_cv_pct"] = decode.std / decode.mean * 100
        if prefill is not None:
            summary.update(prefill_tps_median=prefill.median, prefill_tps_mean=prefill.mean)
            if prefill.std is not None:
                summary["prefill_tps_std"] = prefill.std
        if m.get("tg") is not None and p.concurrency > 1:
            summary["throughput_tps"] = m["tg"].mean
        for key, metric in (("ttft_s", "e2e_ttft"), ("ttfr_s", "ttfr"), ("est_ppt_s", "est_ppt")):
            if m.get(metric) is not None:
                summary[f"{key}_median"] = m[metric].median / 1000.0
        if m.get("peak") is not None:
            summary["peak_tps"] = m["peak"].mean
        steps = {}
        if decode is not None and decode.values:
            steps["decode_tps"] = list(decode.values)
        if prefill is not None and prefill.values:
            steps["prefill_tps"] = list(prefill.values)
        if m.get("e2e_ttft") is not None and m["e2e_ttft"].values:
            steps["ttft_s"] = [v / 1000.0 for v in m["e2e_ttft"].values]
        phase = "context" if p.context_phase else "measure"
        policy = "warm" if (caching and not p.context_phase) else "cold" if caching is False else "unrecorded"
        cell = f"d{p.depth}/c{p.concurrency}" + ("/context" if p.context_phase else "")
        params = {"model": name, "depth_tokens": p.depth, "concurrency": p.concurrency,
                  "prompt_tokens": "" if p.prompt_size is None else p.prompt_size,
                  "num_predict": "" if p.response_size is None else p.response_size,
                  "phase": phase, "cache_policy": policy, "source_file": file_name,
                  "statistic": "median of values" if report.fmt == "json" else "mean (the CSV keeps no values)"}
        for k in ("version", "latency_mode", "latency_ms", "max_concurrency"):
            if report.meta.get(k) is not None:
                params[f"llama_benchy_{k}"] = report.meta[k]
        tags = {
            "sparkctl.kind": KIND_IMPORT, "import.source": SOURCE, "import.format": report.fmt,
            "import.file_sha256": file_sha256, "import.cell": cell, "import.depth": str(p.depth),
            "import.concurrency": str(p.concurrency), "import.phase": phase,
            "import.model_as_recorded": report.model or "",
            "model.name": name, "model.key": model_key(name),
            "engine.kind": engine_kind or "unknown", "engine.version": engine_version or "unknown",
            "guard.cache_policy": policy,
        }
        # the workload identity every producer records (core/workload.py): kind import, so no
        # comparison ever pairs it with a bench; depth and concurrency say where it sits
        tags.update(WorkloadIdentity(workload.IMPORT, profile=SOURCE, depth=str(p.depth), concurrency=str(p.concurrency),
                                     cache_policy=policy, num_predict="" if p.response_size is None
                                     else str(p.response_size)).to_tags())
        out.append(RunRecord(
            experiment=experiment, run_name=f"{name} {cell} (llama-benchy import)", status="FINISHED",
            start_ms=start, end_ms=start, params={k: str(v) for k, v in params.items()}, tags=tags,
            step_metrics=steps, summary_metrics=summary,
            # the same file imported again finds its runs instead of writing them twice
            record_id=hashlib.sha256(f"{file_sha256}|{name}|{cell}".encode()).hexdigest()[:32],
            artifacts={"llama_benchy_point.json": {"model": p.model, "depth": p.depth, "concurrency": p.concurrency,
                                                   "prompt_size": p.prompt_size, "response_size": p.response_size,
                                                   "context_phase": p.context_phase,
                                                   "metrics": {k: {"mean": s.mean, "std": s.std, "values": list(s.values)}
                                                               for k, s in m.items()}}},
        ))
    return out
