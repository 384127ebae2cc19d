"""`sparkctl import llama-benchy FILE`: a llama-benchy result (JSON or CSV), or its live event
stream (`--emit-progress`, core/benchy_progress.py), recorded as runs of kind `import`, one
per measurement (depth, concurrency, phase), so a community figure can sit beside
sparkctl's own at the same depth without ever being mistaken for one. From the stream each
request is a step of its run (TTFT, decode and prefill tok/s, duration), so the Runs screen
shows a llama-benchy run's per-request latencies as it shows a bench's repetitions.

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

from sparkctl.core import benchy, genai, workload
from sparkctl.core import benchy_progress as progress
from sparkctl.core.names import model_key
from sparkctl.core.redact import redact_uri
from sparkctl.core.workload import WorkloadIdentity
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


# ---- llama-benchy's live event stream (--emit-progress) ---------------------------------------


def is_progress_stream(path: str | Path) -> bool:
    """Whether `path` holds llama-benchy's --emit-progress stream (its first non-empty line)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            for line in f:
                if line.strip():
                    return progress.looks_like_stream(line)
    except OSError as exc:
        raise ImportFailed(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return False


def read_progress(path: str | Path) -> progress.ProgressState:
    """A whole progress stream, as far as it was written (a live one may be unfinished)."""
    p = Path(path)
    state = progress.ProgressState()
    try:
        with open(p, encoding="utf-8-sig") as f:
            for line in f:
                state.feed_line(line)
    except OSError as exc:
        raise ImportFailed(f"{p}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ImportFailed(f"{p}: not UTF-8 text") from None
    if state.header_ts is None and not state.requests:
        raise ImportFailed(f"{p}: no {progress.SCHEMA} events in it")
    return state


def progress_records(state: progress.ProgressState, file_name: str, *, experiment: str, now_ms: int,
                     model: str | None = None, engine_kind: str | None = None,
                     engine_version: str | None = None) -> list[RunRecord]:
    """One RunRecord per cell (and phase) of a progress stream, every request a step: its
    TTFT, decode and prefill tok/s, duration and tokens, and the GenAI live series. The
    status says how the stream ended: FINISHED (bench_complete ok), KILLED (interrupted, or
    no bench_complete yet), FAILED (error)."""
    out = []
    status = {"ok": "FINISHED", "error": "FAILED"}.get(state.status or "", "KILLED")
    run_key = f"{state.header_ts or 0:.6f}"  # the same stream imported again (or live, then whole) finds its runs
    for cell in state.cells():
        for phase in ("context", "measure"):
            reqs = [r for r in cell.requests if r.context_phase == (phase == "context")]
            if not reqs:
                continue
            name = model or cell.model or "unknown"
            key = f"d{cell.depth}/c{cell.concurrency}" + ("/context" if phase == "context" else "")
            summ = progress.summary(reqs, state.latency_s)
            if cell.concurrency > 1:
                tput = _throughput(reqs)
                if tput is not None:
                    summ["throughput_tps"] = tput
            figures = [genai.RequestFigures(ttfc_s=r.ttfc_s, tpoc_s=r.tpoc_s, duration_s=r.duration_s,
                                            output_tokens=r.total_tokens, input_tokens=r.prompt_tokens)
                       if r.ok else genai.RequestFigures() for r in reqs]
            summ.update(genai.summary(figures))
            steps: dict[str, list[float | None]] = {
                "ttft_s": [r.ttft_s if r.ok else None for r in reqs],
                "ttfr_s": [r.ttfr_s if r.ok else None for r in reqs],
                "client_decode_tps": [r.decode_tps for r in reqs],
                "decode_tps": [r.decode_tps for r in reqs],
                "prefill_tps": [r.prefill_tps(state.latency_s) for r in reqs],
                "total_s": [r.duration_s for r in reqs],
                "eval_count": [None if r.total_tokens is None else float(r.total_tokens) for r in reqs],
                "prompt_eval_count": [None if r.prompt_tokens is None else float(r.prompt_tokens) for r in reqs],
                "error": [1.0 if r.error else 0.0 for r in reqs],
            }
            steps.update(genai.live_series(figures))
            cached = "warm" if (phase == "measure" and any(r.context_phase for r in cell.requests)) else "unrecorded"
            start = int((min(r.start_ts for r in reqs)) * 1000)
            end = int((max(r.end_ts or r.start_ts for r in reqs)) * 1000)
            params = {"model": name, "depth_tokens": cell.depth, "concurrency": cell.concurrency,
                      "prompt_tokens": cell.prompt_size, "num_predict": cell.response_size, "phase": phase,
                      "cache_policy": cached, "source_file": file_name, "statistic": "median of requests",
                      "llama_benchy_version": state.version, "latency_s": state.latency_s,
                      "latency_mode": state.latency_mode, "base_url": redact_uri(reqs[0].base_url) if reqs[0].base_url else ""}
            tags = {
                "sparkctl.kind": KIND_IMPORT, "import.source": SOURCE, "import.format": "progress",
                "import.cell": key, "import.depth": str(cell.depth), "import.concurrency": str(cell.concurrency),
                "import.phase": phase, "import.model_as_recorded": cell.model, "import.stream_status": state.status or "",
                "model.name": name, "model.key": model_key(name),
                "engine.kind": engine_kind or "unknown", "engine.version": engine_version or "unknown",
                "guard.cache_policy": cached,
            }
            tags.update(WorkloadIdentity(workload.IMPORT, profile=SOURCE, depth=str(cell.depth),
                                         concurrency=str(cell.concurrency), cache_policy=cached,
                                         num_predict=str(cell.response_size)).to_tags())
            out.append(RunRecord(
                experiment=experiment, run_name=f"{name} {key} (llama-benchy live)", status=status,
                start_ms=start or now_ms, end_ms=end or now_ms, params={k: str(v) for k, v in params.items()},
                tags=tags, step_metrics=steps, summary_metrics=summ,
                record_id=hashlib.sha256(f"progress|{run_key}|{name}|{key}".encode()).hexdigest()[:32],
                artifacts={"llama_benchy_requests.json": [
                    {"request_id": r.request_id, "run_index": r.run_index, "ttfr_s": r.ttfr_s, "ttft_s": r.ttft_s,
                     "total_tokens": r.total_tokens, "prompt_tokens": r.prompt_tokens,
                     "decode_seconds": r.decode_seconds, "duration_s": r.duration_s, "error": r.error}
                    for r in reqs]},
            ))
    return out


def _throughput(reqs: list[progress.Request]) -> float | None:
    """All tokens over the runs' wall time (each run's requests ran together)."""
    runs: dict[int, list[progress.Request]] = {}
    for r in reqs:
        if r.ok and r.total_tokens:
            runs.setdefault(r.run_index, []).append(r)
    tokens = sum(r.total_tokens or 0 for rs in runs.values() for r in rs)
    wall = sum(max(r.end_ts or 0 for r in rs) - min(r.start_ts for r in rs) for rs in runs.values())
    return tokens / wall if wall > 0 and tokens else None
