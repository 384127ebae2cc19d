"""AIPerf-style MLflow runs, written with MLflow's own client the way AIPerf writes them.

The layout follows AIPerf's published behaviour (ai-dynamo/aiperf: the OTel/MLflow tutorial,
`exporters/mlflow_data_exporter.py` and its live-streaming fanout), not a copy of its files:
- the run is started with the fluent API (`mlflow.start_run(run_name=..., parent_run_id=...)`
  under `--mlflow-parent-run-id`), named `aiperf-<first 8 of benchmark_id>` by default;
- while requests complete, per-request scalars `live.<OTel GenAI name>` in seconds (tokens
  for token.usage, input and output counts both under that one key) go out in `log_batch`
  calls whose step grows by one per value across every key;
- at the end: AIPerf's own summary keys (`<tag>` for the mean, `<tag>.p50`...), the
  `aiperf.completed_requests` count, params (`endpoint.type`, `endpoint.models`,
  `loadgen.concurrency`...), tags (`aiperf.version`, `aiperf.was_cancelled`, `benchmark_id`),
  and `mlflow_export.json` uploaded under `exports/`.
The figures are made up by each test.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field


@dataclass
class AIPerfRequest:
    ttfc_s: float
    tpoc_s: float
    duration_s: float
    input_tokens: int = 128
    output_tokens: int = 64


@dataclass
class AIPerfRun:
    model: str
    requests: list[AIPerfRequest]
    concurrency: int = 1
    parent_run_id: str | None = None
    version: str = "0.9.0"
    benchmark_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def log_aiperf_run(tracking_uri: str, experiment: str, run: AIPerfRun, artifact_dir) -> str:
    """Write `run` as AIPerf does; returns its MLflow run id."""
    import mlflow
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    client = MlflowClient()
    kwargs = {"run_name": f"aiperf-{run.benchmark_id[:8]}"}
    if run.parent_run_id:
        kwargs["parent_run_id"] = run.parent_run_id
    with mlflow.start_run(**kwargs) as active:
        run_id = active.info.run_id
        mlflow.set_tag("benchmark_id", run.benchmark_id)
        # live: each finished request's histogram records, one step per value, batched
        step = 0
        now = int(time.time() * 1000)
        batch = []
        for r in run.requests:
            for name, value in (("gen_ai.client.operation.duration", r.duration_s),
                                ("gen_ai.client.operation.time_to_first_chunk", r.ttfc_s),
                                ("gen_ai.client.operation.time_per_output_chunk", r.tpoc_s),
                                ("gen_ai.client.token.usage", float(r.input_tokens)),
                                ("gen_ai.client.token.usage", float(r.output_tokens))):
                batch.append(Metric(f"live.{name}", float(value), now, step))
                step += 1
        client.log_batch(run_id, metrics=batch, params=[], tags=[])
        # post-run: AIPerf's own summary names (its units: not what sparkctl reads)
        ttft_ms = sorted(r.ttfc_s * 1000 for r in run.requests)
        summary = {"time_to_first_token": sum(ttft_ms) / len(ttft_ms), "time_to_first_token.p50": ttft_ms[len(ttft_ms) // 2],
                   "aiperf.completed_requests": float(len(run.requests))}
        params = {"endpoint.type": "chat", "endpoint.models": run.model, "endpoint.urls": "http://127.0.0.1:8000",
                  "timing.mode": "request_rate", "loadgen.concurrency": str(run.concurrency),
                  "loadgen.request_count": str(len(run.requests))}
        tags = {"aiperf.version": run.version, "aiperf.was_cancelled": "false", "benchmark_id": run.benchmark_id}
        from mlflow.entities import Param, RunTag

        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in summary.items()],
                         params=[Param(k, v) for k, v in params.items()], tags=[RunTag(k, v) for k, v in tags.items()])
        export = {"tracking_uri": tracking_uri, "experiment": experiment, "run_id": run_id,
                  "run_name": kwargs["run_name"], "benchmark_id": run.benchmark_id, "parent_run_id": run.parent_run_id,
                  "live_streaming": True, "reused_live_run": True, "metric_keys": sorted(summary),
                  "param_keys": sorted(params), "tag_keys": sorted(tags), "uploaded_artifacts": ["mlflow_export.json"],
                  "exported_at_ns": time.time_ns()}
        path = artifact_dir / "mlflow_export.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(export, indent=2))
        mlflow.log_artifact(str(path), "exports")
    return run_id
