"""The one reader of an Ollama server's settings (context length, parallel slots, KV cache
type, flash attention, keep-alive, max loaded models) for fit, bench, sweep and the
engine identity: the server's process environment, else its systemd unit, else a runner's
command line (probes/settings_sources.py), else what `[engine]` states for a server sparkctl
cannot read, else Ollama's documented defaults for the server's version
(core/engine_settings.py). Never sparkctl's own shell. The same places give pull's disk check
the server's OLLAMA_MODELS (``read_server_variable``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from sparkctl.config import Config
from sparkctl.core.engine_settings import (SETTINGS, EngineSettings, ServerVariable, resolve, server_variable,
                                           stated_layer, value_text)


def _is_main_engine(cfg: Config, host: str) -> bool:
    """Whether `host` is the dashboard's engine, which `[engine]`'s statements describe: its
    URL, or any URL that is not one of the named `[engines.NAME]` (an engine handed in for
    the main one, as tests and embedders do)."""
    from sparkctl.engines.ollama import normalize_host

    def norm(url: str) -> str:
        try:
            return normalize_host(url)
        except ValueError:
            return url.strip().rstrip("/")

    here = norm(host)
    return here == norm(cfg.engine.host) or all(norm(e.url) != here for e in cfg.engines.values())


def read_engine_settings(cfg: Config | None, host: str, version: str | None = None) -> EngineSettings:
    """Blocking (a /proc scan, maybe a `systemctl` child): call from a thread."""
    from sparkctl.probes.settings_sources import read_server

    reading = read_server(host)
    layers = list(reading.layers)
    stated = cfg.engine.stated_settings() if cfg is not None and _is_main_engine(cfg, host) else {}
    if stated:
        origin = next((cfg.sources[f"engine.{k}"] for k in stated if f"engine.{k}" in cfg.sources), cfg.source)
        layer = stated_layer(stated, origin)
        if layer is not None:
            layers.append(layer)  # after the server's own: what the server says wins
    settings = resolve(layers, version, reading.where, reading.notes)
    contradicted = [
        f"[engine] {name} = {value!r} is not what the server runs with ({value_text(name, s.value)}: "
        f"{s.source}); the server's value is used"
        for name, value in stated.items()
        if (s := settings.get(name)).read and value_text(name, s.value) != str(value)]
    return replace(settings, notes=settings.notes + tuple(contradicted)) if contradicted else settings


def read_server_variable(host: str, name: str) -> ServerVariable:
    """One more of the server's own variables (OLLAMA_MODELS for pull's disk check), from the
    same places as the settings: its process environment, else its systemd unit. Never
    sparkctl's shell. Blocking, as read_engine_settings."""
    from sparkctl.probes.settings_sources import read_server

    reading = read_server(host)
    return server_variable(reading.layers, name, reading.where)


async def engine_settings(cfg: Config | None, engine, version: str | None = None) -> EngineSettings:
    """The settings of `engine`'s server (an Ollama engine), read in a worker thread."""
    return await asyncio.to_thread(read_engine_settings, cfg, engine.host, version)


__all__ = ["EngineSettings", "SETTINGS", "ServerVariable", "engine_settings", "read_engine_settings",
           "read_server_variable"]
