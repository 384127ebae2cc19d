"""Engine selection shared by the commands that send requests (bench, eval):
`--engine NAME`, `--engine-kind`, `--engine-url`, and model names checked for that engine."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_BAD_INPUT, CliError


def engine_choice(args, cfg) -> tuple[str | None, str | None, str | None, str]:
    """(name, kind, url, effective kind) from --engine / --engine-kind / --engine-url."""

    name, kind, url = getattr(args, "engine", None), getattr(args, "engine_kind", None), getattr(args, "engine_url", None)
    if name is not None and (kind is not None or url is not None):
        raise CliError("--engine NAME cannot be combined with --engine-kind/--engine-url", EXIT_BAD_INPUT)
    if name is not None:
        if name not in cfg.engines:
            known = ", ".join(sorted(cfg.engines)) or "none configured"
            raise CliError(f"no engine named {name!r} in [engines] of {cfg.source} ({known})", EXIT_BAD_INPUT)
        return name, None, None, cfg.engines[name].kind
    if kind == "openai" and not url:
        raise CliError("--engine-kind openai needs --engine-url URL", EXIT_BAD_INPUT)
    if url is not None and kind is None:
        kind = "openai"
    return None, kind, url, kind or "ollama"


def validate_models(models: list[str], effective_kind: str) -> list:
    """The names parsed, once, into the ModelNames every layer below passes on (core/names.py):
    Ollama names by Ollama's rules; an OpenAI-compatible server's names are its own (a file
    name, an HF path), so only sanity-checked and kept as given."""
    from sparkctl.core.names import InvalidModelName, ModelName, parse_model_name

    out = []
    for m in models:
        if effective_kind != "ollama":
            if not m.strip() or any(ord(c) < 32 for c in m):
                raise CliError(f"invalid model name {m!r}", EXIT_BAD_INPUT)
            out.append(ModelName.served(m))
            continue
        try:
            out.append(parse_model_name(m))
        except InvalidModelName as exc:
            raise CliError(str(exc), EXIT_BAD_INPUT) from None
    return out
