"""The runs and searches both history readers are checked with (reader vs MLflow's client).

Shared by tests/integration/test_history_readers.py (the installed MLflow, live) and
scripts/mlflow_store_fixtures.py (every MLflow release of pyproject's range, each in a
throwaway virtualenv, recorded under tests/data/mlflow_stores/). Imports neither pytest
nor MLflow: the script runs under another MLflow's interpreter.
"""

from __future__ import annotations

import math

from sparkctl.tracking.record import RunRecord

TEST_EXPERIMENT = "sparkctl-test"

MODELS = ["qwen3:8b", "qwen3", "Qwen3:Latest", "library/qwen3:latest", "myqwen3", "llama3.2:3b", "it's"]

# (filter, order_by): what services/runs writes, and more of MLflow's language
SEARCHES = [
    ("", None),
    ("", ["start_time DESC"]),
    ("", ["metrics.decode_tps_median DESC"]),
    ("", ["metrics.`decode_tps_median` ASC", "start_time"]),
    ("", ["params.num_ctx DESC"]),
    ("", ["tags.`engine.version`"]),
    ("tags.`model.name` ILIKE '%qwen3'", ["start_time DESC"]),
    ("tags.`model.name` ILIKE '%qwen3:latest' AND tags.`engine.version` = '0.13.0'", None),
    ("tags.`model.name` LIKE 'qwen%'", None),
    ('tags.`model.name` = "it\'s"', None),
    ("tags.`engine.version` != '0.13.0'", None),
    ("tags.`sparkctl.kind` = 'eval'", None),
    ("params.num_ctx = '8192' and attributes.status = 'FINISHED'", None),
    ("metrics.decode_tps_median > 40", ["metrics.decode_tps_median DESC"]),
    ("metrics.decode_tps_median != 41.5", None),
    ("metrics.decode_tps_median <= 41.5", None),
    ("attributes.start_time >= 1700000300000", None),
    ("attribute.run_id = '{run_id}'", None),
]


def records(experiment: str = TEST_EXPERIMENT) -> list[RunRecord]:
    out = []
    for i in range(24):
        model = MODELS[i % len(MODELS)]
        decode = float("nan") if i == 5 else 30.0 + (i * 7) % 23 + 0.5
        tags = {"model.name": model, "engine.kind": "ollama", "engine.version": "0.13.0" if i >= 12 else "0.12.6",
                "guard.valid": "true" if i % 5 else "false"}
        if i % 6 == 0:
            tags["sparkctl.kind"] = "eval"
        summary = {"decode_tps_median": decode} if i != 7 else {}  # one run without the metric
        out.append(RunRecord(
            experiment=experiment, run_name=f"{model} run {i}", status="KILLED" if i == 3 else "FINISHED",
            start_ms=1_700_000_000_000 + (i // 2) * 60_000,  # pairs share a start time: run id decides
            end_ms=1_700_000_000_000 + (i // 2) * 60_000 + 5_000,
            params={"model": model, "num_ctx": "8192" if i % 3 else "4096"}, tags=tags,
            # spec_acceptance_pct: a per-repetition figure some repetitions do not have
            step_metrics={"engine_decode_tps": [decode, decode + 1.0, decode - 0.5],
                          "spec_acceptance_pct": [None, 60.0 + i, None, 58.5] if i % 2 else [71.0, None, 70.5]},
            summary_metrics=summary,
            artifacts={"items.jsonl": f'{{"item_id": "{i}", "passed": true}}\n'},
        ))
    return out


def plain(runs: list[dict]) -> list[dict]:
    """NaN != NaN: compare it as a marker."""
    return [{**r, "metrics": {k: ("NaN" if isinstance(v, float) and math.isnan(v) else v)
                              for k, v in r["metrics"].items()}} for r in runs]
