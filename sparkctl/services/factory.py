"""Build the real engine and probes from config (tests build doubles instead)."""

from __future__ import annotations

from sparkctl.config import Config


def make_engine(cfg: Config):
    from sparkctl.engines.ollama import OllamaEngine

    return OllamaEngine(cfg.engine.host, timeout=cfg.engine.timeout_s)


def make_probes():
    from sparkctl.probes.host import SystemProbes

    return SystemProbes()


def make_recorder(cfg: Config):
    """A blocking RunRecord -> SyncResult callable: spool first, then MLflow (call from a thread)."""
    from sparkctl.tracking.sync import record_run

    spool, store = make_spool_and_store(cfg)
    return lambda record: record_run(record, spool, store)


def make_spool_and_store(cfg: Config):
    from sparkctl import paths
    from sparkctl.tracking.spool import Spool
    from sparkctl.tracking.store import MlflowStore, default_tracking_uri

    data = paths.data_dir()
    data.mkdir(parents=True, exist_ok=True)
    uri = cfg.tracking.uri or default_tracking_uri(data)
    store = MlflowStore(uri, None, cfg.tracking.experiment)
    return Spool(paths.spool_file()), store
