"""llama-benchy's result formats, read and written: the Spark community's bench (and the
`benchmark.csv` of a Spark Arena submission) in sparkctl's terms. Pure: text in, text out.

What the formats are (eugr/llama-benchy, src/llama_benchy/results.py):
- JSON (`--format json`): the run's metadata (version, timestamp "YYYY-MM-DD HH:MM:SSZ",
  latency_mode, latency_ms, model, prefix_caching_enabled, max_concurrency) and
  `benchmarks`, one object per (concurrency, context_size, prompt_size, response_size,
  is_context_prefill_phase) with metrics {mean, std, values}: pp_throughput and
  pp_req_throughput (prefill tok/s, total and per request), tg_throughput and
  tg_req_throughput (decode tok/s), peak_throughput, peak_req_throughput, and ttfr, est_ppt,
  e2e_ttft in milliseconds.
- CSV (`--format csv`): one row per test, the columns below; a test is named
  `pp<prompt_size>` / `tg<response_size>`, then ` @ d<depth>` when the depth is not 0, then
  ` (c<concurrency>)` when the run's largest concurrency is above 1; the context phase of a
  prefix-caching run is `ctx_pp @ d<depth>` / `ctx_tg @ d<depth>`. A pp row carries t/s and
  the latencies, a tg row t/s and the peaks.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

CSV_COLUMNS = (
    "model", "test_name", "t_s_mean", "t_s_std", "t_s_req_mean", "t_s_req_std", "peak_ts_mean", "peak_ts_std",
    "peak_ts_req_mean", "peak_ts_req_std", "ttfr_mean", "ttfr_std", "est_ppt_mean", "est_ppt_std",
    "e2e_ttft_mean", "e2e_ttft_std",
)

_TEST = re.compile(r"^(?P<kind>pp|tg|ctx_pp|ctx_tg)(?P<size>\d*)(?: @ d(?P<depth>\d+))?(?: \(c(?P<conc>\d+)\))?$")


@dataclass(frozen=True)
class Stat:
    mean: float
    std: float | None = None
    values: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        """The values' median where they were kept (JSON); the mean otherwise (CSV)."""
        return statistics.median(self.values) if self.values else self.mean


@dataclass
class Point:
    """One llama-benchy measurement: a depth, a concurrency, prompt and response sizes."""

    model: str
    depth: int = 0
    concurrency: int = 1
    prompt_size: int | None = None
    response_size: int | None = None
    context_phase: bool = False
    metrics: dict[str, Stat] = field(default_factory=dict)  # pp, pp_req, tg, tg_req, peak, peak_req, ttfr, est_ppt, e2e_ttft

    @property
    def key(self) -> tuple[int, int, bool]:
        return (self.depth, self.concurrency, self.context_phase)


@dataclass(frozen=True)
class Report:
    model: str
    points: list[Point]
    meta: dict[str, Any]  # the JSON's metadata (empty for a CSV)
    fmt: str  # "json" | "csv"


def parse_test_name(name: str) -> tuple[str, int | None, int, int]:
    """(kind, size, depth, concurrency) of a llama-benchy test name; ValueError if not one."""
    m = _TEST.match(name.strip())
    if m is None:
        raise ValueError(f"not a llama-benchy test name: {name!r}")
    return (m["kind"], int(m["size"]) if m["size"] else None, int(m["depth"] or 0), int(m["conc"] or 1))


def test_name(kind: str, size: int | None, depth: int, concurrency: int, max_concurrency: int) -> str:
    """The inverse of parse_test_name, as llama-benchy names its rows."""
    head = f"{kind}{size if size is not None and not kind.startswith('ctx_') else ''}"
    d = f" @ d{depth}" if depth or kind.startswith("ctx_") else ""
    c = f" (c{concurrency})" if max_concurrency > 1 else ""
    return head + d + c


_JSON_METRICS = {"pp_throughput": "pp", "pp_req_throughput": "pp_req", "tg_throughput": "tg",
                 "tg_req_throughput": "tg_req", "peak_throughput": "peak", "peak_req_throughput": "peak_req",
                 "ttfr": "ttfr", "est_ppt": "est_ppt", "e2e_ttft": "e2e_ttft"}


def _stat(obj: Any, where: str) -> Stat | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("mean"), (int, float)):
        raise ValueError(f"{where}: expected an object with a numeric mean")
    values = obj.get("values") or ()
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        raise ValueError(f"{where}: values must be a list of numbers")
    std = obj.get("std")
    return Stat(float(obj["mean"]), float(std) if isinstance(std, (int, float)) else None,
                tuple(float(v) for v in values))


def from_json(text: str) -> Report:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ValueError("not a llama-benchy JSON result: no 'benchmarks' list")
    model = str(data.get("model") or "")
    points = []
    for i, b in enumerate(data["benchmarks"]):
        if not isinstance(b, dict):
            raise ValueError(f"benchmarks[{i}] is not an object")
        try:
            p = Point(model, int(b.get("context_size") or 0), int(b.get("concurrency") or 1),
                      int(b["prompt_size"]) if b.get("prompt_size") is not None else None,
                      int(b["response_size"]) if b.get("response_size") is not None else None,
                      bool(b.get("is_context_prefill_phase")))
        except (TypeError, ValueError):
            raise ValueError(f"benchmarks[{i}]: concurrency/context_size/prompt_size/response_size must be "
                             "integers") from None
        for key, short in _JSON_METRICS.items():
            s = _stat(b.get(key), f"benchmarks[{i}].{key}")
            if s is not None:
                p.metrics[short] = s
        points.append(p)
    meta = {k: v for k, v in data.items() if k != "benchmarks"}
    return Report(model, points, meta, "json")


def _num(row: dict[str, str], key: str, where: str) -> float | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: {key} is not a number: {text!r}") from None


def from_csv(text: str) -> Report:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("model", "test_name", "t_s_mean") if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"not a llama-benchy CSV result: no {', '.join(missing)} column")
    points: dict[tuple[str, int, int, bool], Point] = {}
    model = ""
    for n, row in enumerate(reader, start=2):
        where = f"line {n}"
        kind, size, depth, conc = parse_test_name(row.get("test_name") or "")
        model = model or (row.get("model") or "")
        ctx = kind.startswith("ctx_")
        p = points.setdefault((row.get("model") or "", depth, conc, ctx),
                              Point(row.get("model") or "", depth, conc, context_phase=ctx))
        side = "pp" if kind.endswith("pp") else "tg"
        if side == "pp":
            p.prompt_size = size if size is not None else p.prompt_size
        else:
            p.response_size = size if size is not None else p.response_size
        for col, short in (("t_s", side), ("t_s_req", f"{side}_req"), ("peak_ts", "peak"),
                           ("peak_ts_req", "peak_req"), ("ttfr", "ttfr"), ("est_ppt", "est_ppt"),
                           ("e2e_ttft", "e2e_ttft")):
            mean = _num(row, f"{col}_mean", where)
            if mean is not None:
                p.metrics[short] = Stat(mean, _num(row, f"{col}_std", where))
    return Report(model, list(points.values()), {}, "csv")


def parse(text: str) -> Report:
    """A llama-benchy result, JSON or CSV (told apart by its first character)."""
    stripped = text.lstrip()
    if not stripped:
        raise ValueError("the file is empty")
    report = from_json(text) if stripped[0] == "{" else from_csv(text)
    if not report.points:
        raise ValueError("no benchmark rows in it")
    return report


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text with llama-benchy's columns in its order (missing values left empty)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in CSV_COLUMNS})
    return buf.getvalue()
