"""`sparkctl export arena RUN...`: a Spark Arena submission bundle from sparkctl's runs.

A submission (spark-arena/sparkrun, `sparkrun arena benchmark`) is three files: the serving
recipe (`recipe.yaml`, sparkrun's recipe_version "2" keys), `benchmark.csv` (llama-benchy's
CSV: core/benchy.py) and `metadata.json` (sparkrun's BenchmarkResult.generate_metadata:
recipe, timing, cluster, benchmark, model, runtime_info). sparkctl measures a server someone
else started, so its recipe names the model, runtime and context it measured and says it
carries no container or command; the engine and model facts come from what the runs
recorded: model dtype, quantization, KV heads, head dim, layers and parameters (`model.*`
tags), the runtime (engine kind, version, runner and build, flash attention, KV cache type).

RUN may be bench runs, sweep cells, or a sweep's own run (its cells, in the order they ran:
`--profile arena-v2` records the published schedule's order). Each run becomes a pp row and
a tg row, named as llama-benchy names them (`pp<prompt tokens>`, `tg<num_predict>`,
` @ d<depth>` for a cell with depth, ` (c<k>)` when a run had concurrency above 1). Means and
standard deviations are over the run's requests (population standard deviation, as
llama-benchy's numpy std): prefill and decode tok/s as the engine timed them, time to first
token as the client did. A run with no per-request values is refused rather than exported
empty. No credential reaches the bundle: URLs lose their user:password@ part and secret
query values, and keys that name a secret (token, password, api key...) are dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sparkctl import __version__
from sparkctl.core import arena, benchy
from sparkctl.core import engine_identity as ei
from sparkctl.core.redact import redact_text
from sparkctl.core.names import model_key
from sparkctl.core.workload import SWEEP, SWEEP_CELL, WorkloadIdentity
from sparkctl.core.roofline import bits_per_weight_from_quant
from sparkctl.services.runs.query import list_runs, quote

RUNTIME = {"llama.cpp": "llama-cpp", "vllm": "vllm", "sglang": "sglang", "ollama": "ollama"}


class ExportFailed(Exception):
    """A run that cannot be exported, or a bundle that cannot be written (one line)."""


def find_runs(store: Any, ids: list[str]) -> list[dict]:
    """The runs named by full ids or unique prefixes (as the runs table shows them); a sweep's
    own run stands for its cells, in the order they ran."""
    out = []
    for run in _named_runs(store, ids):
        tags = run.get("tags") or {}
        if tags.get("sparkctl.kind") == SWEEP and tags.get("sweep.id"):
            cells = store.search_runs(f"tags.`sweep.id` = {quote(tags['sweep.id'])}", max_results=1000)
            cells = [c for c in cells if (c.get("tags") or {}).get("sparkctl.kind") == SWEEP_CELL]
            if not cells:
                raise ExportFailed(f"sweep {tags['sweep.id']} (run {run['run_id'][:8]}) has no cell runs")
            out.extend(sorted(cells, key=_order))
        else:
            out.append(run)
    return out


def _order(run: dict) -> tuple[int, int]:
    tags = run.get("tags") or {}
    order = tags.get("sweep.order", "")
    return (int(order) if order.isdigit() else 1 << 30, run.get("start_time") or 0)


def _named_runs(store: Any, ids: list[str]) -> list[dict]:
    out = []
    recent = None
    for rid in ids:
        rid = rid.strip()
        found = store.search_runs(f"attributes.run_id = {quote(rid)}", max_results=1) if len(rid) == 32 else []
        if not found:
            recent = recent if recent is not None else list_runs(store, limit=2000)
            hits = [r.run_id for r in recent if r.run_id.startswith(rid)] if rid else []
            if len(hits) != 1:
                raise ExportFailed(f"run {rid!r}: {'no run' if not hits else f'{len(hits)} runs'} with that id"
                                   + (" prefix" if len(rid) < 32 else ""))
            found = store.search_runs(f"attributes.run_id = {quote(hits[0])}", max_results=1)
        out.append(found[0])
    return out


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0


def rows_for(store: Any, run: dict, max_concurrency: int) -> list[dict[str, Any]]:
    run_id = run["run_id"]
    tags, params, metrics = run.get("tags") or {}, run.get("params") or {}, run.get("metrics") or {}
    if (tags.get("sparkctl.kind") or "bench") not in ("bench", SWEEP_CELL):
        raise ExportFailed(f"run {run_id[:8]} is not a bench or a sweep cell (sparkctl.kind "
                           f"{tags.get('sparkctl.kind')})")
    hist = {k: [v for v in store.metric_history(run_id, k) if v is not None]
            for k in ("engine_decode_tps", "prefill_tps", "ttft_s", "prompt_eval_count", "prompt_evaluated")}
    if not hist["engine_decode_tps"] and not hist["prefill_tps"]:
        raise ExportFailed(f"run {run_id[:8]} has no per-repetition decode or prefill values to export")
    depth = int(tags.get("sweep.depth") or 0)
    conc = int(tags.get("sweep.concurrency") or 1)
    measured_depth = metrics.get("depth_tokens_measured")
    counts = hist["prompt_eval_count"]
    pp_n = None
    if params.get("profile_prompt_tokens"):
        pp_n = int(float(params["profile_prompt_tokens"]))
    elif counts:
        pp_n = int(statistics.median(counts) - (measured_depth or depth if depth else 0))
    tg_n = int(params["num_predict"]) if params.get("num_predict", "").isdigit() else None
    model = tags.get("model.name") or params.get("model") or ""
    ttft_ms = [t * 1000.0 for t in hist["ttft_s"]]
    ppt_ms = [n / r * 1000.0 for n, r in zip(hist["prompt_evaluated"], hist["prefill_tps"]) if r]
    rows = []
    pp_mean, pp_std = _mean_std(hist["prefill_tps"])
    if pp_mean is not None:
        ttfr = _mean_std(ttft_ms)
        est = _mean_std(ppt_ms)
        rows.append({"model": model, "test_name": benchy.test_name("pp", pp_n, depth, conc, max_concurrency),
                     "t_s_mean": pp_mean, "t_s_std": pp_std, "t_s_req_mean": pp_mean, "t_s_req_std": pp_std,
                     "ttfr_mean": ttfr[0], "ttfr_std": ttfr[1], "est_ppt_mean": est[0], "est_ppt_std": est[1],
                     "e2e_ttft_mean": ttfr[0], "e2e_ttft_std": ttfr[1]})
    tg_mean, tg_std = _mean_std(hist["engine_decode_tps"])
    if tg_mean is not None:
        total = metrics.get("throughput_tps") if conc > 1 else None
        rows.append({"model": model, "test_name": benchy.test_name("tg", tg_n, depth, conc, max_concurrency),
                     "t_s_mean": total if total is not None else tg_mean, "t_s_std": None if total is not None else tg_std,
                     "t_s_req_mean": tg_mean, "t_s_req_std": tg_std})
    return rows


def _grid(runs: list[dict]):
    """The Spark Arena profile the runs were measured on (a sweep's `--profile arena-v2`), or None."""
    names = {(r.get("tags") or {}).get("sweep.profile", "") for r in runs}
    found = {arena.by_name(n) for n in names if n}
    return found.pop() if len(found) == 1 and None not in found else None


def benchmark_section(runs: list[dict]) -> dict[str, Any]:
    first = runs[0]
    tags, params = first.get("tags") or {}, first.get("params") or {}
    grid = _grid(runs)
    if grid is not None:
        order = [{"depth": int((r.get("tags") or {}).get("sweep.depth") or 0),
                  "concurrency": int((r.get("tags") or {}).get("sweep.concurrency") or 1)} for r in runs]
        return {"framework": "sparkctl", "profile": grid.pinned, "args": {**grid.args(), "runs": int(params.get("reps") or 0)
                                                                         or grid.runs},
                "schedule": [{"depth": d, "concurrency": c} for d, c in grid.cells],
                "schedule_strategy": grid.strategy or None, "order_run": order,
                "prefix_caching_method": "a context-loading request per concurrent slot before each cell's runs, "
                                         "then pp tokens of fresh text per request (not measured: the context load)"}
    return {"framework": "sparkctl", "profile": tags.get("sweep.profile") or "bench",
            "args": {k: params[k] for k in ("num_predict", "num_ctx", "reps", "warmup", "temperature",
                                            "cache_policy", "prompt_sha256") if k in params}}


def recipe(runs: list[dict]) -> dict[str, Any]:
    """recipe.yaml: sparkrun's recipe keys for what was measured. sparkctl did not start the
    server, so there is no container and no command; what the runs know of it is said."""
    tags, params = runs[0].get("tags") or {}, runs[0].get("params") or {}
    kind = tags.get("engine.kind", "")
    out: dict[str, Any] = {
        "recipe_version": "2",
        "model": tags.get("model.name") or params.get("model", ""),
        "runtime": RUNTIME.get(kind, kind),
        "min_nodes": 1,
        "metadata": {"description": f"measured by sparkctl {__version__} on a {kind or 'unknown'} server it did "
                                    "not start: no container or command recorded",
                     "engine_version": tags.get("engine.version", ""),
                     "endpoint": tags.get("engine.host", "")},
        "defaults": {k: v for k, v in {"max_model_len": int(params["num_ctx"]) if params.get("num_ctx", "").isdigit()
                                       else None,
                                       "flash_attn": tags.get(ei.FLASH_ATTN), "kv_cache_type": tags.get(ei.KV_CACHE_TYPE),
                                       "parallel": tags.get("engine.num_parallel")}.items() if v not in (None, "")},
    }
    return out


def metadata(runs: list[dict]) -> dict[str, Any]:
    """metadata.json in sparkrun's layout, from what the runs recorded."""
    first = runs[0]
    tags, params = first.get("tags") or {}, first.get("params") or {}
    kind = tags.get("engine.kind", "")
    quant = tags.get("model.quantization", "")
    model: dict[str, Any] = {}
    for key, tag in (("dtype", "model.dtype"), ("params", "model.parameter_count"), ("num_layers", "model.layers"),
                     ("num_kv_heads", "model.kv_heads"), ("head_dim", "model.head_dim")):
        if tags.get(tag):
            model[key] = int(tags[tag]) if tags[tag].isdigit() else tags[tag]
    if quant:
        model["quantization"] = quant
        bits = bits_per_weight_from_quant(quant)
        if bits:
            model["quant_bits"] = round(bits, 2)
    if tags.get(ei.KV_CACHE_TYPE) and tags[ei.KV_CACHE_TYPE] != ei.UNKNOWN:
        model["kv_dtype"] = tags[ei.KV_CACHE_TYPE]
    starts = [r.get("start_time") or 0 for r in runs]
    ends = [r.get("end_time") or r.get("start_time") or 0 for r in runs]
    ids = [r["run_id"] for r in runs]
    return {
        "recipe": {"name": f"sparkctl {tags.get('model.name', '')}", "type": "sparkctl",
                   "model": tags.get("model.name", ""), "runtime": RUNTIME.get(kind, kind), "runtime_full": kind,
                   "hash": hashlib.sha256(",".join(ids).encode()).hexdigest()},
        "timing": {"start": _iso(min(starts)), "end": _iso(max(ends)), "duration": (max(ends) - min(starts)) / 1000.0},
        "cluster": {"node_count": 1},
        "benchmark": benchmark_section(runs),
        "model": model,
        "runtime_info": {k: v for k, v in {
            "engine_kind": kind, "engine_version": tags.get("engine.version"), "engine_build": tags.get("engine.build"),
            "runner": tags.get(ei.RUNNER), "runner_build": tags.get(ei.RUNNER_BUILD),
            "flash_attn": tags.get(ei.FLASH_ATTN), "kv_cache_type": tags.get(ei.KV_CACHE_TYPE),
            "gpu": tags.get("gpu.name"), "gpu_driver": tags.get("gpu.driver"),
        }.items() if v},
        "sparkctl": {"version": __version__, "runs": ids},
    }


_SECRET_KEY = re.compile(r"(token|secret|passw|api[_-]?key|credential|auth)", re.IGNORECASE)


def strip_credentials(value: Any) -> Any:
    """`value` with every string redacted (URLs lose user:password@ and secret query values)
    and every key that names a secret dropped, recursively."""
    if isinstance(value, dict):
        return {k: strip_credentials(v) for k, v in value.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(value, list):
        return [strip_credentials(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")


def write_bundle(store: Any, run_ids: list[str], out_dir: str | Path) -> list[Path]:
    """benchmark.csv and metadata.json in `out_dir` (created; existing files replaced
    atomically). Blocking (MLflow): call from a worker thread."""
    runs = find_runs(store, run_ids)
    one_model_one_workload(runs)
    kinds = {((r.get("tags") or {}).get("engine.kind"), (r.get("tags") or {}).get("engine.version")) for r in runs}
    if len(kinds) > 1:
        raise ExportFailed("the runs were measured on different engines ("
                           + ", ".join(f"{k} {v}" for k, v in sorted(kinds, key=str)) + "): one submission is one runtime")
    max_c = max(int((r.get("tags") or {}).get("sweep.concurrency") or 1) for r in runs)
    rows = [row for r in runs for row in rows_for(store, r, max_c)]
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = [_atomic(out / "recipe.yaml", yaml.safe_dump(strip_credentials(recipe(runs)), sort_keys=False)),
                 _atomic(out / "benchmark.csv", benchy.to_csv(strip_credentials(rows))),
                 _atomic(out / "metadata.json", json.dumps(strip_credentials(metadata(runs)), indent=2) + "\n")]
    except OSError as exc:
        raise ExportFailed(f"{out}: cannot write the bundle ({exc.strerror or exc})") from None
    return paths


def one_model_one_workload(runs: list[dict]) -> None:
    """Refuse runs of several models, or of several workloads: a submission is one model's
    results on one schedule, and its metadata names one model and one recipe. A sweep's
    cells may differ in depth and concurrency (each is a row of the CSV); nothing else of
    their workload identity may."""
    models: dict[str, str] = {}
    for r in runs:
        tags, params = r.get("tags") or {}, r.get("params") or {}
        name = tags.get("model.name") or params.get("model") or ""
        models.setdefault(model_key(name) if name else "", name or "(no model recorded)")
    if len(models) > 1:
        raise ExportFailed(f"the runs measured {len(models)} models ({', '.join(sorted(models.values()))}): "
                           "one submission is one model")
    first = None
    for r in runs:
        ident = WorkloadIdentity.from_run(r.get("tags") or {}, r.get("params") or {})
        if first is None:
            first = (r, ident)
            continue
        # a sweep's cells: rows of one submission, whatever their depth and concurrency
        diffs = first[1].differences(replace(ident, depth=first[1].depth, concurrency=first[1].concurrency))
        if diffs:
            said = "; ".join(d.text(first[0]["run_id"][:8], r["run_id"][:8]) for d in diffs)
            raise ExportFailed(f"the runs measured different workloads ({said}): one submission is one workload "
                               "(a sweep's cells may differ only in depth and concurrency)")


def _atomic(path: Path, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
