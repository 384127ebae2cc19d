"""Build the real engine and probes from config (tests build doubles instead)."""

from __future__ import annotations

from sparkctl.config import Config


def make_engine(cfg: Config):
    from sparkctl.engines.ollama import OllamaEngine

    return OllamaEngine(cfg.engine.host, timeout=cfg.engine.timeout_s)


def make_probes():
    from sparkctl.probes.host import SystemProbes

    return SystemProbes()
