"""One finished bench run, as plain data.

A ``RunRecord`` is what the bench produces and what the spool stores, one JSON line per
record; ``MlflowStore.write`` turns it into an MLflow run. It deliberately knows nothing
about MLflow, so that building, spooling and testing records never imports it.

``record_id`` is assigned once, when the record is created, and travels with it into the
MLflow run as the tag ``sparkctl.record_id``: replaying the same record twice (a crash
between the MLflow write and the spool's "synced" marker) finds that run instead of
writing a second one.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")

ArtifactValue = str | dict | list

# Used verbatim in an MLflow filter string, so keep it to safe characters.
_RECORD_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


# An artifact whose text is a local file's, read when the record is written to MLflow (a
# running eval journals its items this way instead of copying them into every journal line).
FILE_ARTIFACT_KEY = "sparkctl.file"


def file_artifact(path) -> dict[str, str]:
    return {FILE_ARTIFACT_KEY: str(path)}


def new_record_id() -> str:
    return uuid.uuid4().hex


@dataclass(kw_only=True)
class RunRecord:
    """A bench run that has ended (finished, failed, or was stopped by the user).

    - ``params`` and ``tags`` are strings (MLflow stores them as strings; values given as
      other types are converted with ``str``).
    - ``step_metrics`` hold one value per repetition, logged with ``step=i``; ``None``
      marks a repetition that produced no value and is skipped.
    - ``summary_metrics`` are logged once, at step 0 (medians and the like: MLflow's search
      and sort use a metric's latest step, so summaries need their own keys).
    - ``artifacts`` map a file name to its content: a ``str`` is written as text, a dict
      or list as JSON (or YAML for ``.yaml``/``.yml`` names).
    """

    experiment: str
    run_name: str
    status: str = "FINISHED"
    start_ms: int
    end_ms: int
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    step_metrics: dict[str, list[float | None]] = field(default_factory=dict)
    summary_metrics: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, ArtifactValue] = field(default_factory=dict)
    record_id: str = field(default_factory=new_record_id)

    def __post_init__(self) -> None:
        if not _RECORD_ID_RE.fullmatch(str(self.record_id)):
            raise ValueError(f"record_id must be letters, digits, '-' or '_': {self.record_id!r}")
        if self.status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}, not {self.status!r}")
        self.start_ms = int(self.start_ms)
        self.end_ms = int(self.end_ms)
        self.params = {str(k): str(v) for k, v in self.params.items()}
        self.tags = {str(k): str(v) for k, v in self.tags.items()}

    # -- serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """Build a record from ``to_dict`` output; unknown keys (written by a newer
        sparkctl) are ignored so an old version can still replay the spool. Anything of
        another shape (a damaged or edited spool line) is a ValueError naming the field."""
        _check_shape(data)
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except OverflowError:  # int(inf) for a time
            raise ValueError("start_ms or end_ms is not a time") from None

    def to_json(self) -> str:
        """One line of JSON (no newlines inside), suitable for a JSONL file."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        from sparkctl.core.safeload import load_json

        data = load_json(text)
        if not isinstance(data, dict):
            raise ValueError("a run record must be a JSON object")
        return cls.from_dict(data)


def _is_number(v: Any) -> bool:
    """A metric value MLflow can take as a float (an int of hundreds of digits cannot)."""
    return isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**1000)


def _check_shape(data: Any) -> None:
    """ValueError unless ``data`` has the shape ``to_dict`` gives."""
    if not isinstance(data, dict):
        raise ValueError(f"a run record is an object, not {type(data).__name__}")
    for key in ("params", "tags", "step_metrics", "summary_metrics", "artifacts"):
        if not isinstance(data.get(key, {}), dict):
            raise ValueError(f"{key} is {type(data[key]).__name__}, not an object")
    for key in ("experiment", "run_name", "status", "record_id"):
        if key in data and not isinstance(data[key], str):
            raise ValueError(f"{key} is {type(data[key]).__name__}, not a string")
    for key in ("start_ms", "end_ms"):
        v = data.get(key)
        if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63):
            raise ValueError(f"{key} is not a time in milliseconds")
    for name, values in data.get("step_metrics", {}).items():
        if not isinstance(values, list) or not all(v is None or _is_number(v) for v in values):
            raise ValueError(f"step metric {name!r} is not a list of numbers")
    for name, value in data.get("summary_metrics", {}).items():
        if not (value is None or _is_number(value)):
            raise ValueError(f"summary metric {name!r} is not a number")
