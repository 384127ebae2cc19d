"""Runs for decision tests, written the way the producers write them and recorded through
sparkctl's own recorder (spool, then a REAL MLflow store).

Benches: the step and summary keys of BenchRunner.to_record (services/bench/runner.py).
They are seeded, not run, where a figure cannot come out of the fake engine and probes:
J/token needs NVML power samples, and the fake Ollama has one prefill pace for every model.
Evals: the params, tags and metrics of EvalRunner.to_record (services/evals/runner.py);
without items (no ``sample_sha256``) two of them compare as independent samples, as
runs on different samples do.

Also a small GSM8K-format suite and per-question answers for the FAKE Ollama, so that the
REAL EvalRunner can produce paired samples of chosen tables."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from sparkctl.core.workload import WorkloadIdentity
from sparkctl.tracking.record import RunRecord
from sparkctl.tracking.spool import Spool
from sparkctl.tracking.sync import record_run
from testkit.tracking import TEST_EXPERIMENT

PROMPT_SHA = "e17515283eba" + "0" * 52
HOST_TAGS = {"engine.kind": "ollama", "host.name": "spark-01"}


def seed_bench(store, tmp_path: Path, model: str, start_ms: int, *, decode: list[float], ttft: list[float],
               joules: list[float], resident_gib: float, version: str = "0.12.6", num_ctx: int = 8192,
               tags: dict | None = None, acceptance: list[float] | None = None) -> str:
    identity = WorkloadIdentity.bench(prompt_sha256=PROMPT_SHA, num_ctx=num_ctx, num_predict=64, think=False,
                                      cache_policy="cold")
    n = len(decode)
    rec = RunRecord(
        experiment=TEST_EXPERIMENT, run_name=f"{model} @ ollama {version}", start_ms=start_ms,
        end_ms=start_ms + 10_000,
        params={"model": model, "num_ctx": str(num_ctx), "num_predict": "64", "prompt_sha256": PROMPT_SHA,
                "cache_policy": "cold", "reps": str(n)},
        tags={**HOST_TAGS, "engine.version": version, "model.name": model, "sparkctl.kind": "bench",
              "guard.valid": "true", "guard.placement_before": "100% GPU", "guard.placement_after": "100% GPU",
              "gpu.throttle_reasons": "none", "guard.cache_policy": "cold", **identity.to_tags(), **(tags or {})},
        step_metrics={"engine_decode_tps": decode, "ttft_s": ttft, "joules_per_token": joules,
                      "dnf": [0.0] * n, "error": [0.0] * n, "prefill_cached": [0.0] * n,
                      # speculative decoding: accepted / drafted tokens per repetition (specdec.step_metrics)
                      **({"spec_acceptance_pct": acceptance} if acceptance else {})},
        summary_metrics={"decode_tps_median": statistics.median(decode), "ttft_s_median": statistics.median(ttft),
                         "joules_per_token": statistics.fmean(joules), "resident_gib": resident_gib,
                         "dnf_count": 0.0})
    result = record_run(rec, Spool(tmp_path / "seed-spool.jsonl"), store)
    assert result.synced, result.message
    return result.run_id


def seed_eval(store, tmp_path: Path, model: str, suite: str, passed: int, items: int, start_ms: int, *,
              version: str = "0.12.6", num_ctx: int = 8192) -> str:
    identity = WorkloadIdentity.eval(suite=suite, suite_sha256="5" * 64, template_sha256="", rule_version="1",
                                     num_ctx=num_ctx, num_predict=512, think=False)
    metric = {"gsm8k": ("gsm8k_strict", "gsm8k_flexible"), "ifeval": ("ifeval_prompt_strict", "ifeval_inst_loose")}
    rec = RunRecord(
        experiment=TEST_EXPERIMENT, run_name=f"{model} {suite} @ ollama {version}", start_ms=start_ms,
        end_ms=start_ms + 10_000, params={"model": model, "suite": suite, "num_ctx": str(num_ctx)},
        tags={**HOST_TAGS, "engine.version": version, "model.name": model, "sparkctl.kind": "eval",
              "eval.suite": suite, "guard.valid": "true", **identity.to_tags()},
        summary_metrics={**{k: passed / items for k in metric[suite]}, "passed": float(passed),
                         "items": float(items), "dnf_count": 0.0})
    result = record_run(rec, Spool(tmp_path / "seed-spool.jsonl"), store)
    assert result.synced, result.message
    return result.run_id


def write_suite(folder: Path, n: int) -> Path:
    """n questions in GSM8K's format; question i has i + 1 apples."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "gsm8k-test.jsonl", "w") as fh:
        for i in range(n):
            q = f"Sam has {i + 1} apples and buys 3 more. How many apples does Sam have?"
            fh.write(json.dumps({"question": q, "answer": f"{i + 1} + 3 = {i + 4}\n#### {i + 4}"}) + "\n")
    return folder


def answers(right: dict[str, set[int]]):
    """The fake's answers: model m answers question i right when i is in right[m]."""
    def answer(model: str, prompt: str) -> str | None:
        m = re.search(r"Sam has (\d+) apples", prompt)
        if m is None:
            return None
        i = int(m.group(1)) - 1
        said = i + 4 if i in right[model] else i + 5
        return f"{i + 1} and 3 make {said}. The answer is {said}."
    return answer
