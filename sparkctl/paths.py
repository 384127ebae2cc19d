"""Where sparkctl keeps things: XDG config/data/cache dirs (platformdirs honours XDG_*)."""

from __future__ import annotations

import os
from pathlib import Path

APP = "sparkctl"


def config_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP, appauthor=False))


def data_dir() -> Path:
    override = os.environ.get("SPARKCTL_DATA_DIR")
    if override:
        return Path(override).expanduser().resolve()
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP, appauthor=False))


def user_config_file() -> Path:
    return config_dir() / "sparkctl.toml"


def state_file(env: "dict[str, str] | None" = None) -> Path:
    """The file sparkctl owns (lanes after promotion, the theme): see sparkctl.statefile."""
    override = (os.environ if env is None else env).get("SPARKCTL_STATE_FILE")
    if override:
        return Path(override).expanduser()
    return config_dir() / "state.toml"


def user_theme_dir() -> Path:
    return config_dir() / "themes"


def spool_file() -> Path:
    return data_dir() / "spool.jsonl"


def residency_dir() -> Path:
    """Where a bench journals the models it found resident (tracking/residency_journal.py)."""
    return data_dir() / "residency"


def residency_journals() -> list[Path]:
    """The journals left there, by a single directory listing: every CLI start and `status`
    call this, so it imports nothing (the journal module is read only when there is one)."""
    d = residency_dir()
    try:
        return [d / n for n in sorted(os.listdir(d)) if n.endswith(".json") and not n.startswith(".")]
    except OSError:
        return []


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory and rename, so readers never see half a file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory, fsync, and rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
