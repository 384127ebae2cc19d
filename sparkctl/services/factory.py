"""Build the real engine and probes from config (tests build doubles instead)."""

from __future__ import annotations

from sparkctl.core.redact import redact_text
from sparkctl.config import Config


class SetupError(Exception):
    """Something in the user's set-up is wrong (a bad host, an unwritable data dir): one
    line for the CLI, exit code 2."""


class EngineChoiceError(SetupError, ValueError):
    """A named engine that is not configured, or a bad kind/URL: one line for the CLI."""


ENGINE_KINDS = ("ollama", "openai")


def make_engine(cfg: Config, name: str | None = None, kind: str | None = None, url: str | None = None,
                stream_timeout: float | None = None):
    """The engine to talk to: `[engine]` by default, `[engines.NAME]` by name, or ad hoc.

    `kind` "openai" needs `url` (llama-server, vLLM, SGLang); kind "ollama" with a url
    points at another Ollama. Raises EngineChoiceError for an unknown name or a bad URL.
    `stream_timeout`: how long a stream may send nothing (an eval's queued items wait longer
    than the default 600 s when another item runs up to its ceiling).
    """
    slow = {} if stream_timeout is None else {"load_timeout": float(stream_timeout)}
    if name is not None:
        if kind is not None or url is not None:
            raise EngineChoiceError("choose an engine by name or by kind/URL, not both")
        named = cfg.engines.get(name)
        if named is None:
            known = ", ".join(sorted(cfg.engines)) or "none configured"
            raise EngineChoiceError(f"no engine named {name!r} in [engines] ({known})")
        kind, url, timeout = named.kind, named.url, named.timeout_s
        model = named.model or None
    else:
        timeout, model = cfg.engine.timeout_s, None
    if kind is None:
        kind = "openai" if url is not None else "ollama"
    if kind not in ENGINE_KINDS:
        raise EngineChoiceError(f"unknown engine kind {kind!r}; expected one of {', '.join(ENGINE_KINDS)}")
    if kind == "ollama":
        from sparkctl.engines.ollama import OllamaEngine

        try:
            return OllamaEngine(url if url is not None else cfg.engine.host, timeout=timeout, **slow)
        except ValueError as exc:
            where = "--engine-url" if url is not None else "[engine] host (or $OLLAMA_HOST)"
            raise EngineChoiceError(redact_text(f"{where}: {exc}")) from None
    from sparkctl.engines.openai_compat import OpenAICompatEngine

    if not url:
        raise EngineChoiceError("an OpenAI-compatible engine needs a URL (--engine-url or [engines.NAME] url)")
    try:
        return OpenAICompatEngine(url, model=model, timeout=timeout, **slow)
    except ValueError as exc:
        raise EngineChoiceError(redact_text(str(exc))) from None


def make_named_engines(cfg: Config) -> dict:
    """One engine object per `[engines.NAME]` (for the dashboard); bad entries are left out."""
    out = {}
    for name in cfg.engines:
        try:
            out[name] = make_engine(cfg, name=name)
        except EngineChoiceError:
            continue
    return out


def make_probes():
    from sparkctl.probes.host import SystemProbes

    return SystemProbes()


def make_recorder(cfg: Config):
    """A blocking RunRecord -> SyncResult callable: spool first, then MLflow (call from a thread)."""
    from sparkctl.services.benched import record_and_note

    spool, store = make_spool_and_store(cfg)
    # which also notes the benches the engine-change note reads
    return lambda record: record_and_note(record, spool, store)


def ensure_data_dir():
    """sparkctl's data dir, made if missing; SetupError (one line) where it cannot be."""
    from sparkctl import paths

    data = paths.data_dir()
    try:
        data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(f"data dir {data}: cannot create it ({exc.strerror}); set $SPARKCTL_DATA_DIR") from None
    return data


def make_spool_and_store(cfg: Config):
    from sparkctl import paths
    from sparkctl.tracking.spool import Spool
    from sparkctl.tracking.store import MlflowStore, default_tracking_uri

    data = ensure_data_dir()
    uri = cfg.tracking.uri or default_tracking_uri(data)
    # MLflow's log lines go to <data dir>/mlflow.log (for a server URI too), never the terminal.
    store = MlflowStore(uri, None, cfg.tracking.experiment, log_dir=data, deadline_s=cfg.tracking.timeout_s)
    return Spool(paths.spool_file()), store
