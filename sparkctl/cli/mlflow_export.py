"""`--mlflow-export FILE` of `bench` (and of its sweeps): the file naming what was written to
MLflow, in AIPerf's mlflow_export.json keys."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, CliError


def write_export(path: str, cfg, runs: list[tuple[str | None, str, str]], parent: str | None) -> None:
    """The file naming what was written to MLflow: AIPerf's mlflow_export.json keys for the
    top run (the sweep's own run, or the only run), and every run as `runs`. Read back from
    MLflow, so it says what the store holds; a run still in the spool has no run id yet."""
    import time

    from sparkctl.services.factory import make_spool_and_store
    from sparkctl.tracking.store import TrackingError

    _spool, store = make_spool_and_store(cfg)
    top = parent or (runs[0][0] if len(runs) == 1 else None)
    out: dict = {"tracking_uri": store.display_uri, "experiment": cfg.tracking.experiment, "run_id": top,
                 "run_name": None, "parent_run_id": None, "live_streaming": False, "reused_live_run": False,
                 "exported_at_ns": time.time_ns(),
                 "runs": [{"run_id": rid, "model": model, "cell": cell} for rid, model, cell in runs]}
    if top:
        try:
            found = store.search_runs(f"attributes.run_id = '{top}'", max_results=1)
        except TrackingError:
            found = []
        if found:
            tags = found[0].get("tags") or {}
            out.update(run_name=found[0].get("run_name"), parent_run_id=tags.get("mlflow.parentRunId"),
                       metric_keys=sorted(found[0].get("metrics") or {}), param_keys=sorted(found[0].get("params") or {}),
                       tag_keys=sorted(tags))
    _write_json(path, out)


def _write_json(path: str, data: dict) -> None:
    import json
    import os
    import tempfile
    from pathlib import Path

    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise CliError(f"--mlflow-export {path}: cannot write it ({exc.strerror or exc})", EXIT_BAD_INPUT) from None
