"""One past run as a flat row: what the CLI's `runs` table and the TUI's Runs screen show.

Built from one run dict as ``MlflowStore.search_runs`` returns it (params, tags and metrics
as the bench's ``to_record`` wrote them). Summary metrics only: a run's latest values come
with the search itself, so a page of rows costs one query, never a metric history per run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any

from sparkctl.core import engine_identity, workload
from sparkctl.core.host_status import HardwareClass
from sparkctl.core.gpu import is_throttled
from sparkctl.core.names import model_key
from sparkctl.core.termtext import safe_line
from sparkctl.core.workload import WorkloadIdentity

# Tags written by the bench (services/bench/runner.py to_record) and read back here.
TAG_MODEL = "model.name"
TAG_ENGINE_KIND = "engine.kind"
TAG_ENGINE_VERSION = "engine.version"
TAG_HOST = "host.name"
# Set by every producer since the workload identity (core/workload.py); a run without it
# is read by that module's rules (no tag and no sweep tags: a bench).
TAG_KIND = "sparkctl.kind"
KIND_BENCH = workload.BENCH
KIND_SWEEP_CELL = workload.SWEEP_CELL  # one cell of a workload sweep: never a plain bench
KIND_EVAL = workload.EVAL
# A lane change (services/lanes): no measurements; its model.name is the new lane model.
# Rollbacks are lane changes too (this kind); their identity says "rollback".
KIND_PROMOTION = workload.PROMOTION
# A community result recorded by `sparkctl import` (services/imports): never a measurement of ours.
KIND_IMPORT = workload.IMPORT
# A sweep's parent run (its cells are its MLflow children): what it asked, in which order.
KIND_SWEEP = workload.SWEEP
RUN_KINDS = (KIND_BENCH, KIND_SWEEP_CELL, KIND_EVAL, KIND_PROMOTION, KIND_IMPORT, KIND_SWEEP)

# Flag words, in the order they are shown.
FLAG_INVALID = "invalid"
FLAG_PLACEMENT = "placement"
FLAG_DNF = "dnf"  # shown as "dnf=N"
FLAG_THROTTLED = "throttled"
FLAG_RELOAD = "reload"
FLAG_PREFILL_CACHED = "prefill-cached"
FLAG_FOREIGN_LOAD = "foreign-load"
FLAG_TRUNCATED = "truncated"
FLAG_CACHE = "cache"  # shown as "cache=warm" for anything but the default cold policy
FLAG_LANE_RESTORE = "lane-restore-failed"
FLAG_RECOVERED = "recovered"


@dataclass(frozen=True)
class RunRow:
    """One MLflow run, flattened. ``None`` where the run did not record a value.

    ``flags`` are short words (see ``flags_of``); ``valid`` is the bench's own verdict
    (tag ``guard.valid``: True, False, or None when absent). ``prompt_sha256``,
    ``num_ctx``, ``num_predict`` and ``cache_policy`` are what two runs must share to be
    compared (with the engine kind and version)."""

    run_id: str
    run_name: str
    status: str
    start_ms: int | None
    model: str
    engine_kind: str
    engine_version: str
    host: str
    kind: str
    decode_tps_median: float | None
    decode_tps_cv_pct: float | None
    ttft_s_median: float | None
    prefill_tps_median: float | None
    joules_per_token: float | None
    roofline_pct: float | None
    valid: bool | None
    dnf_count: int | None
    flags: tuple[str, ...]
    prompt_sha256: str
    num_ctx: str
    num_predict: str
    cache_policy: str
    # quality runs (kind eval): the suite and its accuracies over all items (DNF = not passed)
    suite: str = ""
    gsm8k_strict: float | None = None
    gsm8k_flexible: float | None = None
    ifeval_prompt_strict: float | None = None
    ifeval_inst_loose: float | None = None
    eval_passed: int | None = None  # items passing the suite's headline metric
    eval_items: int | None = None  # items run (answered, wrong, DNF and failed alike)
    decode_tps_min: float | None = None  # the range of the repetitions, for charts
    decode_tps_max: float | None = None
    resident_gib: float | None = None  # the loaded model's size as the engine reported it
    # the machine it ran on, beyond its name: what makes two hosts' numbers comparable
    gpu_name: str = ""
    gpu_driver: str = ""
    mem_total_gib: float | None = None
    spec_acceptance_pct: float | None = None  # speculative decoding: accepted / drafted tokens, whole run
    engine_identity: str = ""  # "runner=llama-server; runner_build=b6500; flash_attn=on; kv_cache_type=f16"
    # evals: the sampling that ran (the runner's /slots, or inferred) else what was sent, as
    # core.sampling.canonical JSON, and where it was read
    sampling: str = ""
    sampling_source: str = ""
    # what the run measured (core.workload): what compare, regressions, promotion and the
    # re-bench key match on; inferred (identity.recorded False) for runs older than it
    identity: WorkloadIdentity = WorkloadIdentity(KIND_BENCH, recorded=False)

    @property
    def what(self) -> str:
        """The run's kind in words: "bench", "sweep cell prose/d0/c4", "eval gsm8k",
        "promotion", "rollback"."""
        i = self.identity
        if i.kind == workload.SWEEP_CELL:
            return f"sweep cell {i.cell}"
        if i.kind == workload.EVAL:
            return f"eval {self.suite or i.suite}".strip()
        if i.kind == workload.IMPORT and i.profile == workload.AIPERF:
            return "aiperf"
        return i.kind

    @property
    def score(self) -> float | None:
        """The suite's headline accuracy (GSM8K strict, IFEval prompt-level strict)."""
        return self.gsm8k_strict if self.suite == "gsm8k" else self.ifeval_prompt_strict if self.suite == "ifeval" else None

    @property
    def hardware(self) -> HardwareClass:
        """GPU, memory (whole GiB) and driver: runs are compared within one class by default."""
        mem = None if self.mem_total_gib is None else round(self.mem_total_gib)
        return HardwareClass(self.gpu_name, mem, self.gpu_driver)

    @property
    def model_key(self) -> str:
        """The model's comparison key ('qwen3' and 'qwen3:latest' share one)."""
        return model_key(self.model)

    @property
    def start_utc(self) -> str | None:
        if self.start_ms is None:
            return None
        return datetime.fromtimestamp(self.start_ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: every field (flags as a list) plus ``start_utc``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, WorkloadIdentity):
                value = value.to_dict()
            out[f.name] = list(value) if isinstance(value, tuple) else value
            if f.name == "start_ms":
                out["start_utc"] = self.start_utc
        return out


# Keys of RunRow.to_dict(), in order: the JSON object keys and the CSV header.
ROW_KEYS: tuple[str, ...] = tuple(
    k for f in fields(RunRow) for k in ((f.name, "start_utc") if f.name == "start_ms" else (f.name,))
)


def _metric(metrics: dict[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value else None  # NaN: not a value


def _bool_tag(tags: dict[str, str], key: str) -> bool | None:
    value = tags.get(key)
    if value is None:
        return None
    return value.strip().lower() == "true"


def flags_of(tags: dict[str, str], params: dict[str, str], dnf_count: int | None) -> tuple[str, ...]:
    """Short words for what makes a run's numbers suspect or not comparable:
    ``invalid`` (guard.valid false), ``placement`` (not 100% GPU), ``dnf=N``, ``throttled``,
    ``reload``, ``prefill-cached``, ``foreign-load``, ``truncated``, ``cache=warm`` (any
    policy but cold), ``lane-restore-failed``, ``recovered`` (closed after its process died)."""
    invalid_reasons = tags.get("guard.invalid_reasons", "")
    flags_text = tags.get("guard.flags", "")
    out: list[str] = []
    if _bool_tag(tags, "guard.valid") is False:
        out.append(FLAG_INVALID)
    placements = [tags.get("guard.placement_before", ""), tags.get("guard.placement_after", "")]
    # a placement flag needs a placement reading: "n/a" is a check that never ran (a run
    # stopped before its placement after was read), "unknown" an engine that cannot say
    if " placement " in f" {invalid_reasons} " or any(
        p and p not in ("100% GPU", "n/a") and not p.startswith("unknown") for p in placements
    ):
        out.append(FLAG_PLACEMENT)
    if dnf_count:
        out.append(f"{FLAG_DNF}={dnf_count}")
    reasons = [r for r in tags.get("gpu.throttle_reasons", "").split(",") if r.strip() and r.strip() != "none"]
    if (reasons and is_throttled([r.strip() for r in reasons])) or "GPU throttled" in invalid_reasons:
        out.append(FLAG_THROTTLED)
    if _bool_tag(tags, "guard.reload_detected"):
        out.append(FLAG_RELOAD)
    if _bool_tag(tags, "guard.prefill_cached"):
        out.append(FLAG_PREFILL_CACHED)
    if _bool_tag(tags, "guard.foreign_load"):
        out.append(FLAG_FOREIGN_LOAD)
    if "prompt truncated" in invalid_reasons or "prompt truncated" in flags_text:
        out.append(FLAG_TRUNCATED)
    policy = (params.get("cache_policy") or tags.get("guard.cache_policy") or "").strip()
    if policy and policy != "cold":
        out.append(f"{FLAG_CACHE}={policy}")
    if tags.get("guard.lane_restore", "").startswith("FAILED") or "lane restore failed" in flags_text:
        out.append(FLAG_LANE_RESTORE)
    if tags.get("guard.recovery") or _bool_tag(tags, "sparkctl.recovered"):
        out.append(FLAG_RECOVERED)
    return tuple(out)


def row_from_run(run: dict[str, Any]) -> RunRow:
    """A ``RunRow`` from one run dict of ``MlflowStore.search_runs``; tolerant of runs
    written by older versions or by hand (missing keys become None or ""). The words shown
    lose control characters: a team server holds runs any of its users wrote."""
    tags: dict[str, str] = run.get("tags") or {}
    params: dict[str, str] = run.get("params") or {}
    metrics: dict[str, Any] = run.get("metrics") or {}
    dnf = _metric(metrics, "dnf_count")
    dnf_count = None if dnf is None else int(dnf)
    start = run.get("start_time")
    identity = WorkloadIdentity.from_run(tags, params)
    # rollbacks are lane changes: listed (and filtered) with the promotions
    kind = KIND_PROMOTION if identity.kind == workload.ROLLBACK else identity.kind
    return RunRow(
        run_id=str(run.get("run_id") or ""),
        run_name=safe_line(run.get("run_name") or ""),
        # a run a guard refused is FAILED in MLflow (it has no other word): REFUSED here
        status="REFUSED" if tags.get("guard.refused") else str(run.get("status") or ""),
        start_ms=None if start is None else int(start),
        # AIPerf names the model in its params (endpoint.models, comma-separated)
        model=safe_line(tags.get(TAG_MODEL) or params.get("model")
                        or params.get("endpoint.models", "").split(",")[0].strip()),
        engine_kind=safe_line(tags.get(TAG_ENGINE_KIND, "")),
        engine_version=safe_line(tags.get(TAG_ENGINE_VERSION, "")),
        host=safe_line(tags.get(TAG_HOST, "")),
        kind=kind,
        decode_tps_median=_metric(metrics, "decode_tps_median"),
        decode_tps_cv_pct=_metric(metrics, "decode_tps_cv_pct"),
        ttft_s_median=_metric(metrics, "ttft_s_median"),
        prefill_tps_median=_metric(metrics, "prefill_tps_median"),
        joules_per_token=_metric(metrics, "joules_per_token"),
        roofline_pct=_metric(metrics, "roofline_pct"),
        valid=_bool_tag(tags, "guard.valid"),
        dnf_count=dnf_count,
        flags=tuple(safe_line(f) for f in flags_of(tags, params, dnf_count)),
        prompt_sha256=params.get("prompt_sha256", ""),
        num_ctx=params.get("num_ctx", ""),
        num_predict=params.get("num_predict", ""),
        cache_policy=params.get("cache_policy") or tags.get("guard.cache_policy", ""),
        suite=safe_line(tags.get("eval.suite", "")),
        gsm8k_strict=_metric(metrics, "gsm8k_strict"),
        gsm8k_flexible=_metric(metrics, "gsm8k_flexible"),
        ifeval_prompt_strict=_metric(metrics, "ifeval_prompt_strict"),
        ifeval_inst_loose=_metric(metrics, "ifeval_inst_loose"),
        eval_passed=_int_metric(metrics, "passed"),
        eval_items=_int_metric(metrics, "items"),
        decode_tps_min=_metric(metrics, "decode_tps_min"),
        decode_tps_max=_metric(metrics, "decode_tps_max"),
        resident_gib=_metric(metrics, "resident_gib"),
        gpu_name=safe_line(tags.get("gpu.name", "")),
        gpu_driver=safe_line(tags.get("gpu.driver", "")),
        mem_total_gib=_float_tag(tags, "host.mem_total_gib"),
        spec_acceptance_pct=_metric(metrics, "spec_acceptance_pct_total"),
        engine_identity=engine_identity.compact(tags),
        sampling=tags.get("sampling.effective") or tags.get("sampling.sent", ""),
        sampling_source=(tags.get("sampling.effective_source", "") if tags.get("sampling.effective")
                         else "sent" if tags.get("sampling.sent") else ""),
        identity=identity,
    )


def _float_tag(tags: dict[str, str], key: str) -> float | None:
    try:
        return float(tags[key])
    except (KeyError, ValueError):
        return None


def _int_metric(metrics: dict[str, Any], key: str) -> int | None:
    value = _metric(metrics, key)
    return None if value is None else int(value)
